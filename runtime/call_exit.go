//go:build linux

package runtime

import ()

// A target that exits, and a loop's own exit: what is between them is
// settled in order (see call.go's header).

// peerGone settles, in order, everything between l and peer, which has
// exited: what peer pushed to l (replies to l's calls, and calls of its
// own, which run), then the replies peer held for l when it exited, then
// l's calls that peer never ran (in the queue to it, which l may read now
// that peer never will, and in l's backlog): their done functions get
// ErrLoopStopped.
func (l *Loop) peerGone(peer *Loop) {
	c := &l.calls
	c.gone[peer.id] = true
	l.runFrom(peer.id)
	left := &peer.calls.backlog[l.id] // peer's, untouched since it exited
	for b := left.pop(); b != nil; b = left.pop() {
		if b.reply {
			l.replied(b)
		}
	}
	q := peer.calls.inbound[l.id]
	for b := q.pop(); b != nil; b = q.pop() {
		l.settle(b)
	}
	mine := &c.backlog[peer.id]
	for b := mine.pop(); b != nil; b = mine.pop() {
		l.settle(b)
	}
	c.heldCalls[peer.id] = 0
}

// exitCalls is the loop's last word on calls, after its last enter: it
// runs what arrived, fails the calls it made and never sent
// (ErrLoopStopped: those its backlog held, then those of this turn), and
// leaves in its backlog, for each peer to take once it sees the loop
// exited, the replies its queues had no room for. Then it wakes every
// peer. (Replies to calls it sent, and their done functions, are dropped
// with it.)
func (l *Loop) exitCalls() {
	c := &l.calls
	c.exiting = true
	l.runCalls()
	for _, peer := range c.held {
		q := &c.backlog[peer.id]
		var replies batchFIFO
		for b := q.pop(); b != nil; b = q.pop() {
			if b.reply {
				replies.push(b)
				continue
			}
			c.inFlight[peer.id]--
			l.failCalls(b)
		}
		*q = replies
	}
	c.held = nil
	// Done functions that fail may make calls again: those fail too.
	for len(c.dirty) > 0 {
		dirty := c.dirty
		c.dirty = nil
		for _, to := range dirty {
			b := c.pending[to.id]
			c.pending[to.id] = nil
			l.failCalls(b)
		}
	}
	c.exited.Store(true)
	if l.rt == nil {
		return
	}
	for _, peer := range l.rt.peers {
		if peer != l && peer.d != nil {
			peer.wakeAfterExit()
		}
	}
}

// wakeIfOpen wakes l, from another loop's thread or any goroutine, unless
// l has closed its wake-up descriptor's door: a loop closes the descriptor
// after it sets wakeClosed (under wakeMu), so a wake-up written after that
// would land in whatever descriptor took the number (a connection's
// socket).
func (l *Loop) wakeIfOpen() {
	l.wakeMu.RLock()
	if !l.wakeClosed {
		l.d.wake()
	}
	l.wakeMu.RUnlock()
}

// wakeAfterExit wakes l through its eventfd for a peer that has exited,
// whatever l's wake-up flag says (driver.wakeAnyway): a MSG_RING the peer
// prepared and never submitted, or whose failure it never reaped, may have
// set it with no wake-up on its way. At worst l wakes once more than it
// needed to.
func (l *Loop) wakeAfterExit() {
	l.wakeMu.RLock()
	if !l.wakeClosed {
		l.d.wakeAnyway()
	}
	l.wakeMu.RUnlock()
}
