package seqlock

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// values is a writer's published set: cur[i] = k>>i for the k of the
// publication, so that a publication changes only some of them (the low
// ones change every time, the high ones rarely), and a reader that mixed
// two publications sees a value that does not follow from cur[0].
type values struct {
	seq  Seq
	vals [12]atomic.Uint64
	last [12]uint64
}

func (v *values) publish(k uint64) bool {
	var cur [12]uint64
	for i := range cur {
		cur[i] = k >> i
	}
	return v.seq.Publish(v.vals[:], v.last[:], cur[:])
}

// mixed says what is wrong with a snapshot, or "".
func mixed(got []uint64) string {
	for i, g := range got {
		if g != got[0]>>i {
			return fmt.Sprintf("value %d is %d, but value 0 is %d (want %d): two publications mixed", i, g, got[0], got[0]>>i)
		}
	}
	return ""
}

// TestReadersSeeOnePublication: readers on other goroutines, reading while
// the writer publishes as fast as it can, never see a mix of two
// publications, and never see the values go back. The writer goes on until
// every reader has read minReads times while it wrote (at most
// maxPublications).
func TestReadersSeeOnePublication(t *testing.T) {
	const minPublications, maxPublications, readers, minReads = 20000, 5000000, 3, 2000
	var v values
	var done atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, readers)
	reads := make([]atomic.Int64, readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev uint64
			got := make([]uint64, len(v.vals))
			for !done.Load() {
				v.seq.Read(v.vals[:], got)
				reads[r].Add(1)
				if msg := mixed(got); msg != "" {
					errs <- msg
					return
				}
				if got[0] < prev {
					errs <- fmt.Sprintf("went back from %d to %d", prev, got[0])
					return
				}
				prev = got[0]
			}
		}()
	}
	slow := func() bool {
		for i := range reads {
			if reads[i].Load() < minReads {
				return true
			}
		}
		return false
	}
	k := uint64(1)
	for ; k <= maxPublications && (k <= minPublications || (k%1024 != 0 || slow()) && len(errs) == 0); k++ {
		v.publish(k)
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for msg := range errs {
		t.Fatal(msg)
	}
	got := make([]uint64, len(v.vals))
	v.seq.Read(v.vals[:], got)
	if got[0] != k-1 || mixed(got) != "" {
		t.Fatalf("after the last publication (%d) read %v", k-1, got)
	}
	if slow() {
		t.Fatalf("a reader read fewer than %d times in %d publications: the test proved nothing", minReads, k-1)
	}
	t.Logf("%d publications; reads per reader: %d %d %d", k-1, reads[0].Load(), reads[1].Load(), reads[2].Load())
}

// TestPublishOnlyWhatChanged: a publication that changes nothing leaves
// the sequence alone, one that changes something moves it by two.
func TestPublishOnlyWhatChanged(t *testing.T) {
	var v values
	if v.publish(0) {
		t.Fatal("publishing the zero values reported a change")
	}
	if n := v.seq.n.Load(); n != 0 {
		t.Fatalf("sequence %d after an empty publication, want 0", n)
	}
	if !v.publish(5) {
		t.Fatal("publishing new values reported no change")
	}
	if n := v.seq.n.Load(); n != 2 {
		t.Fatalf("sequence %d after one publication, want 2", n)
	}
	if v.publish(5) || v.seq.n.Load() != 2 {
		t.Fatalf("republishing the same values moved the sequence to %d", v.seq.n.Load())
	}
}

// BenchmarkRead is one read of twelve values.
func BenchmarkRead(b *testing.B) {
	var v values
	v.publish(1234)
	got := make([]uint64, len(v.vals))
	for b.Loop() {
		v.seq.Read(v.vals[:], got)
	}
}

// BenchmarkPublish is one publication that changes the low values.
func BenchmarkPublish(b *testing.B) {
	var v values
	k := uint64(0)
	for b.Loop() {
		k++
		v.publish(k)
	}
}
