//go:build linux

package runtime

import (
	"math/rand/v2"
	"testing"
)

// TestOutPlainOracle: outPlain's plaintext count of a queue, against an
// oracle that knows every queued byte's kind, over random writes (each
// with its overhead up front, as records and flights are) and random
// sends. The count never exceeds the truth, and is exact while nothing
// was sent since the queue was last empty.
func TestOutPlainOracle(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		var o outPlain
		var queue []bool // per byte queued and unsent: true for overhead
		exact := true    // nothing sent since the queue was empty
		for step := 0; step < 2000; step++ {
			if rng.IntN(2) == 0 {
				n := 1 + rng.IntN(3000)
				over := min(n, 22+rng.IntN(40))
				if rng.IntN(10) == 0 {
					over = n // a flight or an alert: all overhead
				}
				for i := range n {
					queue = append(queue, i < over)
				}
				o.add(len(queue), n, over)
			} else if len(queue) > 0 {
				queue = queue[rng.IntN(len(queue))+1:]
				exact = false
			}
			if rng.IntN(20) == 0 {
				queue = queue[:0] // the kernel took everything
			}
			if len(queue) == 0 {
				exact = true
			}
			truth := 0
			for _, isOver := range queue {
				if !isOver {
					truth++
				}
			}
			got := o.buffered(len(queue))
			switch {
			case len(queue) == 0 && got != 0:
				t.Fatalf("seed %d step %d: %d buffered of an empty queue", seed, step, got)
			case len(queue) > 0 && (got < 1 || (truth > 0 && got > truth)):
				t.Fatalf("seed %d step %d: %d buffered, truth %d", seed, step, got, truth)
			case exact && got != max(truth, min(len(queue), 1)):
				t.Fatalf("seed %d step %d: %d buffered, truth %d, nothing sent since empty", seed, step, got, truth)
			}
			if len(o.marks)-o.head > maxPlainMarks+1 {
				t.Fatalf("%d marks", len(o.marks)-o.head)
			}
		}
	}
}
