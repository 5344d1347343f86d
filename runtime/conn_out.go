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
}

// buffered returns how many queued bytes the kernel has not taken yet.
func (q *outQueue) buffered() int { return len(q.next) + len(q.sending) - q.sent }

// inFlight reports whether the driver is taking bytes from sending.
func (q *outQueue) inFlight() bool { return q.sending != nil }

// pending returns the bytes to send next: the rest of the buffer being
// sent, or, once that is done, everything written since (which becomes the
// buffer being sent).
func (q *outQueue) pending() []byte {
	if q.sending == nil {
		if len(q.next) == 0 {
			return nil
		}
		q.sending, q.next, q.sent = q.next, nil, 0
	}
	return q.sending[q.sent:]
}

// advance records that the kernel took n bytes of pending, and gives the
// buffer back to l's pool once all of it is sent.
func (q *outQueue) advance(l *Loop, n int) {
	q.sent += n
	if q.sent >= len(q.sending) {
		l.putBuf(q.sending)
		q.sending, q.sent = nil, 0
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
		l.putBuf(q.next)
		q.next = b
	}
	q.next = append(q.next, p...)
}

// reserve makes room for n more bytes after next and returns it.
func (q *outQueue) reserve(l *Loop, n int) []byte {
	if len(q.next)+n > cap(q.next) {
		b := append(l.getBuf(max(len(q.next)+n, 2*cap(q.next))), q.next...)
		l.putBuf(q.next)
		q.next = b
	}
	q.reserved = n
	return q.next[len(q.next) : len(q.next)+n]
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
	l.putBuf(q.next)
	q.next = nil
}
