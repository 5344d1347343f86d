package runtime_test

import (
	"sync/atomic"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// TestNoLoopServesBeforeEveryLoopIsSetUp: a loop runs nothing of its own
// (here a timer armed in its LoopSetup, which makes a cross-loop call to
// the last loop) until every loop of the runtime is set up. Loop 0 used to
// serve while the later loops were still setting up: the call reached a
// loop without a driver (a SIGSEGV, and under -race the race between
// setup's write and push's read), and LoopSetup had not run everywhere.
func TestNoLoopServesBeforeEveryLoopIsSetUp(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		n := min(4, len(allCores(t)))
		if n < 2 {
			t.Skip("needs two CPUs in the affinity mask: Config.Cores takes a CPU once")
		}
		var setups atomic.Int32
		type report struct {
			setups int32 // LoopSetups finished when loop 0's timer ran
			err    error // the call's result
		}
		got := pctest.NewInbox[report]()
		cfg := percore.Config{Backend: b, Cores: pctest.LoopCores(t, n), RingEntries: 8192,
			LoopSetup: func(l *percore.Loop) error {
				if l.ID() == 0 {
					l.AfterFunc(0, func() {
						r := report{setups: setups.Load()}
						last := l.Runtime().Loops()[n-1]
						l.Call(last, func() {}, func(err error) {
							r.err = err
							got.Put(r)
						})
					})
				}
				setups.Add(1)
				return nil
			}}
		start(t, cfg, nil)
		r := got.Next(t, "the call from loop 0's first timer")
		if int(r.setups) != n {
			t.Errorf("loop 0 ran a timer with %d of %d loops set up", r.setups, n)
		}
		if r.err != nil {
			t.Errorf("the call to the last loop: %v", r.err)
		}
	})
}
