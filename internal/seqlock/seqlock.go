// Package seqlock publishes a set of counters that one goroutine writes, so
// that any goroutine reads them as one snapshot without ever making the
// writer wait: a sequence lock (Linux's seqcount_t) over atomic values,
// which keeps it sound under Go's memory model and the race detector.
//
// The writer (a loop's thread) counts in plain fields of its own and calls
// Publish at moments when its counters agree with each other (between
// callbacks); a reader calls Read from anywhere. The values live in the
// caller's arrays (a Loop's, a pool's Local's), so that the zero value of
// the struct that holds them is ready to use.
package seqlock

import (
	goruntime "runtime"
	"sync/atomic"
)

// Seq is the sequence counter of one set of published values: odd while
// its writer stores them. Its zero value is ready to use.
type Seq struct {
	n atomic.Uint64
}

// Publish makes cur the published values. vals is what readers load, and
// last the writer's copy of what vals holds, so that a value that did not
// change costs no store, and a publication that changes nothing touches
// nothing shared (a reader spins on nothing). It reports whether anything
// changed. Only the writer may call it; vals, last and cur have the same
// length.
func (s *Seq) Publish(vals []atomic.Uint64, last, cur []uint64) bool {
	vals, last = vals[:len(cur)], last[:len(cur)]
	changed := false
	for i, v := range cur {
		if v == last[i] {
			continue
		}
		if !changed {
			changed = true
			s.n.Add(1) // odd: readers retry
		}
		vals[i].Store(v)
		last[i] = v
	}
	if changed {
		s.n.Add(1)
	}
	return changed
}

// spinsBeforeYield is how many times Read retries before it yields the
// processor between retries. The writer stores a few dozen values; only a
// writer preempted in the middle keeps a reader waiting longer.
const spinsBeforeYield = 64

// Read loads the published values into dst: all of them as of one
// publication. It is safe for concurrent use, and never blocks the
// writer. vals and dst have the same length.
func (s *Seq) Read(vals []atomic.Uint64, dst []uint64) {
	vals = vals[:len(dst)]
	for try := 0; ; try++ {
		seq := s.n.Load()
		if seq&1 == 0 {
			for i := range dst {
				dst[i] = vals[i].Load()
			}
			if s.n.Load() == seq {
				return
			}
		}
		if try >= spinsBeforeYield {
			goruntime.Gosched()
		}
	}
}
