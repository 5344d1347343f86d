package runtime_test

import (
	"errors"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// TestCallsToABusyLoopStayInOrderAndBounded: a loop makes one call per
// turn to a loop whose thread is held. The queue between them fills (64
// batches), the caller then holds Config.MaxHeldCalls more, in order, and
// refuses the rest with ErrLoopBusy, counted; once the target runs again
// the calls it got run in the order made, and their done functions too.
// (Held batches used to go behind newer ones, and nothing bounded them.)
func TestCallsToABusyLoopStayInOrderAndBounded(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		const calls, held, queue = 200, 50, 64
		rt := twoLoops(t, percore.Config{Backend: b, MaxHeldCalls: held}, nil)
		a, z := rt.Loops()[0], rt.Loops()[1]
		release := pctest.HoldLoop(t, z)
		type done struct {
			i   int
			err error
		}
		dones := pctest.NewInbox[done]()
		var ran []int // on z
		var next func()
		i := 0
		next = func() {
			n := i
			a.Call(z, func() { ran = append(ran, n) }, func(err error) { dones.Put(done{n, err}) })
			if i++; i < calls {
				if err := a.Post(next); err != nil {
					t.Errorf("post: %v", err)
				}
			}
		}
		pctest.OnLoop(t, a, next)
		// The refusals come back while z is still held.
		var refused []int
		for range calls - queue - held {
			d := dones.Next(t, "the done function of a refused call")
			if !errors.Is(d.err, percore.ErrLoopBusy) {
				t.Fatalf("call %d done with %v while its target is held, want ErrLoopBusy", d.i, d.err)
			}
			refused = append(refused, d.i)
		}
		release()
		for want := range queue + held {
			d := dones.Next(t, "the done function of a call")
			if d.err != nil || d.i != want {
				t.Fatalf("done function of call %d (%v), want call %d's with nil", d.i, d.err, want)
			}
		}
		for k, n := range refused {
			if n != queue+held+k {
				t.Fatalf("refused calls %v, want %d on", refused, queue+held)
			}
		}
		pctest.OnLoop(t, z, func() {
			for k, n := range ran {
				if n != k {
					t.Errorf("calls ran in the order %v", ran)
					break
				}
			}
		})
		pctest.WaitFor(t, "the refusals counted", func() bool { return a.Stats().CallRejects == calls-queue-held })
	})
}
