package pool

// The idle set's upkeep (warming, reaping, clearing) and the pool's end on this loop.

// Warm opens connections until MinIdle are idle or on their way (without
// exceeding MaxSize, and not while gets wait: they come first). It does
// nothing once the pool is closed.
func (l *Local[C]) Warm() {
	n := min(l.cfg.minIdle-len(l.idle)-l.spare, l.cfg.maxSize-l.open-l.connecting)
	for range n {
		if l.closed || l.waiters.len > 0 {
			return
		}
		l.connect(nil)
	}
}

// Reap closes idle connections past the idle timeout or the maximum
// lifetime. It does nothing once the pool is closed.
func (l *Local[C]) Reap() {
	if l.closed || !l.cfg.expires || len(l.idle) == 0 {
		return
	}
	now := l.clock()
	idle := l.idle
	l.idle = nil
	var kept []*entry[C]
	for _, ls := range idle {
		if c := l.expired(ls, now); c != causeNone {
			l.closeLease(ls, c)
		} else {
			kept = append(kept, ls)
		}
	}
	// Connections a callback returned meanwhile are newer than the kept.
	l.idle = append(kept, l.idle...)
	l.serveWaiters()
}

// Maintain reaps, then warms. The pool runs it every Config.ReapInterval.
func (l *Local[C]) Maintain() {
	l.Reap()
	l.Warm()
}

// Clear closes every idle connection, and makes Put close the connections
// lent out now when they come back (after a backend failover, say).
func (l *Local[C]) Clear() {
	l.gen++
	idle := l.idle
	l.idle = nil
	for _, ls := range idle {
		l.closeLease(ls, causeCleared)
	}
	l.serveWaiters()
}

// State returns what l holds now.
func (l *Local[C]) State() State {
	return State{
		Loops:       1,
		Connections: l.open,
		Connecting:  l.connecting,
		Idle:        len(l.idle),
		Waiters:     l.waiters.len,
	}
}

// Statistics returns l's counters.
func (l *Local[C]) Statistics() Statistics { return l.st }

// close is Pool.Close on this loop: it fails every get in progress with
// ErrClosed and closes the idle connections.
func (l *Local[C]) close() {
	if l.closed {
		return
	}
	l.closed = true
	if l.cancelMaintain != nil {
		l.cancelMaintain()
		l.cancelMaintain = nil
	}
	if l.cancelDeadline != nil {
		l.cancelDeadline()
		l.cancelDeadline = nil
	}
	idle := l.idle
	l.idle = nil
	for _, ls := range idle {
		l.closeLease(ls, causeOnClose)
	}
	for r := l.active.head; r != nil; r = l.active.head {
		l.detach(r)
		l.fail(r, ErrClosed)
	}
}

// stop runs when the loop stops: the Local closes, counts the connections
// it can no longer get back as closed (a stopping runtime closes every
// connection of the loop), and leaves the registry.
func (l *Local[C]) stop() {
	l.close()
	l.stopped = true
	l.st.ClosedOnClose += uint64(l.open)
	l.open, l.connecting, l.spare = 0, 0, 0
	l.p.retire(l)
}

// startMaintenance arms the maintenance timer.
func (l *Local[C]) startMaintenance() {
	if l.cfg.reapInterval > 0 {
		l.cancelMaintain = l.loop.Schedule(l.cfg.reapInterval, l.tickFn)
	}
}

func (l *Local[C]) tick() {
	l.cancelMaintain = nil
	if l.closed {
		return
	}
	l.Maintain()
	if !l.closed && l.cancelMaintain == nil {
		l.startMaintenance()
	}
}
