// Package ordered keeps a connection's replies in the order of its
// requests when some of them are computed elsewhere and come back out of
// order: on another loop (a cross-loop call), on an upstream server (a
// proxy), or in parts from several of them (a multi-key command split
// across owners and joined).
//
// A Queue belongs to one connection. A reply that is ready when its
// request is read goes out at once if nothing waits before it (Send); one
// that must wait is pushed (Push) with the number of parts it waits for,
// and each part that arrives is counted off (Done). When the oldest
// reply's last part is in, it and every ready reply behind it are written,
// in order, up to the next one that still waits.
//
//	q := ordered.New[join](c) // one per connection, in OnOpen
//	...
//	if local { q.Send(reply) } else { r := q.Push(1); callElsewhere(r) }
//	...
//	r.Buf = append(r.Buf[:0], result...); q.Done(r) // when it comes back
//
// A Queue and its replies belong to the thread of the connection's loop.
// It allocates nothing once warm: replies are reused, their buffers kept.
//
// A Queue is what runtime.Loop.Call's results want when a connection's
// requests are answered on other loops (examples/kv) or by upstream
// servers (examples/redis_proxy): the calls come back in any order, the
// replies go out in the requests'.
// docs/decisions/0024-redis-kv-and-proxy.md says why replies are queued
// here and not written into the connection's outbound buffer in place.
package ordered

// Conn is what a Queue writes to: a *percore.Conn, or a fake in a test.
type Conn interface {
	Write(p []byte) (int, error)
	Close() error
}

// Reply is one request's reply, waiting for its parts. Buf is the reply's
// bytes, written when the reply's turn comes; Data is the caller's own
// state for joining the parts (a count, a slot per key, a failure). Push
// hands a Reply out with Buf empty (its room kept) and Data reset: see
// Resetter.
type Reply[T any] struct {
	Buf  []byte
	Data T
	left int
}

// Resetter is what a Reply's Data may implement, with a pointer receiver,
// to keep its buffers when its Reply is reused: Push calls Reset on a
// reused Reply's Data (which truncates its slices, say) instead of setting
// it to T's zero value, which it does otherwise. Either way no state of the
// last use reaches the next.
type Resetter interface{ Reset() }

// Queue is one connection's replies not yet written.
type Queue[T any] struct {
	c       Conn
	queue   []*Reply[T] // queue[head:] wait
	head    int
	free    []*Reply[T]
	closing bool
	gone    bool
}

// New returns the queue of c.
func New[T any](c Conn) *Queue[T] { return &Queue[T]{c: c} }

// Idle reports whether no reply waits: a reply that is ready now may be
// written straight into the connection (say with percore.Conn.Reserve and
// Commit) instead of through Send.
func (q *Queue[T]) Idle() bool { return q.head == len(q.queue) }

// Waiting returns how many replies wait.
func (q *Queue[T]) Waiting() int { return len(q.queue) - q.head }

// Send answers with p, a reply that is ready: written at once if no reply
// waits, else copied and queued behind them. p is not kept.
func (q *Queue[T]) Send(p []byte) {
	if q.gone {
		return
	}
	if q.Idle() {
		q.c.Write(p)
		return
	}
	r := q.push(0)
	r.Buf = append(r.Buf[:0], p...)
}

// Push queues a reply that waits for parts parts (at least 1): call Done
// once for each. Its Buf is empty and its Data reset (Resetter).
func (q *Queue[T]) Push(parts int) *Reply[T] {
	return q.push(max(parts, 1))
}

func (q *Queue[T]) push(parts int) *Reply[T] {
	var r *Reply[T]
	if n := len(q.free); n > 0 {
		r = q.free[n-1]
		q.free = q.free[:n-1]
	} else {
		r = new(Reply[T])
	}
	r.Buf, r.left = r.Buf[:0], parts
	if rs, ok := any(&r.Data).(Resetter); ok {
		rs.Reset()
	} else {
		var zero T
		r.Data = zero
	}
	q.queue = append(q.queue, r)
	return r
}

// Add makes r wait for n more parts: a multi-key command learns how many
// owners it needs while it splits.
func (q *Queue[T]) Add(r *Reply[T], n int) { r.left += n }

// Left returns how many parts r still waits for.
func (q *Queue[T]) Left(r *Reply[T]) int { return r.left }

// Last reports whether the next Done is r's last: the moment a joined
// reply builds its bytes from its parts, before that Done writes it.
//
//	func partDone(r *ordered.Reply[join]) {
//		if q.Last(r) {
//			r.Buf = build(r.Buf[:0], &r.Data)
//		}
//		q.Done(r)
//	}
func (q *Queue[T]) Last(r *Reply[T]) bool { return r.left == 1 }

// Done counts off one part of r. When r was the oldest waiting reply and
// this was its last part, r and the ready replies behind it are written,
// and reused.
func (q *Queue[T]) Done(r *Reply[T]) {
	if r.left--; r.left > 0 {
		return
	}
	q.flush()
}

// flush writes the ready replies at the head of the queue.
func (q *Queue[T]) flush() {
	for q.head < len(q.queue) && q.queue[q.head].left <= 0 {
		r := q.queue[q.head]
		q.queue[q.head] = nil
		q.head++
		if !q.gone {
			q.c.Write(r.Buf)
		}
		q.free = append(q.free, r)
	}
	if q.head == len(q.queue) {
		q.queue, q.head = q.queue[:0], 0
		if q.closing && !q.gone {
			q.gone = true
			q.c.Close()
		}
	}
}

// CloseWhenDone closes the connection once every waiting reply is written
// (QUIT, the end of the client's stream, a protocol error, a shutdown):
// at once if none waits.
func (q *Queue[T]) CloseWhenDone() {
	q.closing = true
	q.flush()
}

// Closing reports whether CloseWhenDone was called: the connection takes
// no more requests.
func (q *Queue[T]) Closing() bool { return q.closing }

// Gone tells the queue that the connection closed: replies still waiting
// are counted off and reused as their parts come back, and written
// nowhere.
func (q *Queue[T]) Gone() { q.gone = true }
