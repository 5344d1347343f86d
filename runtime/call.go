//go:build linux

package runtime

import (
	"errors"
	"hash/maphash"
	"net"
	goruntime "runtime"
	"sync/atomic"
)

// Cross-loop calls: work for data another loop owns runs on that loop, and
// its continuation comes back to the caller's loop (Seastar's submit_to).
// The calls a loop makes to one target during a turn travel together, as
// one batch, at the end of the turn: one wake-up of the target per turn,
// however many calls. Batches go through a single-producer,
// single-consumer queue per ordered pair of loops, pushed by one loop's
// thread and popped by the other's: no lock and no goroutine, on the way
// there or back.
//
// A target that stops runs no call after its last turn. Once it has
// exited, it wakes the loops that call it, and each caller takes over the
// queue to it (nobody else reads it any more): the replies it finds first
// are calls that ran, the requests after them calls that did not, and
// their done functions get ErrLoopStopped.

// ErrLoopStopped is the error a cross-loop call's done function gets when
// its target loop stopped before it ran the call. It matches net.ErrClosed.
var ErrLoopStopped error = &closeReason{"target loop stopped", net.ErrClosed}

// errOtherRuntime is a call to a loop of another runtime.
var errOtherRuntime = errors.New("percore: call to a loop of another runtime")

// Call runs f on loop to and then done on l, the loop whose thread calls
// Call: done(nil) once f has run, or done with an error matching
// ErrLoopStopped when to stopped first (f then did not run, and never
// will). Calls from one loop to another run there, and their done
// functions back here, in the order they were made. A call to l itself
// runs f and then done at once. f must not block (it runs on to's thread,
// as a handler does); what it computes reaches done through what both
// close over. Call must be called on l's thread, and both loops must
// belong to the same Runtime.
func (l *Loop) Call(to *Loop, f func(), done func(error)) {
	switch {
	case to == l:
		l.safely("call", f)
		l.safely("call done", func() { done(nil) })
		return
	case to.rt != l.rt || l.rt == nil:
		l.safely("call done", func() { done(errOtherRuntime) })
		return
	}
	c := &l.calls
	b := c.pending[to.id]
	if b == nil {
		b = c.newBatch(l, to)
		c.pending[to.id] = b
		c.dirty = append(c.dirty, to)
	}
	b.calls = append(b.calls, call{f: f, done: done})
	l.cnt[sCallsMade]++
}

// Owner returns the loop of rt that owns key: a hash of the key over the
// loops, the same for every caller and every call of this runtime, so
// that a key's data lives on one loop. It is safe for concurrent use, and
// answers from the moment the first loop serves (a handler may call it
// before New has returned).
func (rt *Runtime) Owner(key []byte) *Loop {
	return rt.peers[maphash.Bytes(rt.seed, key)%uint64(len(rt.peers))]
}

// OwnerOf is Owner for a string key.
func (rt *Runtime) OwnerOf(key string) *Loop {
	return rt.peers[maphash.String(rt.seed, key)%uint64(len(rt.peers))]
}

// Owner returns the loop of l's runtime that owns key (Runtime.Owner), for
// handlers that have their loop at hand and not the runtime.
func (l *Loop) Owner(key []byte) *Loop { return l.rt.Owner(key) }

// OwnerOf is Owner for a string key.
func (l *Loop) OwnerOf(key string) *Loop { return l.rt.OwnerOf(key) }

// call is one cross-loop call: f runs on the target, done on the caller.
type call struct {
	f    func()
	done func(error)
}

// callBatch is the calls one loop made to another in one turn. It goes to
// the target (a request) and comes back (a reply) once they have run.
type callBatch struct {
	from, to *Loop
	calls    []call
	reply    bool
}

// loopCalls is a loop's side of the cross-loop calls. Only the loop's
// thread touches it, except inbound's queues (one pusher each) and exited.
type loopCalls struct {
	// pending are this turn's batches by target id; dirty lists the
	// targets that have one.
	pending []*callBatch
	dirty   []*Loop
	// inbound are the queues the other loops push to this one, by their
	// id: requests to run, and replies to this loop's own calls.
	inbound []*batchQueue
	// inFlight counts the batches sent to each target and not answered;
	// held are batches a full queue refused (requests, and replies to
	// callers that are behind), pushed again next turn.
	inFlight []int
	held     []*callBatch
	free     []*callBatch
	// exited is set, and the callers woken, once the loop will pop no
	// batch again.
	exited atomic.Bool
}

// initCalls sizes l's side for a runtime of n loops; New calls it for
// every loop before any starts.
func (l *Loop) initCalls(n int) {
	c := &l.calls
	c.pending = make([]*callBatch, n)
	c.inFlight = make([]int, n)
	c.inbound = make([]*batchQueue, n)
	for i := range c.inbound {
		if i != l.id {
			c.inbound[i] = new(batchQueue)
		}
	}
}

func (c *loopCalls) newBatch(from, to *Loop) *callBatch {
	if n := len(c.free); n > 0 {
		b := c.free[n-1]
		c.free = c.free[:n-1]
		b.from, b.to, b.reply = from, to, false
		return b
	}
	return &callBatch{from: from, to: to}
}

func (c *loopCalls) recycle(b *callBatch) {
	clear(b.calls)
	b.calls = b.calls[:0]
	b.from, b.to = nil, nil
	c.free = append(c.free, b)
}

// flushCalls sends this turn's batches, one per target with one wake-up
// each, and what full queues held back. The loop calls it before it
// enters the kernel.
func (l *Loop) flushCalls() {
	c := &l.calls
	if len(c.held) > 0 {
		held := c.held
		c.held = nil
		for _, b := range held {
			l.push(b)
		}
	}
	for i, to := range c.dirty {
		c.dirty[i] = nil
		b := c.pending[to.id]
		c.pending[to.id] = nil
		c.inFlight[to.id]++
		l.push(b)
	}
	c.dirty = c.dirty[:0]
}

// push hands a batch (a request from l, or a reply l ran) to the other
// loop and wakes it; a full queue holds it for the next turn, and a loop
// that has exited gets nothing more (its callers fail what they sent).
func (l *Loop) push(b *callBatch) {
	peer := b.to
	if b.reply {
		peer = b.from
	}
	if peer.calls.exited.Load() {
		if b.reply {
			return // the caller is gone: nobody to tell
		}
		l.calls.inFlight[peer.id]--
		l.failCalls(b)
		return
	}
	if !peer.calls.inbound[l.id].push(b) {
		l.calls.held = append(l.calls.held, b)
		return
	}
	peer.d.wakeFrom(l.d)
}

// failCalls runs the done functions of b's calls with ErrLoopStopped.
func (l *Loop) failCalls(b *callBatch) {
	for _, cl := range b.calls {
		l.safely("call done", func() { cl.done(ErrLoopStopped) })
	}
	l.calls.recycle(b)
}

// runCalls runs what the other loops pushed: their calls, and the replies
// to this loop's. It runs on every wake-up (runPosted).
func (l *Loop) runCalls() {
	c := &l.calls
	for id, q := range c.inbound {
		if q == nil {
			continue
		}
		for b := q.pop(); b != nil; b = q.pop() {
			if b.reply {
				l.replied(b)
				continue
			}
			l.cnt[sCallBatches]++
			for _, cl := range b.calls {
				l.cnt[sCallsRun]++
				l.safely("call", cl.f)
			}
			b.reply = true
			l.push(b)
		}
		if c.inFlight[id] > 0 && l.rt.peers[id].calls.exited.Load() {
			l.abandon(id)
		}
	}
}

// replied runs the done functions of a batch its target ran.
func (l *Loop) replied(b *callBatch) {
	l.calls.inFlight[b.to.id]--
	for _, cl := range b.calls {
		l.safely("call done", func() { cl.done(nil) })
	}
	l.calls.recycle(b)
}

// abandon fails the calls still in flight to loop id, which has exited.
// Its replies came first (it pushed them before it exited, and l has just
// read them); the requests it never read are still in the queue to it,
// which l may read now that the target never will.
func (l *Loop) abandon(id int) {
	target := l.rt.peers[id]
	q := target.calls.inbound[l.id]
	for b := q.pop(); b != nil; b = q.pop() {
		l.calls.inFlight[id]--
		l.failCalls(b)
	}
	for i, b := range l.calls.held {
		if !b.reply && b.to == target {
			l.calls.held[i] = nil
			l.calls.inFlight[id]--
			l.failCalls(b)
		}
	}
	l.calls.held = slicesCompact(l.calls.held)
}

// exitCalls is the loop's last word on calls: calls it made and never sent
// fail with ErrLoopStopped, and from now on it pops nothing: its callers
// are woken to fail what it did not run. (Replies to calls it sent, and
// their done functions, are dropped with it.)
func (l *Loop) exitCalls() {
	c := &l.calls
	for i, to := range c.dirty {
		c.dirty[i] = nil
		b := c.pending[to.id]
		c.pending[to.id] = nil
		l.failCalls(b)
	}
	c.dirty = c.dirty[:0]
	l.runCalls()
	// Replies a full queue held back still go: their calls ran, and
	// their callers wait for them. A caller that is alive drains its
	// queue when woken; one that has exited needs nothing.
	for _, b := range c.held {
		if !b.reply {
			l.failCalls(b)
			continue
		}
		for q := b.from.calls.inbound[l.id]; !q.push(b); {
			if b.from.calls.exited.Load() {
				break
			}
			b.from.wakeIfOpen() // the eventfd: this loop enters its ring no more
			goruntime.Gosched()
		}
		b.from.wakeIfOpen()
	}
	c.held = nil
	l.calls.exited.Store(true)
	if l.rt == nil {
		return
	}
	for _, peer := range l.rt.peers {
		if peer != l && peer.d != nil {
			peer.wakeIfOpen()
		}
	}
}

// wakeIfOpen wakes l from another loop's thread unless l has closed its
// door: a loop closes its wake-up descriptor after it marks itself closed
// (under postMu), so a wake-up written after that would land in whatever
// descriptor took the number (a connection's socket).
func (l *Loop) wakeIfOpen() {
	l.postMu.Lock()
	if !l.postClosed {
		l.d.wake()
	}
	l.postMu.Unlock()
}

// slicesCompact drops the nil entries of bs.
func slicesCompact(bs []*callBatch) []*callBatch {
	out := bs[:0]
	for _, b := range bs {
		if b != nil {
			out = append(out, b)
		}
	}
	clear(bs[len(out):])
	return out
}

// batchQueue is a single-producer, single-consumer ring of batches between
// two loops: the producer's thread pushes, the consumer's pops.
type batchQueue struct {
	head atomic.Uint64 // next to pop (the consumer's)
	tail atomic.Uint64 // next to push (the producer's)
	ring [batchQueueSize]atomic.Pointer[callBatch]
}

// batchQueueSize bounds the batches on their way between two loops: at
// most one per turn each way, so only a loop this many turns behind makes
// the other hold its batches back.
const batchQueueSize = 64

func (q *batchQueue) push(b *callBatch) bool {
	t := q.tail.Load()
	if t-q.head.Load() == batchQueueSize {
		return false
	}
	q.ring[t%batchQueueSize].Store(b)
	q.tail.Store(t + 1)
	return true
}

func (q *batchQueue) pop() *callBatch {
	h := q.head.Load()
	if h == q.tail.Load() {
		return nil
	}
	b := q.ring[h%batchQueueSize].Swap(nil)
	q.head.Store(h + 1)
	return b
}
