//go:build linux

package runtime

import (
	"net"
	"time"
)

// connSide is the state of a connection that most connections do not use
// most of the time: a dial in progress, the addresses once asked for, the
// idle and lifetime timers, a close's linger, the requests in flight, a
// file send in progress, a TLS connection's session, a protocol adapter's
// value while it holds input across reads (SetAdapterValue). An
// idle WebSocket or an idle keep-alive connection between requests needs
// none of it, so it lives beside Conn, allocated on first use and dropped
// again once nothing in it is in use (trimSide), and Conn stays in a
// smaller size class (docs/decisions/0065-the-idle-websocket-floors.md).
type connSide struct {
	dial         *dialState
	sf           *fileSend // a file send in progress (sendfile.go)
	tls          *connTLS  // a TLS connection's session (tls.go), for its life
	laddr, raddr net.Addr

	idleTimeout time.Duration
	idleTimer   *Timer
	lastRead    stamp // the last input's time, kept while idleTimeout is set
	lifeTimer   *Timer
	lingerTimer *Timer
	requests    int // in flight, as BeginRequest/EndRequest count them
	discarded   int // input dropped by a lingering close (CloseLinger)

	adapter any // the protocol adapter's (SetAdapterValue)
}

// more returns c's side state, taking it on first use from the loop's
// spare ones (or allocating it: also for a Conn of no loop, which a
// protocol adapter's tests drive alone through SetAdapterValue).
func (c *Conn) more() *connSide {
	if c.side == nil {
		if c.loop != nil {
			c.side = popSpare(&c.loop.spareSides)
		}
		if c.side == nil {
			c.side = new(connSide)
		}
	}
	return c.side
}

// trimSide drops c's side state once none of it is in use, keeping it
// for the next connection that needs one: every connection under an idle
// timeout takes one when it opens, and a WebSocket gives it back at its
// upgrade; reused, it is not garbage that the heap goal grows by. A Conn
// of no loop (an adapter's tests) has no spares to give it to: it keeps it.
func (c *Conn) trimSide() {
	if s := c.side; s != nil && c.loop != nil && *s == (connSide{}) {
		c.side = nil
		if l := c.loop; len(l.spareSides) < maxSpares {
			l.spareSides = append(l.spareSides, s)
		}
	}
}

// AdapterValue returns the value stored with SetAdapterValue.
func (c *Conn) AdapterValue() any {
	if c.side == nil {
		return nil
	}
	return c.side.adapter
}

// SetAdapterValue stores a per-connection value for a protocol adapter: a
// percore.Handler that serves the connection on behalf of the handler the
// user wrote (frame.Split keeps its partial token and its Writer here), so
// that Value and SetValue stay the user's. One adapter serves a
// connection; a handler that no adapter serves has no use for it. The
// value is kept beside the connection (its side state, taken on first
// use): an adapter that stores one only while it holds input across
// reads, and nil otherwise, keeps an idle connection at its smallest.
func (c *Conn) SetAdapterValue(v any) {
	if v != nil {
		c.more().adapter = v
	} else if s := c.side; s != nil {
		s.adapter = nil
		c.trimSide()
	}
}

// dialing returns c's dial in progress, or nil.
func (c *Conn) dialing() *dialState {
	if c.side == nil {
		return nil
	}
	return c.side.dial
}

// setDial records c's dial in progress; nil ends it.
func (c *Conn) setDial(d *dialState) {
	if d != nil {
		c.more().dial = d
	} else if c.side != nil {
		c.side.dial = nil
		c.trimSide()
	}
}

// fileSend returns c's file send in progress (sendfile.go), or nil.
func (c *Conn) fileSend() *fileSend {
	if c.side == nil {
		return nil
	}
	return c.side.sf
}

// tlsState returns a TLS connection's session (tls.go); nil for plain
// TCP. Set when the connection opens, it keeps c's side state for good.
func (c *Conn) tlsState() *connTLS {
	if c.side == nil {
		return nil
	}
	return c.side.tls
}

// inFlight returns how many requests BeginRequest began and EndRequest
// did not end yet.
func (c *Conn) inFlight() int {
	if c.side == nil {
		return 0
	}
	return c.side.requests
}

// lingerTimer returns the timer of a close that waits (Linger,
// LingerInput), or nil.
func (c *Conn) lingerTimer() *Timer {
	if c.side == nil {
		return nil
	}
	return c.side.lingerTimer
}

// stamp is a time on a loop's clock, in nanoseconds since the loop first
// took one: a quarter of a time.Time, for the times every connection keeps.
// Loop.stamp takes one, Loop.at turns one back into a time.
type stamp int64

// stamp returns the loop's time of the turn (Loop.Now) as a stamp.
func (l *Loop) stamp() stamp {
	if l.epoch.IsZero() {
		l.epoch = l.now
	}
	return stamp(l.now.Sub(l.epoch))
}

// at returns the time that s stands for.
func (l *Loop) at(s stamp) time.Time { return l.epoch.Add(time.Duration(s)) }
