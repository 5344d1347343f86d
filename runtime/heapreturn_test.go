package runtime_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// TestHeapReturnAfterStorm: a storm of connections to real loops returns
// the heap's free pages exactly once, after it settled (heapreturn.go),
// counted over every runtime of the process that has the return on and
// over none that has it off. The test drives the return's clock: each
// tick is a step, and the step has ended when the test's hook says so.
func TestHeapReturnAfterStorm(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ticks, stepped := make(chan time.Time), make(chan struct{})
		var freed atomic.Int64
		t.Cleanup(percore.SetHeapReturnClock(ticks, func() { stepped <- struct{}{} }, func() { freed.Add(1) }))
		// a asks for a storm of 2n, c for n: the smaller counts, over
		// both.
		const n = 40
		a := start(t, percore.Config{Backend: b, ReturnAfterStorm: 2 * n}, echoHandler{})
		c := start(t, percore.Config{Backend: b, ReturnAfterStorm: n}, echoHandler{})
		off := start(t, percore.Config{Backend: b, ReturnAfterStorm: -1}, echoHandler{})
		before := percore.HeapReturns().Returns
		now := time.Unix(1_000_000, 0)
		tick := func(want int64, what string) {
			t.Helper()
			now = now.Add(time.Second)
			select {
			case ticks <- now:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the return's goroutine took no tick in 10 s (not running?)", what)
			}
			<-stepped
			if got := freed.Load(); got != want {
				t.Fatalf("%s: %d returns; want %d", what, got, want)
			}
			if got := percore.HeapReturns().Returns - before; got != uint64(want) {
				t.Fatalf("%s: HeapReturns counted %d; want %d", what, got, want)
			}
		}
		storm := func(rt *percore.Runtime, k int) {
			t.Helper()
			want := rt.Stats().Accepts + uint64(k)
			for range k {
				dial(t, rt) // closed at the test's end
			}
			pctest.WaitFor(t, "the storm's accepts", func() bool { return rt.Stats().Accepts == want })
		}
		tick(0, "no connections")
		// One short of the storm on the two runtimes with the return
		// on, and a whole one on the runtime with it off: no return.
		storm(a, n/2)
		storm(c, n/2-1)
		storm(off, 2*n)
		tick(0, "too few connections")
		tick(0, "too few connections, then quiet")
		// A storm: no return while it arrives, one once it settled, and
		// none after.
		storm(a, n/2)
		storm(c, n/2) // 2n-1 in all: a storm for c, not for a
		tick(0, "the storm's second")
		tick(1, "the storm settled")
		for range 3 {
			tick(1, "quiet after the return")
		}
	})
}
