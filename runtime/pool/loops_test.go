package pool

import (
	"testing"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// The pool's behaviour tests run inside real loops, once per backend.

// startLoops starts a client-only runtime with n loops and returns them.
func startLoops(t *testing.T, b percore.Backend, n int) []*percore.Loop {
	t.Helper()
	return startRuntime(t, b, n).Loops()
}

// startRuntime starts a client-only runtime with n loops (on the allowed
// CPUs, sharing them when there are fewer) and closes it at cleanup.
func startRuntime(t *testing.T, b percore.Backend, n int) *percore.Runtime {
	t.Helper()
	all, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	cores := make([]int, n)
	for i := range cores {
		cores[i] = all[i%len(all)]
	}
	return pctest.Start(t, percore.Config{Backend: b, Cores: cores}, nil)
}

// result is what a get's done received.
type result struct {
	lease Lease[*fakeConn]
	err   error
}

// getter issues gets on a loop and collects their results in order.
type getter struct {
	t     *testing.T
	loop  *percore.Loop
	local *Local[*fakeConn]
	got   chan result
}

func newGetter(t *testing.T, p *Pool[*fakeConn], loop *percore.Loop) *getter {
	g := &getter{t: t, loop: loop, got: make(chan result, 64)}
	pctest.OnLoop(t, loop, func() { g.local = p.Local(loop) })
	return g
}

// get issues n gets on the loop.
func (g *getter) get(n int) {
	g.t.Helper()
	pctest.OnLoop(g.t, g.loop, func() {
		for range n {
			g.local.Get(func(ls Lease[*fakeConn], err error) { g.got <- result{ls, err} })
		}
	})
}

// next waits for the next result.
func (g *getter) next() result {
	g.t.Helper()
	return pctest.Recv(g.t, g.got, "end of a get")
}

// lease waits for the next result and fails the test unless it is a lease.
func (g *getter) lease() Lease[*fakeConn] {
	g.t.Helper()
	r := g.next()
	if r.err != nil {
		g.t.Fatalf("get: %v", r.err)
	}
	return r.lease
}

// none checks that no get has ended.
func (g *getter) none() {
	g.t.Helper()
	pctest.OnLoop(g.t, g.loop, func() {}) // let the loop finish its turn
	select {
	case r := <-g.got:
		g.t.Fatalf("a get ended early: %v, %v", r.lease, r.err)
	default:
	}
}

func (g *getter) put(ls Lease[*fakeConn]) {
	g.t.Helper()
	pctest.OnLoop(g.t, g.loop, func() { g.local.Put(ls) })
}

// state returns the Local's State and Statistics, read on the loop.
func (g *getter) state() (st State, s Statistics) {
	g.t.Helper()
	pctest.OnLoop(g.t, g.loop, func() { st, s = g.local.State(), g.local.Statistics() })
	return st, s
}
