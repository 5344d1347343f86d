//go:build linux

package runtime

// The loop's stop: forced (Close, a kernel error, a deadline passed) or
// graceful (Shutdown: each connection's OnShutdown, then a close once it
// is idle), and the listeners closed either way. Loop.run exits once the
// kernel holds nothing of the loop.

// forceStop begins the loop's shutdown: stop accepting, close every
// connection with err, exit once the kernel holds nothing of the loop.
func (l *Loop) forceStop(err error) {
	l.forced = true
	if !l.stopping {
		l.stopping = true
		l.closeListener()
	}
	for _, c := range l.conns {
		if c != nil && !c.closed() {
			l.closeConn(c, c.opError("close", err))
		}
	}
}

// beginShutdown stops accepting and sweeps every connection.
func (l *Loop) beginShutdown() {
	if l.stopping {
		return
	}
	l.stopping = true
	l.closeListener()
	for _, c := range l.conns {
		if c != nil && !c.closed() {
			l.sweep(c)
		}
	}
}

// sweep is a graceful shutdown's pass over c: its handler's OnShutdown,
// then a close once c is idle (closeIfIdle). A dial still connecting is
// swept when it connects.
func (l *Loop) sweep(c *Conn) {
	if c.state&stOpen == 0 {
		return
	}
	if l.ho != nil {
		// The new process serves it, or the hand-over gave the
		// protocol's goodbye already (handoff.go).
		if !l.offerHandoff(c) {
			l.closeIfIdle(c)
		}
		return
	}
	l.callOnShutdown(c)
	if !c.closed() {
		l.closeIfIdle(c)
	}
}

// sweepLate sweeps a connection that opened after the shutdown's sweep
// passed: accepted from a completion already on its way, passed on by
// another loop just before its own shutdown, or dialed and connecting
// then. Without it such a connection, if it never sends, holds the
// shutdown until its deadline.
func (l *Loop) sweepLate(c *Conn) {
	if l.stopping && !c.closed() {
		l.sweep(c)
	}
}

// closeListener stops accepting and receiving on every listener of the
// loop and closes its sockets.
func (l *Loop) closeListener() {
	if l.lnClosed {
		return
	}
	l.lnClosed = true
	l.streams, l.packets = 0, 0
	l.d.stopListening()
	l.closeListeners()
}
