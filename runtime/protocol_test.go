package runtime_test

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// twoLoops starts a runtime of two loops (sharing the test's CPUs).
func twoLoops(t *testing.T, cfg percore.Config, h percore.Handler) *percore.Runtime {
	t.Helper()
	cores := allCores(t)
	if len(cores) < 2 {
		t.Skip("needs two CPUs in the affinity mask: Config.Cores takes a CPU once")
	}
	cfg.Cores = []int{cores[0], cores[len(cores)-1]}
	return start(t, cfg, h)
}

func TestCallRunsOnTheTargetAndReturns(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := twoLoops(t, percore.Config{Backend: b}, nil)
		a, z := rt.Loops()[0], rt.Loops()[1]
		const n = 5000
		var ranOn [n]int
		done := make(chan []int, 1)
		pctest.OnLoop(t, a, func() {
			// Thousands of calls in one turn: one batch, one wake-up.
			var order []int
			for i := range n {
				a.Call(z, func() { ranOn[i] = z.ID() + 1 }, func(err error) {
					if err != nil {
						t.Errorf("call %d: %v", i, err)
					}
					order = append(order, i)
					if len(order) == n {
						done <- order
					}
				})
			}
		})
		order := pctest.Recv(t, done, "the calls' done functions")
		for i, got := range order {
			if got != i {
				t.Fatalf("done %d ran as the %dth: out of order", got, i)
			}
			if ranOn[i] != z.ID()+1 {
				t.Fatalf("call %d did not run on the target", i)
			}
		}
		pctest.WaitFor(t, "the target's stats", func() bool { return z.Stats().CallsRun == n })
		// One turn's calls to one loop are one batch, with one wake-up.
		if st := z.Stats(); st.CallBatches != 1 {
			t.Errorf("%d calls made in one turn came in %d batches, want 1", n, st.CallBatches)
		}
		pctest.WaitFor(t, "the caller's stats", func() bool { return a.Stats().CallsMade == n })
	})
}

func TestCallToAStoppedLoop(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := twoLoops(t, percore.Config{Backend: b}, nil)
		a, z := rt.Loops()[0], rt.Loops()[1]
		// Stop z alone: a posted forced stop, as Close does per loop.
		stopped := make(chan struct{})
		pctest.OnLoop(t, z, func() { percore.StopLoop(z); close(stopped) })
		<-stopped
		pctest.WaitFor(t, "the target loop exited", func() bool { return percore.LoopExited(z) })
		errs := pctest.NewInbox[error]()
		var ran atomic.Bool
		pctest.OnLoop(t, a, func() {
			a.Call(z, func() { ran.Store(true) }, errs.Put)
		})
		if err := errs.Next(t, "the call's done"); !errors.Is(err, percore.ErrLoopStopped) || !errors.Is(err, net.ErrClosed) {
			t.Fatalf("done got %v, want ErrLoopStopped", err)
		}
		if ran.Load() {
			t.Error("the call ran on a stopped loop")
		}
	})
}

func TestPerLoopState(t *testing.T) {
	type shard struct{ id, hits int }
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		var shards percore.PerLoop[shard] // one per runtime
		h := percore.HandlerFunc(func(c *percore.Conn, data []byte) {
			s := shards.Get(c.Loop())
			s.hits++
			c.Write([]byte{byte(s.id)})
		})
		rt := twoLoops(t, percore.Config{Backend: b, LoopSetup: func(l *percore.Loop) error {
			shards.Set(l, shard{id: 10 + l.ID()})
			return nil
		}}, h)
		for _, l := range rt.Loops() {
			pctest.OnLoop(t, l, func() {
				if s := shards.Get(l); s == nil || s.id != 10+l.ID() {
					t.Errorf("loop %d: shard %+v", l.ID(), s)
				}
			})
		}
		c := dial(t, rt)
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		var got [1]byte
		if _, err := io.ReadFull(c, got[:]); err != nil || got[0] < 10 {
			t.Fatalf("reply %v, %v", got, err)
		}
	})
	t.Run("setup error", func(t *testing.T) {
		_, err := percore.New(percore.Config{Cores: allCores(t)[:1], Logger: pctest.QuietLogger(t),
			LoopSetup: func(*percore.Loop) error { return io.ErrUnexpectedEOF }}, nil)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("New: %v, want the setup's error", err)
		}
	})
}

// reserver answers each request with a reply built in place.
type reserver struct{}

func (reserver) OnData(c *percore.Conn, data []byte) {
	room := c.Reserve(len(data))
	n := copy(room, data)
	c.Commit(n)
}

func TestReserveCommitAllocatesNothing(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		assertNoAllocs(t, start(t, percore.Config{Backend: b}, reserver{}))
	})
}

// pausable echoes, and pauses reading when told to by a posted function.
type pausable struct{ got *atomic.Int64 }

func (h pausable) OnData(c *percore.Conn, data []byte) {
	h.got.Add(int64(len(data)))
	c.Write(data)
}

func TestPauseAndResumeRead(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		var got atomic.Int64
		opened := pctest.NewInbox[*percore.Conn]()
		h := &openHook{pausable{&got}, opened}
		rt := start(t, percore.Config{Backend: b}, h)
		c := dial(t, rt)
		pc := opened.Next(t, "open")
		l := rt.Loops()[0]
		pctest.OnLoop(t, l, pc.PauseRead)
		before := got.Load()
		if _, err := c.Write([]byte("while paused")); err != nil {
			t.Fatal(err)
		}
		// Give the loop turns to (wrongly) deliver: round trips through
		// posted functions, not a sleep.
		for range 20 {
			pctest.OnLoop(t, l, func() {})
		}
		if got.Load() != before {
			t.Fatalf("%d bytes delivered while reading was paused", got.Load()-before)
		}
		pctest.OnLoop(t, l, pc.ResumeRead)
		buf := make([]byte, len("while paused"))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "while paused" {
			t.Fatalf("after resume: %q, %v", buf, err)
		}
	})
}

type openHook struct {
	pausable
	opened *pctest.Inbox[*percore.Conn]
}

func (h *openHook) OnOpen(c *percore.Conn) { h.opened.Put(c) }

func TestCommitNoMoreThanReserved(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		errs := pctest.NewInbox[error]()
		h := percore.HandlerFunc(func(c *percore.Conn, data []byte) {
			room := c.Reserve(4)
			copy(room, "pong")
			errs.Put(c.Commit(5))
			errs.Put(c.Commit(4))
		})
		rt := start(t, percore.Config{Backend: b}, h)
		c := dial(t, rt)
		c.Write([]byte("ping"))
		if err := errs.Next(t, "commit past the room"); err == nil {
			t.Error("a commit of more than was reserved succeeded")
		}
		if err := errs.Next(t, "commit of the room"); err != nil {
			t.Errorf("commit of the room: %v", err)
		}
		var got [4]byte
		if _, err := io.ReadFull(c, got[:]); err != nil || string(got[:]) != "pong" {
			t.Fatalf("reply %q, %v", got, err)
		}
	})
}

func TestPerLoopServesOneRuntime(t *testing.T) {
	var vals percore.PerLoop[int]
	setup := func(l *percore.Loop) error { vals.Set(l, l.ID()); return nil }
	first := start(t, percore.Config{LoopSetup: setup}, nil)
	second := start(t, percore.Config{}, nil)
	l := second.Loops()[0]
	var got *int
	var panicked any
	pctest.OnLoop(t, l, func() {
		got = vals.Get(l)
		func() {
			defer func() { panicked = recover() }()
			vals.Set(l, 7)
		}()
	})
	if got != nil {
		t.Errorf("a loop of another runtime got %d", *got)
	}
	if panicked == nil {
		t.Error("Set on a loop of another runtime did not panic")
	}
	pctest.OnLoop(t, first.Loops()[0], func() {
		if v := vals.Get(first.Loops()[0]); v == nil || *v != 0 {
			t.Errorf("the runtime's own loop: %v", v)
		}
	})
}

func TestOwnerIsStableAndSpread(t *testing.T) {
	rt := twoLoops(t, percore.Config{}, nil)
	seen := map[*percore.Loop]int{}
	for i := range 1000 {
		key := []byte{byte(i), byte(i >> 8), 'k'}
		o := rt.Loops()[0].Owner(key)
		if rt.Loops()[0].OwnerOf(string(key)) != o || rt.Loops()[1].Owner(key) != o || rt.Loops()[1].OwnerOf(string(key)) != o {
			t.Fatalf("key %q: owners disagree", key)
		}
		seen[o]++
	}
	if len(seen) != 2 {
		t.Fatalf("1000 keys went to %d loops, want both", len(seen))
	}
}
