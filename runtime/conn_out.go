//go:build linux

package runtime

import ()

// outQueue is a connection's outbound bytes: those the kernel is taking
// (sending, from sent on) and those written after them (next). Bytes never
// move once queued, so a long queue drains in linear time, and the bytes of
// a send in flight stay where the kernel reads them. Both backends use it
// the same way: pending gives the bytes to send, advance takes the count
// the kernel accepted.
type outQueue struct {
	next     []byte
	sending  []byte
	sent     int
	reserved int // room the last reserve gave, until commit
	// shared says which of next and sending is a caller's immutable
	// slice (addShared) rather than a buffer of the loop's pool: it is
	// sent as it is, never written to and never given to the pool.
	shared sharedBufs
}

// sharedBufs marks the buffers of an outQueue that are not the pool's.
type sharedBufs uint8

const (
	sharedNext    sharedBufs = 1 << iota // next is a caller's slice (len == cap)
	sharedSending                        // sending is a caller's slice
)

// A connection holds an outQueue only while it uses one (Conn.out is nil
// otherwise): it takes one from its loop's spares with the first byte
// queued (outw) and gives it back once the queue holds nothing (putOut):
// the send that empties it, or the release of its slot. An idle
// connection, which has nothing queued, so costs a pointer. The methods
// that only read (buffered, inFlight, pending) take a nil queue as an
// empty one; those that add need the queue outw returns.

// outw returns c's outbound queue, taking one from the loop's spares (or
// allocating it) if c holds none.
func (c *Conn) outw() *outQueue {
	if c.out == nil {
		l := c.loop
		if c.out = l.spareOut.take(); c.out == nil {
			c.out = new(outQueue)
		}
	}
	return c.out
}

// The loop's spare outbound queues are a burstSpares (conn_timers.go): a
// publish to N subscribers of one loop takes N queues in one turn and
// gives them back once the sends complete, so the list grows to what the
// loop's bursts need and the next burst allocates nothing (decision 0060:
// fan-out allocates nothing per subscriber), and each trim gives back what
// no turn took during the period.

// putOut gives c's queue back to the loop's spares if it holds nothing: no
// bytes queued or being sent, no room reserved. (A zero-copy send's buffer
// is its hold's, not the queue's, once the queue has moved past it:
// uring_zc.go.)
func (c *Conn) putOut() {
	q := c.out
	if q == nil || q.sending != nil || len(q.next) > 0 || q.reserved > 0 {
		return
	}
	l := c.loop
	q.putNext(l) // the empty buffer of a reservation committed with nothing
	*q = outQueue{}
	c.out = nil
	if l.spareOut.put(q) {
		l.armTrimOnce()
	}
}

// dropQueued drops what c queued that no send has taken up yet (a close):
// the queue goes back to the spares unless a send is in flight, and then
// freeSlot's dropOut gives it back.
func (c *Conn) dropQueued() {
	if q := c.out; q != nil {
		q.dropNext(c.loop)
		q.reserved = 0
		c.putOut()
	}
}

// dropOut gives back all of c's queue, whatever it holds: the kernel is
// done with the connection (freeSlot).
func (c *Conn) dropOut() {
	if q := c.out; q != nil {
		q.dropSending(c.loop)
		c.dropQueued()
	}
}

// buffered returns how many queued bytes the kernel has not taken yet
// (none in a nil queue).
func (q *outQueue) buffered() int {
	if q == nil {
		return 0
	}
	return len(q.next) + len(q.sending) - q.sent
}

// inFlight reports whether the driver is taking bytes from sending.
func (q *outQueue) inFlight() bool { return q != nil && q.sending != nil }

// pending returns the bytes to send next: the rest of the buffer being
// sent, or, once that is done, everything written since (which becomes the
// buffer being sent).
func (q *outQueue) pending() []byte {
	if q == nil {
		return nil
	}
	if q.sending == nil {
		if len(q.next) == 0 {
			return nil
		}
		q.sending, q.next, q.sent = q.next, nil, 0
		if q.shared&sharedNext != 0 {
			q.shared = sharedSending // sending was nil: only next was marked
		}
	}
	return q.sending[q.sent:]
}

// advance records that the kernel took n bytes of pending, and gives the
// buffer back to l's pool once all of it is sent.
func (q *outQueue) advance(l *Loop, n int) {
	q.sent += n
	if q.sent >= len(q.sending) {
		q.dropSending(l)
	}
}

// add queues p after everything queued (and ends a reservation: the room
// may move). Past the loop's largest pooled
// size the buffer at least doubles when it grows, so that a long burst of
// writes costs amortised constant time per byte.
func (q *outQueue) add(l *Loop, p []byte) {
	q.reserved = 0
	if n := len(q.next) + len(p); n > cap(q.next) {
		b := append(l.getBuf(max(n, 2*cap(q.next))), q.next...)
		q.putNext(l)
		q.next = b
	}
	q.next = append(q.next, p...)
}

// reserve makes room for n more bytes after next and returns it.
func (q *outQueue) reserve(l *Loop, n int) []byte {
	if len(q.next)+n > cap(q.next) {
		b := append(l.getBuf(max(len(q.next)+n, 2*cap(q.next))), q.next...)
		q.putNext(l)
		q.next = b
	}
	q.reserved = n
	return q.next[len(q.next) : len(q.next)+n]
}

// room returns the room the last reserve gave (0 for a nil queue).
func (q *outQueue) room() int {
	if q == nil {
		return 0
	}
	return q.reserved
}

// unreserve ends a reservation without adding to the queue.
func (q *outQueue) unreserve() {
	if q != nil {
		q.reserved = 0
	}
}

// commit adds the first n bytes (at most what reserve gave) of the room
// reserve returned to next.
func (q *outQueue) commit(n int) {
	q.next = q.next[:len(q.next)+n]
	q.reserved = 0
}

// dropNext gives back the bytes not yet being sent (a closed connection's);
// the buffer being sent, if any, goes back when the slot is freed.
func (q *outQueue) dropNext(l *Loop) {
	q.putNext(l)
	q.next = nil
}

// putNext gives next's buffer back to l's pool unless it is a caller's
// shared slice; the caller replaces next.
func (q *outQueue) putNext(l *Loop) {
	if q.shared&sharedNext != 0 {
		q.shared &^= sharedNext
		return
	}
	l.putBuf(q.next)
}

// dropSending lets the buffer being sent go (to l's pool unless it is a
// caller's shared slice): the kernel is done with it.
func (q *outQueue) dropSending(l *Loop) {
	if q.shared&sharedSending == 0 {
		l.putBuf(q.sending)
	}
	q.sending, q.sent, q.shared = nil, 0, q.shared&^sharedSending
}

// addShared queues p, a slice no one will write to again, without copying
// it when nothing is queued after the send in flight: next becomes p
// itself (its capacity cut to its length, so that a later write copies it
// into a buffer of the pool before adding to it). Behind other queued
// bytes it is copied, as add does.
func (q *outQueue) addShared(l *Loop, p []byte) {
	if len(q.next) > 0 || q.reserved > 0 || len(p) == 0 {
		q.add(l, p)
		return
	}
	q.putNext(l)
	q.next = p[:len(p):len(p)]
	q.shared |= sharedNext
}
