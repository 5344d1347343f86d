//go:build linux

package runtime

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestSettler checks when the process returns the heap's free pages after
// a storm of connections (heapreturn.go): a second of connections each
// tick, the counts given per tick (the gateway's cases, decision 0072).
func TestSettler(t *testing.T) {
	tests := []struct {
		name    string
		perTick []uint64
		want    []int    // the ticks that return
		bytes   []uint64 // the bytes moved each tick; none when nil
	}{
		{"a storm, then quiet", []uint64{5000, 8000, 3000, 0, 0}, []int{3}, nil},
		{"a storm, then a trickle", []uint64{5000, 8000, 40, 30, 30}, []int{2}, nil},
		{"a storm with a lull: the lull returns, the rest waits", []uint64{5000, 0, 7000, 0}, []int{1}, nil},
		{"steady churn is no storm", []uint64{500, 520, 480, 510, 500, 490, 505}, nil, nil},
		{"an uneven trickle returns once it adds up, once", []uint64{300, 0, 300, 0, 300, 0, 300, 0, 300, 0}, []int{7}, nil},
		{"too few connections", []uint64{400, 300, 0, 0, 0}, nil, nil},
		{"exactly the minimum", []uint64{1000, 0}, []int{1}, nil},
		{"the storm's tail above a tenth waits", []uint64{8000, 900, 801, 0}, []int{3}, nil},
		{"a storm, then traffic: it waits for the traffic to fall", []uint64{1000, 0, 0, 0, 0, 0},
			[]int{4}, []uint64{1 << 10, 1 << 30, 1 << 30, 1 << 29, 1 << 26, 0}},
		{"a storm, then traffic at a tenth of the storm's own", []uint64{5000, 0, 0}, []int{1}, []uint64{1 << 30, 1 << 26, 1 << 26}},
		{"a storm whose traffic rises after it", []uint64{5000, 0, 0}, nil, []uint64{1 << 20, 1 << 24, 1 << 25}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := settler{min: 1000}
			now := time.Unix(1_000_000, 0)
			var n, bytes uint64
			var got []int
			for i, d := range tt.perTick {
				n += d
				if tt.bytes != nil {
					bytes += tt.bytes[i]
				}
				now = now.Add(returnTick)
				if s.tick(n, bytes, now) {
					got = append(got, i)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("returned at ticks %v; want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("returned at ticks %v; want %v", got, tt.want)
				}
			}
		})
	}

	// After returnEvery, a second storm returns again; before, it waits.
	s := settler{min: 1000}
	at := time.Unix(1_000_000, 0)
	steps := []struct {
		n     uint64
		after time.Duration
		want  bool
	}{
		{5000, 0, false},                           // the storm
		{5000, returnTick, true},                   // settled
		{10000, returnEvery - 2*returnTick, false}, // the second storm
		{10000, returnEvery - returnTick, false},   // settled, but within the minute
		{10000, returnEvery + returnTick, true},    // settled, a minute on
		{10000, 3 * returnEvery, false},            // nothing new since
	}
	for i, st := range steps {
		if got := s.tick(st.n, 0, at.Add(st.after)); got != st.want {
			t.Fatalf("step %d: returned %v; want %v", i, got, st.want)
		}
	}
}

// TestSettlerSeeded drives the settler with random storms, lulls and
// trickles and checks its invariants at every tick: a return only with at
// least min connections since the last one, only on a tick that counted at
// most a tenth of the busiest since then (in connections and in bytes), never twice within returnEvery;
// and a storm followed by silence always returns. The seed is printed on
// failure.
func TestSettlerSeeded(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 0))
		s := settler{min: 1 + r.Uint64()%2000}
		now := time.Unix(1_000_000, 0)
		var n, lastN, peak, bytes, peakB uint64
		var last time.Time
		for tick := range 400 {
			var d, db uint64
			switch r.Uint64() % 3 {
			case 0: // no traffic
			case 1: // a little
				db = r.Uint64() % (1 << 10)
			case 2: // a lot
				db = r.Uint64() % (1 << 30)
			}
			bytes += db
			peakB = max(peakB, db)
			switch r.Uint64() % 4 {
			case 0: // silence
			case 1: // a trickle
				d = r.Uint64() % 20
			case 2: // churn
				d = 100 + r.Uint64()%50
			case 3: // a storm's second
				d = r.Uint64() % 10000
			}
			n += d
			now = now.Add(returnTick)
			peak = max(peak, d)
			if !s.tick(n, bytes, now) {
				continue
			}
			switch {
			case n-lastN < s.min:
				t.Fatalf("seed %d tick %d: returned after %d connections; min %d", seed, tick, n-lastN, s.min)
			case d*10 > peak:
				t.Fatalf("seed %d tick %d: returned on a tick of %d, busiest %d", seed, tick, d, peak)
			case db*10 > peakB:
				t.Fatalf("seed %d tick %d: returned on a tick of %d bytes, busiest %d", seed, tick, db, peakB)
			case !last.IsZero() && now.Sub(last) < returnEvery:
				t.Fatalf("seed %d tick %d: returned %v after the last return", seed, tick, now.Sub(last))
			}
			lastN, peak, peakB, last = n, 0, 0, now
		}
		// A storm, then silence: it returns within returnEvery and a tick.
		n += s.min
		returned := false
		for range int(returnEvery/returnTick) + 2 {
			now = now.Add(returnTick)
			if s.tick(n, bytes, now) {
				returned = true
				break
			}
		}
		if !returned {
			t.Fatalf("seed %d: a storm of %d then silence never returned", seed, s.min)
		}
	}
}
