package runtime_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// square is an op's value: in goes to the target, out and on come back.
// Reset keeps buf's room, as a Resetter of ordered does.
type square struct {
	in, out, on int
	buf         []byte
	resets      int
}

func (s *square) Reset() { *s = square{buf: s.buf[:0], resets: s.resets + 1} }

func runSquare(on *percore.Loop, v *square) {
	v.out, v.on = v.in*v.in, on.ID()
	v.buf = append(v.buf, "ran"...)
}

// opRound is a round of calls through a pool from loop a to loop z, made
// once so that a round allocates nothing of its own: per calls, each
// checked when it comes back, then one signal on done.
type opRound struct {
	t       *testing.T
	a, z    *percore.Loop
	pool    *percore.OpPool[square]
	per     int
	left    int
	bad     error
	done    chan struct{}
	roundFn func()
}

func newOpRound(t *testing.T, a, z *percore.Loop, per int) *opRound {
	r := &opRound{t: t, a: a, z: z, per: per, done: make(chan struct{}, 1)}
	r.roundFn = r.round
	pctest.OnLoop(t, a, func() { r.pool = percore.NewOpPool(a, runSquare, r.back) })
	return r
}

func (r *opRound) round() {
	r.left = r.per
	for i := range r.per {
		o := r.pool.Get()
		o.V.in = i
		r.pool.Call(r.z, o)
	}
}

var errWrongOp = errors.New("an op came back wrong")

func (r *opRound) back(v *square, err error) {
	switch {
	case err != nil:
		r.bad = err
	case v.on != r.z.ID() || v.out != v.in*v.in || string(v.buf) != "ran":
		r.bad = errWrongOp
	}
	if r.left--; r.left == 0 {
		r.done <- struct{}{}
	}
}

// run makes one round from outside the loops and waits for it (without
// pctest.Recv's timer, which allocates: the test's deadline bounds it).
func (r *opRound) run() {
	if err := r.a.Post(r.roundFn); err != nil {
		r.t.Fatal(err)
	}
	<-r.done
}

// TestOpPoolCallsAllocateNothing: cross-loop calls through an OpPool
// allocate nothing once the pool and the loops are warm (the op pool
// examples/kv had, now the library's), where Loop.Call with a closure per
// call allocates at every call, which the second half shows so that the
// count is seen to count. The pool makes no more ops than a round has in
// flight.
func TestOpPoolCallsAllocateNothing(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := twoLoops(t, percore.Config{Backend: b}, nil)
		a, z := rt.Loops()[0], rt.Loops()[1]
		const per = 100
		r := newOpRound(t, a, z, per)
		for range 20 { // warm up: the ops, the batches, the queues' slices
			r.run()
		}
		allocs := testing.AllocsPerRun(50, r.run)
		if r.bad != nil {
			t.Fatal(r.bad)
		}
		switch {
		case raceEnabled:
			t.Logf("%v allocations per round of %d calls through an OpPool under -race (its wake-ups allocate): not checked", allocs, per)
		case allocs != 0:
			t.Errorf("%v allocations per round of %d calls through an OpPool, want 0", allocs, per)
		}
		var made int
		pctest.OnLoop(t, a, func() { made = r.pool.Made() })
		if made != per {
			t.Errorf("the pool made %d ops for rounds of %d calls in flight, want %d", made, per, per)
		}

		// The same calls with a closure each.
		left := 0
		done := make(chan struct{}, 1)
		closures := func() {
			left = per
			for i := range per {
				var out int
				a.Call(z, func() { out = i * i }, func(error) {
					_ = out
					if left--; left == 0 {
						done <- struct{}{}
					}
				})
			}
		}
		for range 5 {
			if err := a.Post(closures); err != nil {
				t.Fatal(err)
			}
			pctest.Recv(t, done, "a round of closure calls")
		}
		allocs = testing.AllocsPerRun(20, func() {
			if err := a.Post(closures); err != nil {
				t.Fatal(err)
			}
			<-done
		})
		if allocs < per {
			t.Errorf("%v allocations per round of %d closure calls: the count does not see them", allocs, per)
		}
	})
}

// TestOpPoolResetsOrderAndErrors: an op's value is reset on reuse (Reset
// when it has one, keeping its room); calls to the pool's own loop run at
// once; calls keep their order; a call to a stopped loop comes back with
// ErrLoopStopped, its run not run, and its op back in the pool; a Call of
// an op in flight panics.
func TestOpPoolResetsOrderAndErrors(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := twoLoops(t, percore.Config{Backend: b}, nil)
		a, z := rt.Loops()[0], rt.Loops()[1]
		type back struct {
			in, on int
			err    error
			resets int
		}
		got := pctest.NewInbox[back]()
		var pool *percore.OpPool[square]
		var order []int
		pctest.OnLoop(t, a, func() {
			pool = percore.NewOpPool(a, runSquare, func(v *square, err error) {
				order = append(order, v.in)
				got.Put(back{v.in, v.on, err, v.resets})
			})
			o := pool.Get()
			o.V.in = 7
			pool.Call(a, o) // to itself: at once
			for i := range 10 {
				o := pool.Get()
				o.V.in = 100 + i
				pool.Call(z, o)
				if i == 0 {
					func() {
						defer func() {
							if recover() == nil {
								t.Error("a Call of an op in flight did not panic")
							}
						}()
						pool.Call(z, o)
					}()
				}
			}
		})
		if r := got.Next(t, "the call to the pool's own loop"); r.in != 7 || r.on != a.ID() || r.err != nil {
			t.Fatalf("the call to the own loop came back %+v", r)
		}
		for i := range 10 {
			r := got.Next(t, "a call to the other loop")
			if r.in != 100+i || r.on != z.ID() || r.err != nil {
				t.Fatalf("call %d came back %+v, want in %d, run on loop %d", i, r, 100+i, z.ID())
			}
		}
		pctest.OnLoop(t, a, func() {
			if len(order) != 11 {
				t.Errorf("done functions ran for %v", order)
			}
			o := pool.Get()
			if o.V.in != 0 || o.V.resets == 0 || len(o.V.buf) != 0 || cap(o.V.buf) == 0 {
				t.Errorf("a reused op's value %+v: want it Reset, its buffer's room kept", o.V)
			}
		})
		// A stopped target.
		pctest.OnLoop(t, z, func() { percore.StopLoop(z) })
		pctest.WaitFor(t, "the target loop exited", func() bool { return percore.LoopExited(z) })
		pctest.OnLoop(t, a, func() {
			o := pool.Get()
			o.V.in = 9
			pool.Call(z, o)
		})
		if r := got.Next(t, "the call to a stopped loop"); r.in != 9 || !errors.Is(r.err, percore.ErrLoopStopped) || r.on != 0 {
			t.Fatalf("the call to a stopped loop came back %+v, want ErrLoopStopped and run not run", r)
		}
		pctest.OnLoop(t, a, func() {
			if made := pool.Made(); made > 11 {
				t.Errorf("the pool made %d ops for at most 11 in flight", made)
			}
		})
	})
}

// seqOp is the value of TestOpPoolSeededReuse's ops: which call it is,
// where it must run, and what run wrote for it alone.
type seqOp struct {
	seq, target int
	ranOn       int
	note        []byte
}

func (v *seqOp) Reset() { *v = seqOp{ranOn: -1, note: v.note[:0]} }

// TestOpPoolSeededReuse: random bursts of calls, to random loops (the
// pool's own among them), overlapping, from one loop's pool. The oracle:
// each call runs once, on its target, and its done function sees its own
// value (no op is handed out again while in flight: its note holds only
// its own call's mark); the calls to each target run, and come back, in
// the order made; the pool makes no more ops than were ever in flight at
// once. The seed is in the subtest's name.
func TestOpPoolSeededReuse(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := twoLoops(t, percore.Config{Backend: b}, nil)
		loops := rt.Loops()
		a := loops[0]
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 0x0ba11))
				ran := make([][]int, len(loops)) // by target, on its thread
				var (
					made, inFlight, most int
					backs                []int // seqs, in the order done ran
					failure              string
					left                 int
				)
				finished := make(chan struct{})
				fail := func(format string, args ...any) {
					if failure == "" {
						failure = fmt.Sprintf(format, args...)
					}
				}
				var pool *percore.OpPool[seqOp]
				pctest.OnLoop(t, a, func() {
					pool = percore.NewOpPool(a, func(on *percore.Loop, v *seqOp) {
						v.ranOn = on.ID()
						v.note = strconv.AppendInt(v.note, int64(v.seq), 10)
						ran[on.ID()] = append(ran[on.ID()], v.seq)
					}, func(v *seqOp, err error) {
						inFlight--
						switch {
						case err != nil:
							fail("call %d: %v", v.seq, err)
						case v.ranOn != v.target:
							fail("call %d to loop %d ran on %d", v.seq, v.target, v.ranOn)
						case string(v.note) != strconv.Itoa(v.seq):
							fail("call %d came back with the note %q: its op was shared", v.seq, v.note)
						}
						backs = append(backs, v.seq)
						if left--; left == 0 {
							close(finished)
						}
					})
				})
				const bursts = 40
				seq := 0
				var targets []int // by seq
				var plan [][]int  // per burst, the targets
				for range bursts {
					var burst []int
					for range 1 + rng.IntN(60) {
						burst = append(burst, rng.IntN(len(loops)))
					}
					plan = append(plan, burst)
					left += len(burst)
				}
				for _, burst := range plan {
					err := a.Post(func() {
						for _, to := range burst {
							o := pool.Get()
							if o.V.ranOn != -1 && o.V.seq != 0 {
								fail("Get handed out an op not reset: %+v", o.V)
							}
							o.V.seq, o.V.target = seq, to
							targets = append(targets, to)
							seq++
							inFlight++
							most = max(most, inFlight)
							pool.Call(loops[to], o)
						}
						made = pool.Made()
					})
					if err != nil {
						t.Fatal(err)
					}
				}
				pctest.Recv(t, finished, "every call back")
				pctest.OnLoop(t, a, func() {
					if failure != "" {
						t.Fatal(failure)
					}
					if made > most {
						t.Errorf("the pool made %d ops for at most %d in flight", made, most)
					}
					// Done functions: per target, in the order made.
					last := make([]int, len(loops))
					for i := range last {
						last[i] = -1
					}
					for _, s := range backs {
						if to := targets[s]; s < last[to] {
							t.Fatalf("call %d to loop %d came back after call %d", s, to, last[to])
						} else {
							last[to] = s
						}
					}
				})
				for id, l := range loops {
					pctest.OnLoop(t, l, func() {
						for i := 1; i < len(ran[id]); i++ {
							if ran[id][i] < ran[id][i-1] {
								t.Fatalf("on loop %d, call %d ran after call %d", id, ran[id][i], ran[id][i-1])
							}
						}
					})
				}
			})
		}
	})
}

// TestOpPoolShed: Shed lets go of the Ops the pool keeps (Made counts
// what is left), not of one in flight, which comes back to the pool when
// its call is done; the calls after a shed make Ops again and work.
func TestOpPoolShed(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := twoLoops(t, percore.Config{Backend: b}, nil)
		a, z := rt.Loops()[0], rt.Loops()[1]
		const per = 50
		r := newOpRound(t, a, z, per)
		r.run()
		// A shed while the round is in flight lets none of it go.
		if err := a.Post(func() { r.round(); r.pool.Shed() }); err != nil {
			t.Fatal(err)
		}
		<-r.done
		if r.bad != nil {
			t.Fatal(r.bad)
		}
		pctest.OnLoop(t, a, func() {
			if n := r.pool.Made(); n != per {
				t.Fatalf("made %d after a round of %d shed in flight; want %d back in the pool", n, per, per)
			}
			r.pool.Shed()
			if n := r.pool.Made(); n != 0 {
				t.Fatalf("made %d after a shed with nothing in flight; want 0", n)
			}
		})
		r.run() // makes them again
		if r.bad != nil {
			t.Fatal(r.bad)
		}
		var made int
		pctest.OnLoop(t, a, func() { made = r.pool.Made() })
		if made != per {
			t.Fatalf("made %d after a round following the shed; want %d", made, per)
		}
	})
}
