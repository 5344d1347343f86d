//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// TestClientSizeClass holds a client, what a WebSocket costs the gateway
// above the runtime, in the 64-byte size class (decision 0079: the user's
// name in the loop's names and the heartbeat's count in the seat; 80
// until then, decision 0074; 128 and 160 before, decision 0065).
func TestClientSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(client{}); n > 64 {
		t.Fatalf("client is %d bytes; want at most 64", n)
	}
}

// TestNamesModel drives a loop's list of clients and their names with
// random arrivals and departures (bursts of each, as a reconnection storm
// makes them) against a map from client to name, checking after every
// compaction and every eighth step that each live client's name is the
// model's and its seat its place, and that the names array stays within
// twice the live names plus namesSlack. Names run from empty to longer
// than a one-byte length takes. Sweeps missed and messages heard between
// the steps check that the heartbeat's count in the seat survives the
// client's moves in the list.
func TestNamesModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 79))
		ls := &loopState{}
		model := map[*client]string{}
		silent := map[*client]int{} // the heartbeat's count, saturating
		compactions, maxLen := 0, 0
		for step := range 6000 {
			at := fmt.Sprintf("seed %d step %d", seed, step)
			// Phases of growth, churn and departures, a thousand
			// steps each.
			arrive := rng.IntN(100) < [3]int{75, 50, 30}[(step/1000)%3]
			if len(ls.clients) > 0 && rng.IntN(4) == 0 { // a sweep missed one, or it spoke
				cl := ls.clients[rng.IntN(len(ls.clients))]
				if rng.IntN(3) == 0 {
					cl.seat.heard()
					silent[cl] = 0
				} else {
					cl.seat.missed()
					silent[cl] = min(silent[cl]+1, silentMax)
				}
			}
			if arrive || len(ls.clients) == 0 {
				n := rng.IntN(40)
				if rng.IntN(20) == 0 {
					n = 100 + rng.IntN(300) // a uvarint length of two bytes
				}
				name := strings.Repeat(string(rune('a'+step%26)), n) + fmt.Sprint(step)
				cl := &client{}
				if !ls.enter(cl, []byte(name)) {
					t.Fatalf("%s: enter refused", at)
				}
				model[cl] = name
			} else {
				cl := ls.clients[rng.IntN(len(ls.clients))]
				ls.exit(cl)
				if !cl.seat.gone() {
					t.Fatalf("%s: a client that left is not gone", at)
				}
				delete(model, cl)
				delete(silent, cl)
				if len(model) > 0 && ls.names.dead == 0 { // a free always adds to dead but for a compaction
					compactions++
					checkNames(t, at+" (compacted)", ls, model)
				}
			}
			if step%8 == 0 || len(model) < 8 {
				checkNames(t, at, ls, model)
			}
			for _, cl := range ls.clients {
				if got := cl.seat.silent(); got != silent[cl] {
					t.Fatalf("%s: client at %d has missed %d sweeps, want %d", at, cl.seat.index(), got, silent[cl])
				}
			}
			maxLen = max(maxLen, len(ls.names.b))
		}
		if compactions == 0 {
			t.Fatalf("seed %d: no compaction in 6000 steps (longest array %d B)", seed, maxLen)
		}
	}
}

func checkNames(t *testing.T, at string, ls *loopState, model map[*client]string) {
	t.Helper()
	if len(ls.clients) != len(model) {
		t.Fatalf("%s: %d clients in the list, %d in the model", at, len(ls.clients), len(model))
	}
	live := 0
	for i, cl := range ls.clients {
		want, ok := model[cl]
		if !ok {
			t.Fatalf("%s: client at %d left, still in the list", at, i)
		}
		if cl.seat.index() != i || cl.seat.gone() {
			t.Fatalf("%s: client at %d has seat %d (gone %v)", at, i, cl.seat.index(), cl.seat.gone())
		}
		if got := string(ls.user(cl)); got != want {
			t.Fatalf("%s: client at %d is %q, want %q", at, i, got, want)
		}
		live += ls.names.size(cl.user)
	}
	if got := len(ls.names.b) - ls.names.dead; got != live {
		t.Fatalf("%s: %d B of names counted live, the clients' add up to %d", at, got, live)
	}
	if len(ls.names.b) > 2*live+namesSlack {
		t.Fatalf("%s: names array %d B for %d B live: past twice plus %d", at, len(ls.names.b), live, namesSlack)
	}
	if len(model) == 0 && ls.names.b != nil {
		t.Fatalf("%s: no client, the names array kept (%d B)", at, cap(ls.names.b))
	}
}

// TestNamesAllocateNothingPerClient: a client entering and leaving a loop
// with a thousand others allocates nothing for its name (main's client
// made a string of it at each upgrade); the array's growth and its
// compactions, once per thousand or so, are amortised below one a client.
func TestNamesAllocateNothingPerClient(t *testing.T) {
	ls := &loopState{}
	for i := range 1000 {
		ls.enter(&client{}, fmt.Appendf(nil, "u%d", i))
	}
	cl, user := &client{}, []byte("u1000")
	if n := testing.AllocsPerRun(1000, func() {
		ls.enter(cl, user)
		ls.exit(cl)
	}); n != 0 {
		t.Fatalf("a client's entry and exit allocate %v times", n)
	}
}
