package runtime_test

import (
	"io"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// reached is what a first callback found when it reached the other loops:
// where it ran, how many loops it saw, and the loops its calls ran on.
type reached struct {
	what  string
	on    int
	loops int
	ran   []int
	err   error
}

// callEvery calls every loop of l's runtime from l, l itself included, and
// puts what it found into got once every done function has run.
func callEvery(l *percore.Loop, what string, got *pctest.Inbox[reached]) {
	loops := l.Runtime().Loops()
	r := reached{what: what, on: l.ID(), loops: len(loops)}
	left := len(loops)
	for _, to := range loops {
		id := -1
		l.Call(to, func() { id = to.ID() }, func(err error) {
			if err != nil && r.err == nil {
				r.err = err
			}
			r.ran = append(r.ran, id)
			if left--; left == 0 {
				got.Put(r)
			}
		})
	}
}

type openCaller struct{ got *pctest.Inbox[reached] }

func (h openCaller) OnOpen(c *percore.Conn) { callEvery(c.Loop(), "OnOpen", h.got) }

func (openCaller) OnData(c *percore.Conn, data []byte) { c.Write(data) }

// TestLoopReachesEveryLoopFromItsFirstCallback: Loop.Runtime gives a
// handler the other loops (a handler used to have no way to them but its
// own bookkeeping in LoopSetup). From LoopSetup the list is complete, a
// timer armed there may call every loop when it first fires, and so may
// the OnOpen of the first connection; each call runs on the loop it names.
func TestLoopReachesEveryLoopFromItsFirstCallback(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		got := pctest.NewInbox[reached]()
		setup := pctest.NewInbox[reached]()
		cfg := percore.Config{Backend: b, LoopSetup: func(l *percore.Loop) error {
			loops := l.Runtime().Loops()
			setup.Put(reached{what: "LoopSetup", on: l.ID(), loops: len(loops)})
			if loops[l.ID()] != l {
				t.Errorf("loop %d is not Loops()[%d] of its runtime", l.ID(), l.ID())
			}
			l.AfterFunc(0, func() { callEvery(l, "the first timer", got) })
			return nil
		}}
		rt := twoLoops(t, cfg, openCaller{got})
		n := len(rt.Loops())
		for range n {
			r := setup.Next(t, "a LoopSetup")
			if r.loops != n {
				t.Errorf("LoopSetup of loop %d saw %d loops, want %d", r.on, r.loops, n)
			}
		}
		for _, l := range rt.Loops() {
			if l.Runtime() != rt {
				t.Errorf("loop %d: Runtime() is not the runtime New returned", l.ID())
			}
		}
		check := func(r reached) {
			t.Helper()
			if r.err != nil || r.loops != n || !sameSet(r.ran, n) {
				t.Fatalf("%s on loop %d: %d loops, calls ran on %v, err %v; want %d loops, a call run on each", r.what, r.on, r.loops, r.ran, r.err, n)
			}
		}
		for range n {
			check(got.Next(t, "the calls of a loop's first timer"))
		}
		c := dial(t, rt)
		if _, err := roundTrip(c, []byte("x")); err != nil {
			t.Fatal(err)
		}
		check(got.Next(t, "the calls of the first connection's OnOpen"))
	})
}

// sameSet reports whether ids holds each of 0..n-1 once.
func sameSet(ids []int, n int) bool {
	seen := make([]bool, n)
	for _, id := range ids {
		if id < 0 || id >= n || seen[id] {
			return false
		}
		seen[id] = true
	}
	return len(ids) == n
}

// pauseState is what ReadPaused and Backpressured said at one moment.
type pauseState struct {
	when                      string
	readPaused, backpressured bool
}

type drainWatch struct {
	conns *pctest.Inbox[*percore.Conn]
	seen  *pctest.Inbox[pauseState]
}

func (h drainWatch) OnOpen(c *percore.Conn) { h.conns.Put(c) }

func (drainWatch) OnData(*percore.Conn, []byte) {}

func (h drainWatch) OnDrain(c *percore.Conn) {
	h.seen.Put(pauseState{"OnDrain", c.ReadPaused(), c.Backpressured()})
}

// TestReadPausedCoversBothPauses: Conn.Paused used to report the outbound
// cap only, blind to PauseRead. Backpressured is the cap, ReadPaused either
// reason: PauseRead alone is ReadPaused and not Backpressured; the cap is
// both; once the queue drains (OnDrain) the cap is gone, and a PauseRead
// made meanwhile still holds reading.
func TestReadPausedCoversBothPauses(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := drainWatch{pctest.NewInbox[*percore.Conn](), pctest.NewInbox[pauseState]()}
		const limit = 64 << 10
		rt := start(t, percore.Config{Backend: b, MaxOutbound: limit}, h)
		client := dial(t, rt)
		c := h.conns.Next(t, "the connection")
		l := c.Loop()
		var states []pauseState
		written := 0
		note := func(when string) {
			states = append(states, pauseState{when, c.ReadPaused(), c.Backpressured()})
		}
		pctest.OnLoop(t, l, func() {
			note("open")
			c.PauseRead()
			note("PauseRead")
			c.ResumeRead()
			note("ResumeRead")
			// The kernel takes what its socket buffer holds at once
			// (epoll writes in place): write until the cap holds.
			chunk := make([]byte, limit)
			for !c.Backpressured() && written < 1<<30 {
				c.Write(chunk)
				written += len(chunk)
			}
			note("past the cap")
			c.PauseRead()
			note("past the cap, then PauseRead")
		})
		want := []pauseState{
			{"open", false, false},
			{"PauseRead", true, false},
			{"ResumeRead", false, false},
			{"past the cap", true, true},
			{"past the cap, then PauseRead", true, true},
		}
		for i, s := range states {
			if s != want[i] {
				t.Errorf("%s: ReadPaused %v, Backpressured %v; want %v, %v", s.when, s.readPaused, s.backpressured, want[i].readPaused, want[i].backpressured)
			}
		}
		if _, err := io.ReadFull(client, make([]byte, written)); err != nil {
			t.Fatal(err)
		}
		if s := h.seen.Next(t, "OnDrain"); !s.readPaused || s.backpressured {
			t.Errorf("OnDrain after a PauseRead: ReadPaused %v, Backpressured %v; want true, false", s.readPaused, s.backpressured)
		}
		pctest.OnLoop(t, l, func() {
			c.ResumeRead()
			if c.ReadPaused() || c.Backpressured() {
				t.Errorf("drained and resumed: ReadPaused %v, Backpressured %v; want false, false", c.ReadPaused(), c.Backpressured())
			}
		})
	})
}
