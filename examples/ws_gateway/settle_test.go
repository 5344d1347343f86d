//go:build linux

package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestSettler checks when the gateway returns free heap pages after a
// storm (settle.go): a second of upgrades each tick, the counts given
// per tick.
func TestSettler(t *testing.T) {
	tests := []struct {
		name    string
		perTick []uint64
		want    []int // the ticks that return
	}{
		{"a storm, then quiet", []uint64{5000, 8000, 3000, 0, 0}, []int{3}},
		{"a storm, then a trickle", []uint64{5000, 8000, 40, 30, 30}, []int{2}},
		{"a storm with a lull: the lull returns, the rest waits", []uint64{5000, 0, 7000, 0}, []int{1}},
		{"steady churn is no storm", []uint64{500, 520, 480, 510, 500, 490, 505}, nil},
		{"an uneven trickle returns once it adds up, once", []uint64{300, 0, 300, 0, 300, 0, 300, 0, 300, 0}, []int{7}},
		{"too few upgrades", []uint64{400, 300, 0, 0, 0}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := settler{min: 1000}
			now := time.Unix(1_000_000, 0)
			var n uint64
			var got []int
			for i, d := range tt.perTick {
				n += d
				now = now.Add(settleTick)
				if s.tick(n, now) {
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

	// After returnEvery, a second storm returns again.
	s := settler{min: 1000}
	at := time.Unix(1_000_000, 0)
	steps := []struct {
		n     uint64
		after time.Duration
		want  bool
	}{
		{5000, 0, false},                        // the storm
		{5000, settleTick, true},                // settled
		{10000, returnEvery, false},             // the second storm
		{10000, returnEvery + settleTick, true}, // settled, a minute on
	}
	for i, st := range steps {
		if got := s.tick(st.n, at.Add(st.after)); got != st.want {
			t.Fatalf("step %d: returned %v; want %v", i, got, st.want)
		}
	}
}

// TestReturnAfterStorms checks the goroutine around settler: a storm of
// min upgrades returns the free pages once it has settled, at the storm's
// count, and not while it still arrives.
func TestReturnAfterStorms(t *testing.T) {
	g := newGateway("s", 0)
	var n loopCounters
	g.counters[0] = &n
	returned := make(chan uint64, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.returnAfterStorms(ctx, 100, time.Millisecond, func(u uint64) { returned <- u },
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })

	// A trickle below min, then the rest of the storm: one return, at
	// the storm's count.
	for range 60 {
		n.upgrades.Add(1)
	}
	for range 40 {
		n.upgrades.Add(1)
	}
	select {
	case u := <-returned:
		if u != 100 {
			t.Fatalf("returned after %d upgrades; want 100 (not before min)", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no return 10 s after a storm of 100 upgrades settled")
	}
}
