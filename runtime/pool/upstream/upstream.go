//go:build linux

package upstream

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/pool"
)

// Manager dials connections to one upstream address from the calling loop,
// which must be a *percore.Loop. It is safe for concurrent use: it holds
// only the address.
type Manager struct {
	addr netip.AddrPort
}

// New returns a Manager for address, a literal "ip:port" (a loop never
// resolves names).
func New(address string) (*Manager, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("upstream: address %q: %w", address, err)
	}
	return &Manager{addr: ap}, nil
}

// Addr returns the upstream address.
func (m *Manager) Addr() netip.AddrPort { return m.addr }

// Connect dials the upstream from loop.
func (m *Manager) Connect(loop pool.Loop, done func(*Conn, error)) {
	l, ok := loop.(*percore.Loop)
	if !ok {
		done(nil, fmt.Errorf("upstream: connect from a %T, not a *percore.Loop", loop))
		return
	}
	c := &Conn{}
	err := l.DialAddrPort(m.addr, handler{c}, func(pc *percore.Conn, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		c.pc = pc
		done(c, nil)
	})
	if err != nil {
		done(nil, err)
	}
}

// Validate checks, without a round trip, that c is still open and in step:
// a connection the upstream closed while it was idle fails here (and is
// replaced). A protocol that needs a real ping wraps the Manager.
func (m *Manager) Validate(_ pool.Loop, c *Conn, done func(error)) {
	if c.closed || c.broken {
		done(c.Err())
		return
	}
	done(nil)
}

// Broken reports whether c must not be lent again: it is closed, was marked
// broken, received bytes nobody asked for, or still has a receiver
// attached.
func (m *Manager) Broken(c *Conn) bool {
	return c.closed || c.broken || c.onData != nil || c.onClose != nil || c.pc.Closed()
}

// Close closes c at once, discarding anything queued.
func (m *Manager) Close(c *Conn) {
	c.onData, c.onClose = nil, nil
	if c.err == nil {
		c.err = errClosed
	}
	c.pc.Abort()
}

var errClosed = fmt.Errorf("upstream: %w", net.ErrClosed)

// Conn is one pooled upstream connection. Its methods must be called on the
// thread of the loop that dialed it.
type Conn struct {
	pc      *percore.Conn
	onData  func([]byte)
	onClose func(error)
	closed  bool
	broken  bool
	err     error // why it closed
}

// ErrUnsolicited is the reason a connection that received bytes while no
// exchange was in progress was closed.
var ErrUnsolicited = errors.New("upstream: bytes received with no request in flight")

// Write queues p to the upstream (it never blocks; see percore.Conn.Write).
func (c *Conn) Write(p []byte) (int, error) { return c.pc.Write(p) }

// Receive attaches the lessee's callbacks: onData gets the bytes the
// upstream sends (valid only during the call), onClose the reason if the
// connection closes while they are attached. Receive(nil, nil) detaches
// them once the reply is complete. While they are attached, a reply is on
// the way: the connection counts a request in flight
// (percore.Conn.BeginRequest), so that a graceful Shutdown of the runtime
// waits for the reply instead of closing the connection as idle.
func (c *Conn) Receive(onData func(data []byte), onClose func(err error)) {
	was := c.onData != nil || c.onClose != nil
	c.onData, c.onClose = onData, onClose
	switch now := onData != nil || onClose != nil; {
	case now && !was:
		c.pc.BeginRequest()
	case was && !now:
		c.pc.EndRequest() // may close the connection, if the runtime is shutting down
	}
}

// MarkBroken makes Broken report c, so that Put closes it: call it when an
// exchange was cut short (a timeout, a malformed reply).
func (c *Conn) MarkBroken() { c.broken = true }

// Err returns why c closed, or nil while it is open.
func (c *Conn) Err() error {
	switch {
	case c.err != nil:
		return c.err
	case c.closed:
		return fmt.Errorf("upstream: connection closed by the peer: %w", io.EOF)
	case c.broken:
		return errors.New("upstream: connection marked broken")
	}
	return nil
}

// Raw returns the underlying percore connection, for its addresses and
// socket options. Do not close it or write to it around the pool.
func (c *Conn) Raw() *percore.Conn { return c.pc }

// handler is a Conn's percore.Handler, kept apart so that the callbacks are
// not part of Conn's API.
type handler struct{ c *Conn }

func (h handler) OnOpen(pc *percore.Conn) { h.c.pc = pc }

// OnData passes the bytes to the attached receiver, or closes a connection
// that nobody listens to (its protocol is out of step).
func (h handler) OnData(pc *percore.Conn, data []byte) {
	c := h.c
	if c.onData == nil {
		c.broken = true
		c.err = ErrUnsolicited
		pc.Abort()
		return
	}
	c.onData(data)
}

// OnClose records why the connection closed and tells the attached
// receiver, if any.
func (h handler) OnClose(_ *percore.Conn, err error) {
	c := h.c
	c.closed = true
	if c.err == nil && err != nil && !errors.Is(err, net.ErrClosed) {
		c.err = err
	}
	if f := c.onClose; f != nil {
		c.onData, c.onClose = nil, nil
		f(c.Err())
	}
}
