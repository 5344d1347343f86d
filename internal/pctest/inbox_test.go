package pctest

import (
	"sync"
	"testing"
)

func TestInboxPutNeverBlocksAndNextKeepsOrder(t *testing.T) {
	const writers, each = 4, 1000
	b := NewInbox[int]()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				b.Put(w*each + i)
			}
		})
	}
	wg.Wait() // nobody reads yet: every Put returned anyway
	last := make([]int, writers)
	for i := range last {
		last[i] = -1
	}
	for range writers * each {
		v := b.Next(t, "value")
		w := v / each
		if v <= last[w] {
			t.Fatalf("writer %d: %d after %d", w, v, last[w])
		}
		last[w] = v
	}
}
