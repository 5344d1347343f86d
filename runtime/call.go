//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net"
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
// Order. Everything a loop sends to one peer (its requests, and the
// replies to the peer's calls it ran) goes through one queue, and what a
// full queue refuses waits in the sender's backlog for that peer, in
// order: every later batch for the peer queues behind it, so calls run,
// and their replies come back, in the order they were made. The backlog
// is bounded (Config.MaxHeldCalls calls of requests per target): past
// that a turn's batch is refused, and its done functions get ErrLoopBusy.
//
// A target that stops runs no call after its last turn. Once it has
// exited, it wakes the loops that call it, and each caller settles, in
// order, what is between them (peerGone): the replies it finds first are
// calls that ran, then the replies the target held for it; the requests
// after them (in the queue to the target, which nobody else reads any
// more, and in its own backlog) are calls that did not, and their done
// functions get ErrLoopStopped.
//
// Wake-ups. A push wakes its peer through the peer's ring (a MSG_RING
// prepared on the pusher's ring, submitted with its next enter) or its
// eventfd, which is written only under the peer's wakeMu while its door
// is open (wakeIfOpen): the peer closes the descriptor after closing the
// door, and a write after that could reach a descriptor that took the
// number. A loop past its last enter wakes through the eventfd only, and
// once it has exited it wakes every peer with the peer's wake-up flag
// cleared first (wakeAfterExit): a MSG_RING that never went out, or whose
// failure was never reaped, would otherwise leave the flag set with no
// wake-up on its way, and every later wake-up of that peer would be lost.

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
//
// The calls of one turn to one target go at the end of the turn, as one
// batch. While the target is behind (its queue from l is full) they wait
// on l, in order, up to Config.MaxHeldCalls calls; a turn's batch that
// would hold more is refused: its done functions get an error matching
// ErrLoopBusy at the end of the turn (their functions never run, and they
// may run before the done functions of earlier calls still on their way),
// counted in Stats.CallRejects. If l itself stops, the done functions of
// calls it sent that have not come back are dropped with it; those of
// calls it never sent get ErrLoopStopped.
//
// Call itself allocates nothing once the loops are warm, but f and done
// are usually closures, made at every call: OpPool makes the same calls
// with functions bound once, and no allocation per call. A connection whose
// requests are answered on other loops gets the answers back in any order
// across loops; runtime/frame/ordered's Queue writes them in the order of
// the requests (examples/kv does both).
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

// Owner returns the loop of l's runtime that owns key: a hash of the key
// over the runtime's loops, the same for every loop and every call of
// this runtime, so that a key's data lives on one loop. It lives on Loop
// because a handler has its loop at hand (c.Loop().Owner(key)); code
// outside the loops asks any of them (rt.Loops()[0].Owner(key)): each
// answers the same. It is safe for concurrent use, and answers from
// Config.LoopSetup on.
func (l *Loop) Owner(key []byte) *Loop {
	rt := l.rt
	return rt.peers[maphash.Bytes(rt.seed, key)%uint64(len(rt.peers))]
}

// OwnerOf is Owner for a string key.
func (l *Loop) OwnerOf(key string) *Loop {
	rt := l.rt
	return rt.peers[maphash.String(rt.seed, key)%uint64(len(rt.peers))]
}

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
// thread touches it, except inbound's queues (one pusher each), exited,
// and, once exited is set, backlog (each peer reads its own).
type loopCalls struct {
	// pending are this turn's batches by target id; dirty lists the
	// targets that have one (spareDirty is the list flushCalls swaps in).
	pending           []*callBatch
	dirty, spareDirty []*Loop
	// inbound are the queues the other loops push to this one, by their
	// id: requests to run, and replies to this loop's own calls.
	inbound []*batchQueue
	// inFlight counts the batches sent to each target and not answered
	// (queued, held or running there).
	inFlight []int
	// backlog are, by peer id, the batches for that peer (requests, and
	// replies to its calls) that found its queue full, in order, to push
	// before anything else for it; heldCalls counts the calls of the
	// requests among them, and held lists the peers with a backlog
	// (spareHeld is the list pushHeld swaps in).
	backlog         []batchFIFO
	heldCalls       []int
	held, spareHeld []*Loop
	// gone marks the peers that exited and whose calls this loop has
	// settled (peerGone).
	gone []bool
	free []*callBatch
	// exiting is set once the loop has made its last enter: it wakes its
	// peers through their eventfds from then on.
	exiting bool
	// exited is set, and the peers woken, once the loop will pop no batch
	// again and its backlog is what it leaves its peers.
	exited atomic.Bool
}

// DefaultMaxHeldCalls is Config.MaxHeldCalls's default: the calls of
// requests a loop holds for one target whose queue is full. At one batch
// per turn that is a target tens of milliseconds behind a loop that calls
// it on every turn of a busy loop.
const DefaultMaxHeldCalls = 1 << 16

// initCalls sizes l's side for a runtime of n loops, with queues of size
// batches from each other loop; New calls it for every loop before any
// starts.
func (l *Loop) initCalls(n, size int) {
	c := &l.calls
	c.pending = make([]*callBatch, n)
	c.inFlight = make([]int, n)
	c.backlog = make([]batchFIFO, n)
	c.heldCalls = make([]int, n)
	c.gone = make([]bool, n)
	c.inbound = make([]*batchQueue, n)
	for i := range c.inbound {
		if i != l.id {
			c.inbound[i] = &batchQueue{ring: make([]atomic.Pointer[callBatch], size)}
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

// peer returns the loop b goes to: its target, or for a reply its caller.
func (b *callBatch) peer() *Loop {
	if b.reply {
		return b.from
	}
	return b.to
}

// flushCalls sends what full queues held back, then this turn's batches,
// one per target with one wake-up each. The loop calls it before it
// enters the kernel. Done functions that run here (of calls refused, or
// made to a loop that exited) may make calls: those go next turn.
func (l *Loop) flushCalls() {
	c := &l.calls
	if len(c.held) > 0 {
		l.pushHeld()
	}
	dirty := c.dirty
	c.dirty = c.spareDirty[:0]
	for i, to := range dirty {
		dirty[i] = nil
		b := c.pending[to.id]
		c.pending[to.id] = nil
		c.inFlight[to.id]++
		l.push(b)
	}
	c.spareDirty = dirty[:0]
}

// push hands a batch (a request from l, or a reply l ran) to the other
// loop and wakes it. A batch for a peer with a backlog, or that finds the
// queue full, joins the backlog (a request past Config.MaxHeldCalls is
// refused instead); a peer that has exited gets nothing more (what is
// between l and it is settled first, in order).
func (l *Loop) push(b *callBatch) {
	peer := b.peer()
	c := &l.calls
	if c.gone[peer.id] || peer.calls.exited.Load() {
		if !c.gone[peer.id] {
			l.peerGone(peer)
		}
		l.settle(b)
		return
	}
	q := &c.backlog[peer.id]
	if q.len() == 0 && peer.calls.inbound[l.id].push(b) {
		l.wakePeer(peer)
		return
	}
	if !b.reply {
		if limit := l.cfg.MaxHeldCalls; limit > 0 && c.heldCalls[peer.id]+len(b.calls) > limit {
			c.inFlight[peer.id]--
			l.refuse(b, limit)
			return
		}
		c.heldCalls[peer.id] += len(b.calls)
	}
	if q.len() == 0 {
		c.held = append(c.held, peer)
	}
	q.push(b)
}

// pushHeld pushes, in order, what each peer's backlog holds, as far as its
// queue takes it.
func (l *Loop) pushHeld() {
	c := &l.calls
	held := c.held
	c.held = c.spareHeld[:0]
	for i, peer := range held {
		held[i] = nil
		q := &c.backlog[peer.id]
		switch {
		case q.len() == 0:
			continue // settled since
		case c.gone[peer.id]:
			continue
		case peer.calls.exited.Load():
			l.peerGone(peer)
			continue
		}
		in, sent := peer.calls.inbound[l.id], false
		for q.len() > 0 {
			// Nothing of a batch is read once it is pushed: the peer
			// may be running it already.
			b := q.front()
			n := 0
			if !b.reply {
				n = len(b.calls)
			}
			if !in.push(b) {
				break
			}
			q.pop()
			c.heldCalls[peer.id] -= n
			sent = true
		}
		if sent {
			l.wakePeer(peer)
		}
		if q.len() > 0 {
			c.held = append(c.held, peer)
		}
	}
	c.spareHeld = held[:0]
}

// wakePeer wakes peer after a push: through its ring when both loops run
// io_uring with MSG_RING (not after l's last enter: it would never go
// out), else through its eventfd, under its lock.
func (l *Loop) wakePeer(peer *Loop) {
	if l.calls.exiting || !peer.d.wakeFrom(l.d) {
		peer.wakeIfOpen()
	}
}

// refuse fails the calls of b, which would hold more than limit calls for
// their target: ErrLoopBusy.
func (l *Loop) refuse(b *callBatch, limit int) {
	l.cnt[sCallRejects] += uint64(len(b.calls))
	err := fmt.Errorf("call to loop %d: %d calls held for it: %w", b.to.id, limit, ErrLoopBusy)
	for _, cl := range b.calls {
		l.safely("call done", func() { cl.done(err) })
	}
	l.calls.recycle(b)
}

// settle ends a batch for a peer that has exited: a request's calls fail
// with ErrLoopStopped; a reply has nobody to go to.
func (l *Loop) settle(b *callBatch) {
	if b.reply {
		return
	}
	l.calls.inFlight[b.to.id]--
	l.failCalls(b)
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
		if q == nil || c.gone[id] {
			continue
		}
		// Whether the peer exited is read before its queue: it pushes
		// everything before it marks itself exited, so once that is
		// seen every batch it pushed is in the queue, and what is
		// settled after the queue is all that is left.
		peer := l.rt.peers[id]
		exited := peer.calls.exited.Load()
		l.runFrom(id)
		if exited {
			l.peerGone(peer)
		}
	}
}

// runFrom runs what the loop with the given id pushed to this one.
func (l *Loop) runFrom(id int) {
	q := l.calls.inbound[id]
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
}

// replied runs the done functions of a batch its target ran.
func (l *Loop) replied(b *callBatch) {
	l.calls.inFlight[b.to.id]--
	for _, cl := range b.calls {
		l.safely("call done", func() { cl.done(nil) })
	}
	l.calls.recycle(b)
}
