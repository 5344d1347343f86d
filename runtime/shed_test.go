package runtime_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// TestHeapReturnRunsShedHooks: the return after a storm runs what each
// loop registered with Loop.OnShedSpares, once per loop and on the loop's own
// thread (the thread its LoopSetup ran on), as part of the loops' shed
// that precedes the collection.
func TestHeapReturnRunsShedHooks(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ticks, stepped := make(chan time.Time), make(chan struct{})
		var freed atomic.Int64
		t.Cleanup(percore.SetHeapReturnClock(ticks, func() { stepped <- struct{}{} }, func() { freed.Add(1) }))
		// Each loop's threads: the one its LoopSetup ran on, and the
		// one its shed hook ran on; written on the loop, read once shed
		// counts every loop.
		type threads struct{ setup, shed, sheds int }
		var per percore.PerLoop[threads]
		var shed atomic.Int64
		const n = 20
		cores := allCores(t)
		cores = cores[:min(2, len(cores))]
		rt := start(t, percore.Config{Backend: b, Cores: cores, ReturnAfterStorm: n, LoopSetup: func(l *percore.Loop) error {
			th := per.Set(l, threads{setup: unix.Gettid()})
			l.OnShedSpares(func() {
				th.shed = unix.Gettid()
				th.sheds++
				shed.Add(1)
			})
			return nil
		}}, echoHandler{})
		now := time.Unix(1_000_000, 0)
		tick := func() {
			t.Helper()
			now = now.Add(time.Second)
			select {
			case ticks <- now:
			case <-time.After(10 * time.Second):
				t.Fatalf("the return's goroutine took no tick in 10 s (not running?)")
			}
			<-stepped
		}
		tick()
		want := rt.Stats().Accepts + n
		for range n {
			dial(t, rt)
		}
		pctest.WaitFor(t, "the storm's accepts", func() bool { return rt.Stats().Accepts == want })
		tick()
		if got := shed.Load(); got != 0 {
			t.Fatalf("%d shed hooks ran while the storm arrived; want none", got)
		}
		tick()
		if freed.Load() != 1 {
			t.Fatalf("%d returns once the storm settled; want 1", freed.Load())
		}
		loops := rt.Loops()
		pctest.WaitFor(t, "every loop's shed hook", func() bool { return shed.Load() == int64(len(loops)) })
		for _, l := range loops {
			th := per.Get(l)
			if th.sheds != 1 || th.shed != th.setup {
				t.Fatalf("loop %d: its shed hook ran %d times, on thread %d; want once, on its thread %d",
					l.ID(), th.sheds, th.shed, th.setup)
			}
		}
	})
}

// TestLoopShed: Loop.ShedSpares, from another goroutine, runs the loop's shed
// hooks on its thread, in order with what is posted around it.
func TestLoopShed(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		var setup, on, sheds int // written on the loop
		rt := start(t, percore.Config{Backend: b, LoopSetup: func(l *percore.Loop) error {
			setup = unix.Gettid()
			l.OnShedSpares(func() { on, sheds = unix.Gettid(), sheds+1 })
			return nil
		}}, echoHandler{})
		l := rt.Loops()[0]
		pctest.OnLoop(t, l, func() {
			if sheds != 0 {
				t.Errorf("%d sheds before any; want none", sheds)
			}
		})
		for range 2 {
			if err := l.ShedSpares(); err != nil {
				t.Fatal(err)
			}
		}
		pctest.OnLoop(t, l, func() {
			if sheds != 2 || on != setup {
				t.Errorf("after two Sheds: the hook ran %d times, on thread %d; want twice, on the loop's thread %d", sheds, on, setup)
			}
		})
	})
}

// TestShedSparesBounded: a shed function that asks for another shed does
// not make the loop shed every turn (the second ask does nothing), and an
// OnStop function that asks for one does not run the shed functions after
// the loop's OnStop functions (review of decision 0080).
func TestShedSparesBounded(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		var sheds int // written on the loop
		var log []string
		first := make(chan struct{})
		rt := start(t, percore.Config{Backend: b, LoopSetup: func(l *percore.Loop) error {
			l.OnShedSpares(func() {
				sheds++
				log = append(log, "shed")
				if sheds == 1 {
					if err := l.ShedSpares(); err != nil {
						t.Errorf("ShedSpares from a shed function: %v", err)
					}
					close(first)
				}
			})
			l.OnStop(func() {
				log = append(log, "stop")
				_ = l.ShedSpares()
			})
			return nil
		}}, echoHandler{})
		l := rt.Loops()[0]
		if err := l.ShedSpares(); err != nil {
			t.Fatal(err)
		}
		<-first
		pctest.OnLoop(t, l, func() { // posted after whatever the shed function posted
			if sheds != 1 {
				t.Errorf("the shed functions ran %d times after one ShedSpares whose function asked again; want 1", sheds)
			}
		})
		if err := rt.Close(); err != nil {
			t.Fatal(err)
		}
		if want := []string{"shed", "stop"}; !slices.Equal(log, want) {
			t.Fatalf("order %q; want %q (no shed function after OnStop)", log, want)
		}
	})
}
