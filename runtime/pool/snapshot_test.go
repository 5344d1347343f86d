package pool

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// TestSnapshotUnderLoad: while two loops lend, return, break and time out
// connections as fast as they can (connects answered a turn later, some
// refused), a reader on another goroutine takes snapshots, and every one
// of them satisfies the conservation law, stays within the loops' slots and
// never goes back. The model test checks the same against an oracle, one
// step at a time; this one has real loops publishing and a real reader.
func TestSnapshotUnderLoad(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		const loops, maxSize, rounds = 2, 3, 400
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rt := startRuntime(t, b, loops)
		m := newFakeManager()
		m.set(func(m *fakeManager) { m.connectMode = answerPosted })
		p := newTestPool(t, m, Config{MaxSize: maxSize, ConnectionTimeout: 20 * time.Millisecond})

		// The loops go on past their rounds until the reader has seen
		// enough distinct snapshots, so that on a loaded machine (the
		// reader starved of CPU) the test still overlaps reads with the
		// loops' traffic instead of failing on the scheduling.
		var seen atomic.Int32
		var wg sync.WaitGroup
		for i, l := range rt.Loops() {
			wg.Add(1)
			var local *Local[*fakeConn]
			pctest.OnLoop(t, l, func() { local = p.Local(l) })
			w := &churn{t: t, l: l, m: m, local: local, rng: rand.New(rand.NewPCG(seed, uint64(i))), left: rounds, seen: &seen, done: wg.Done}
			pctest.OnLoop(t, l, w.round)
		}
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()

		var prev Statistics
		snaps, distinct, last := 0, 0, uint64(0)
		deadline := time.Now().Add(time.Minute)
		for reading := true; reading; {
			select {
			case <-finished:
				reading = false
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("seed %d: the loops did not finish their %d rounds within a minute", seed, rounds)
			}
			st, s := p.Snapshot()
			snaps++
			if s.Created != s.Closed()+uint64(st.Connections) {
				t.Fatalf("seed %d, snapshot %d: created %d != closed %d + live %d (%v; %v)",
					seed, snaps, s.Created, s.Closed(), st.Connections, st, s)
			}
			if st.Loops != loops || st.Connections+st.Connecting > loops*maxSize || st.Idle > st.Connections {
				t.Fatalf("seed %d, snapshot %d: %v with %d loops of %d slots", seed, snaps, st, loops, maxSize)
			}
			if f := wentDown(prev, s); f != "" {
				t.Fatalf("seed %d, snapshot %d: %s went down: was %+v, now %+v", seed, snaps, f, prev, s)
			}
			prev = s
			if s.Gets() != last {
				distinct++
				seen.Store(int32(distinct))
				last = s.Gets()
			}
		}
		t.Logf("%d snapshots, %d of them after new gets; last %+v", snaps, distinct, prev)

		// Settled and stopped, the books balance.
		rt.Close()
		st, s := p.Snapshot()
		if st != (State{}) || s.Created != s.Closed() {
			t.Fatalf("after stop: %v; %+v", st, s)
		}
		checkConservation(t, st, s, m)
	})
}

// churn is one loop's random traffic: each round (a posted function) gets,
// returns and breaks connections and makes the manager refuse connects or
// not, then posts the next round.
type churn struct {
	t     *testing.T
	l     *percore.Loop
	m     *fakeManager
	local *Local[*fakeConn]
	rng   *rand.Rand
	held  []Lease[*fakeConn]
	left  int
	seen  *atomic.Int32 // the reader's distinct snapshots so far
	done  func()
}

// minDistinct is how many snapshots taken after new gets the reader must
// see before the loops stop their traffic.
const minDistinct = 10

func (w *churn) round() {
	if w.left > 0 || w.seen.Load() < minDistinct {
		w.left--
		w.random()
	} else {
		// Give everything back, also what the waiters this hands it to
		// take, until no get is in progress, so that nothing is lent
		// when the loop stops.
		for len(w.held) > 0 {
			ls := w.held[0]
			w.held = w.held[1:]
			w.local.Put(ls)
		}
		if w.local.active.len == 0 && w.local.connecting == 0 {
			w.done()
			return
		}
	}
	if err := w.l.Post(w.round); err != nil {
		w.t.Errorf("post the next round: %v", err)
		w.done()
	}
}

// random is one round's gets, puts, breakages and refusals.
func (w *churn) random() {
	for range 1 + w.rng.IntN(4) {
		switch op := w.rng.IntN(10); {
		case op < 5:
			w.local.Get(func(ls Lease[*fakeConn], err error) {
				if err == nil {
					w.held = append(w.held, ls)
				}
			})
		case op == 5:
			refuse := w.rng.IntN(4) == 0
			w.m.set(func(m *fakeManager) { m.failConnects = refuse })
		case len(w.held) > 0:
			i := w.rng.IntN(len(w.held))
			ls := w.held[i]
			w.held = append(w.held[:i], w.held[i+1:]...)
			if op == 9 {
				ls.Conn().broken = true
			}
			w.local.Put(ls)
		}
	}
}
