//go:build linux

package runtime

import (
	"net"
	"time"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// A connection's life on its loop: a slot, opened, data in and out, the
// end of the peer's stream, closing, and the slot freed once the kernel is
// done with it. The driver-facing methods here are the loop's half of the
// contract in driver.go.

// newConn takes a slot for a connection on fd.
func (l *Loop) newConn(fd int, h Handler) *Conn {
	c := &Conn{loop: l, fd: int32(fd), h: h}
	if n := len(l.free); n > 0 {
		c.slot = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		c.slot = uint32(len(l.conns))
		l.conns = append(l.conns, nil)
		l.gens = append(l.gens, 0)
	}
	c.gen = (l.gens[c.slot] + 1) & genMask
	l.gens[c.slot] = c.gen
	l.conns[c.slot] = c
	l.open++
	return c
}

// genMask bounds a slot's generation: 24 bits, which io_uring's user data
// and epoll's event data both carry.
const genMask = 1<<24 - 1

// conn returns the connection in slot if its generation matches.
func (l *Loop) conn(slot, gen uint32) *Conn {
	if int(slot) >= len(l.conns) {
		return nil
	}
	c := l.conns[slot]
	if c == nil || c.gen != gen {
		return nil
	}
	return c
}

// freeSlot returns a released connection's slot, with the buffer it was
// sending and its dial state. Drivers call it once the kernel holds nothing
// of c.
func (l *Loop) freeSlot(c *Conn) {
	if l.conns[c.slot] != c {
		return
	}
	l.conns[c.slot] = nil
	l.free = append(l.free, c.slot)
	c.dropOut()
	c.setDial(nil) // the kernel is done with the socket address
}

// accepted opens a connection on a descriptor the listener ln gave.
func (l *Loop) accepted(fd int, ln *Listener) {
	l.cnt[sAccepts]++
	c := l.newConn(fd, l.h)
	c.ln = ln
	if err := l.d.start(c); err != nil {
		l.closeConn(c, c.opError("read", err))
		return
	}
	if ln != nil && ln.TLS {
		l.tlsAccepted(c) // OnOpen once the handshake succeeded
		return
	}
	l.opened(c)
	l.sweepLate(c)
}

// spreadConn spreads the connections of a shared listener (a Unix or an
// inherited socket, which every loop accepts from) over the loops: the
// loop whose accept wakes first would otherwise take a whole burst (a
// multishot accept, or epoll's accept loop, empties the backlog: measured
// in docs/decisions/0020). Connection i of this loop's accepts goes to
// loop i mod n, posted to it; it reports false when the connection stays
// here (its turn, a runtime still starting, a connection cap, which a
// loop enforces only on what it accepts itself, or a target that
// stopped).
func (l *Loop) spreadConn(fd int, info *Listener) bool {
	rt := l.rt
	if rt == nil || l.stopping || l.cfg.MaxConns > 0 || !rt.started.Load() || len(rt.loops) < 2 {
		return false
	}
	to := rt.loops[l.spread%len(rt.loops)]
	l.spread++
	if to == l {
		return false
	}
	if to.post(func() { to.adopt(fd, info, l) }, true) != nil {
		return false
	}
	l.cnt[sHandedOver]++
	return true
}

// adopt opens a connection loop from accepted and passed on (spreadConn). A loop
// that is already on its way out (the connection was posted just before it
// closed its door) gives the connection back to from rather than reset
// it; only when from has stopped too is it closed.
func (l *Loop) adopt(fd int, info *Listener, from *Loop) {
	if l.forced {
		if from == l || from.post(func() { from.adoptBack(fd, info) }, true) != nil {
			_ = sys.Close(fd)
		}
		return
	}
	l.accepted(fd, info)
}

// adoptBack opens a connection this loop passed on and got back.
func (l *Loop) adoptBack(fd int, info *Listener) {
	if l.forced {
		_ = sys.Close(fd)
		return
	}
	l.accepted(fd, info)
}

// opened runs the handler's OnOpen and starts the connection's timers.
func (l *Loop) opened(c *Conn) {
	l.openTimers(c)
	l.callOnOpen(c)
}

// openTimers marks c open and starts its timers (an accepted or dialed
// connection, or one adopted from another process, adopt.go).
func (l *Loop) openTimers(c *Conn) {
	c.state |= stOpen
	c.opened = l.stamp()
	if l.cfg.IdleTimeout > 0 {
		c.SetIdleTimeout(l.cfg.IdleTimeout)
	}
	if l.cfg.MaxLifetime > 0 {
		c.SetMaxLifetime(l.cfg.MaxLifetime)
	}
}

// readResult is the driver's report of one receive on c into data: n > 0
// bytes arrived (data[:n]), 0 is the end of the peer's stream, and a
// negative n is the errno of call. Drivers keep what is theirs (EAGAIN, a
// cancel, out of buffers) and hand over the rest.
func (l *Loop) readResult(c *Conn, data []byte, n int, call string) {
	switch {
	case n > 0:
		l.received(c, data[:n])
	case n == 0:
		l.peerEOF(c)
	default:
		l.fail(c, "read", errnoErr(call, unix.Errno(-n)))
	}
}

// received delivers data to the handler.
func (l *Loop) received(c *Conn, data []byte) {
	if c.state&(stClosing|stClosed|stEOF) != 0 {
		// Closing, closed or past the end of stream: nobody reads it.
		if c.state&stLingering != 0 {
			l.lingerDiscard(c, len(data))
		}
		return
	}
	l.cnt[sBytesIn] += uint64(len(data))
	if s := c.side; s != nil && s.idleTimeout > 0 {
		s.lastRead = l.stamp()
	}
	c.state |= stSpoke
	if c.tlsState() != nil {
		l.tlsReceived(c, data)
	} else {
		l.callOnData(c, data)
	}
	if l.stopping {
		l.closeIfIdle(c)
	}
}

// peerEOF handles the end of the peer's stream: OnEOF, or a close once the
// queue is sent.
func (l *Loop) peerEOF(c *Conn) {
	if c.state&(stClosed|stEOF) != 0 {
		return
	}
	if c.tlsState() != nil && l.tlsPeerEOF(c) {
		return
	}
	c.state |= stEOF
	if c.state&stLingering != 0 {
		l.closeConn(c, nil) // the peer has read the answer and ended
		return
	}
	if c.state&stClosing == 0 && l.callOnEOF(c) {
		return
	}
	c.Close()
}

// lingerStart begins a lingering close (Conn.CloseLinger) once c's queue
// is sent: the write side is shut down, and c reads and discards until
// its peer ends its stream or a bound is reached.
func (l *Loop) lingerStart(c *Conn) {
	if t := c.lingerTimer(); t != nil {
		t.Stop()
	}
	if c.state&stEOF != 0 {
		l.closeConn(c, nil) // nothing more can come
		return
	}
	l.shutWrite(c)
	if c.closed() {
		return
	}
	c.state |= stLingering
	// Reading resumes to discard: paused by the handler, or left unarmed
	// by a receive that ended while the queue drained (a closing
	// connection is not re-armed until it lingers).
	c.state &^= stPauseRead
	if !c.readPaused() {
		l.d.resumeRead(c)
	}
	if d := l.cfg.LingerInput; d > 0 {
		c.more().lingerTimer = l.AfterFunc(d, c.lingerInputDone)
	}
}

// lingerDiscard counts n bytes a lingering connection dropped, and closes
// it past Config.LingerInputBytes.
func (l *Loop) lingerDiscard(c *Conn, n int) {
	s := c.more()
	s.discarded += n
	l.cnt[sLingerDiscarded] += uint64(n)
	if max := l.cfg.LingerInputBytes; max > 0 && s.discarded >= max {
		l.closeConn(c, nil)
	}
}

// queued is called after bytes were added to c's outbound queue: it arms
// the write timeout and applies the outbound cap.
func (l *Loop) queued(c *Conn) {
	c.watchWrite()
	if l.cfg.MaxOutbound == 0 || c.Buffered() < l.cfg.MaxOutbound || c.state&(stPaused|stClosed) != 0 ||
		l.cfg.OutboundPolicy == DropWrites {
		return
	}
	if l.cfg.OutboundPolicy == CloseSlowConsumer {
		l.cnt[sSlowConsumers]++
		l.closeConn(c, c.opError("write", ErrSlowConsumer))
		return
	}
	was := c.readPaused()
	c.state |= stPaused | stOverCap
	l.paused++
	l.cnt[sPauses]++
	if !was {
		l.d.pauseRead(c)
	}
}

// sendResult is the driver's report of one send of c.out.pending(): the
// kernel took n bytes, or the send failed with err. It counts them, moves
// the queue on, resumes a paused connection below the low-water mark (with
// OnDrain after the current callback), and once the queue is empty does
// what waited for it (a Close, a CloseWrite, a graceful shutdown). It
// reports whether bytes remain for the driver to send.
func (l *Loop) sendResult(c *Conn, n int, err error) (more bool) {
	if c.closed() {
		return false
	}
	if err != nil {
		l.fail(c, "write", err)
		return false
	}
	l.cnt[sBytesOut] += uint64(n)
	c.out.advance(l, n)
	c.putOut() // if that emptied it
	c.progress = l.stamp()
	if c.state&stOverCap != 0 && c.Buffered() <= l.cfg.OutboundLowWater {
		c.state &^= stOverCap
		if c.state&stPaused != 0 {
			c.state &^= stPaused
			l.paused--
			if !c.readPaused() {
				l.d.resumeRead(c)
			}
		}
		l.notify(note{kind: noteDrain, c: c})
	}
	if c.closed() {
		return false
	}
	if c.fileSend() != nil {
		if l.fileSendHook(c) {
			return false
		}
		return c.out.buffered() > 0
	}
	if c.Buffered() > 0 {
		return true
	}
	l.drained(c)
	return false
}

// wroteDirect counts bytes the epoll driver wrote straight from a
// handler's buffer, with nothing queued before them.
func (l *Loop) wroteDirect(n int) { l.cnt[sBytesOut] += uint64(n) }

// drained does what waited for c's queue to empty.
func (l *Loop) drained(c *Conn) {
	switch {
	case c.closed():
	case c.state&stLinger != 0:
		if c.state&stLingering == 0 {
			l.lingerStart(c)
		}
	case c.state&stClosing != 0:
		l.closeConn(c, nil)
	case c.state&stCloseWriteAsked != 0:
		l.shutWrite(c)
	case l.stopping:
		l.closeIfIdle(c)
	}
}

// shutWrite shuts c's write side down, once.
func (l *Loop) shutWrite(c *Conn) {
	if c.state&(stClosed|stWriteClosed) != 0 {
		return
	}
	c.state |= stWriteClosed
	l.d.shutdownWrite(c)
}

// newConnGrace is how long a graceful shutdown waits for the first request
// of a connection that has sent nothing yet (net/http waits 5 s).
const newConnGrace = time.Second

// closeIfIdle closes c during a graceful shutdown once it has no request
// in flight and nothing queued. A connection whose peer has sent nothing
// yet is not idle: its first request may be on its way (it connected just
// as the shutdown began, or was in the accept queue), so it is closed
// after that request, or at the shutdown's deadline, as net/http treats a
// new connection. A dialed connection the handler opened is idle from the
// start.
func (l *Loop) closeIfIdle(c *Conn) {
	if l.ho != nil && l.offerHandoff(c) {
		return // handed to the new process, or waiting to be (handoff.go)
	}
	if c.ln != nil && c.state&stSpoke == 0 {
		if age := l.now.Sub(l.at(c.opened)); age < newConnGrace {
			if c.state&stGraceArmed == 0 {
				c.state |= stGraceArmed
				l.AfterFunc(newConnGrace-age, func() { l.closeIfIdle(c) })
			}
			return
		}
	}
	if c.inFlight() == 0 && c.idleOut() && c.state&(stClosing|stClosed|stConnecting) == 0 {
		c.Close()
	}
}

// fail closes c because op failed with err.
func (l *Loop) fail(c *Conn, op string, err error) {
	if c.closed() {
		return
	}
	l.closeConn(c, c.opError(op, err))
}

// closeConn releases c's descriptor and tells whoever waits: the handler's
// OnClose with err (after the current callback), or a dial's done
// function.
func (l *Loop) closeConn(c *Conn, err error) {
	if c.closed() {
		return
	}
	if c.tlsState() != nil {
		err = l.tlsClosing(c, err)
	}
	wasOpen := c.state&stOpen != 0
	if c.state&stPaused != 0 {
		l.paused--
	}
	c.state |= stClosed | stClosing
	c.state &^= stPaused
	l.open--
	if l.open == 0 {
		l.lastClosed()
	}
	// A dial that never connected was never counted open. c.dial stays
	// until the slot is freed: a connect still in flight reads the socket
	// address in it.
	d := c.dialing()
	if d == nil {
		l.cnt[sCloses]++
	}
	c.stopTimers()
	if c.fileSend() != nil {
		l.abortFileSend(c, err)
	}
	l.d.release(c)
	c.dropQueued()
	l.maybeResumeAccept()
	if d != nil && d.done != nil {
		if err == nil {
			err = c.opError("dial", net.ErrClosed)
		}
		l.notify(note{kind: noteDialFailed, err: err, done: d.done})
		d.done = nil
		return
	}
	if wasOpen {
		l.notify(note{kind: noteClose, c: c, err: err})
	}
}
