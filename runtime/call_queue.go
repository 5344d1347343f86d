//go:build linux

package runtime

import (
	"sync/atomic"
)

// The lists of batches: a loop's backlog for one peer (batchFIFO) and the
// lock-free queue between two loops (batchQueue).

// batchFIFO is a first-in, first-out list of batches.
type batchFIFO struct {
	bs   []*callBatch
	head int
}

func (q *batchFIFO) len() int { return len(q.bs) - q.head }

func (q *batchFIFO) push(b *callBatch) { q.bs = append(q.bs, b) }

func (q *batchFIFO) front() *callBatch { return q.bs[q.head] }

// pop removes and returns the first batch, or nil.
func (q *batchFIFO) pop() *callBatch {
	if q.head == len(q.bs) {
		return nil
	}
	b := q.bs[q.head]
	q.bs[q.head] = nil
	q.head++
	if q.head == len(q.bs) {
		q.bs, q.head = q.bs[:0], 0
	}
	return b
}

// batchQueue is a single-producer, single-consumer ring of batches between
// two loops: the producer's thread pushes, the consumer's pops.
type batchQueue struct {
	head atomic.Uint64 // next to pop (the consumer's)
	tail atomic.Uint64 // next to push (the producer's)
	ring []atomic.Pointer[callBatch]
	// refuse, when set (by the model test), makes a push find the queue
	// full, as it finds it when the consumer pops just after the
	// producer read its position.
	refuse func() bool
}

// batchQueueSize bounds the batches on their way between two loops: at
// most one per turn each way, so only a loop this many turns behind makes
// the other hold its batches back.
const batchQueueSize = 64

func (q *batchQueue) push(b *callBatch) bool {
	t := q.tail.Load()
	if t-q.head.Load() == uint64(len(q.ring)) || q.refuse != nil && q.refuse() {
		return false
	}
	q.ring[t%uint64(len(q.ring))].Store(b)
	q.tail.Store(t + 1)
	return true
}

func (q *batchQueue) pop() *callBatch {
	h := q.head.Load()
	if h == q.tail.Load() {
		return nil
	}
	b := q.ring[h%uint64(len(q.ring))].Swap(nil)
	q.head.Store(h + 1)
	return b
}
