package ring

import (
	"testing"
	"time"
)

// roundTrip prepares a cancel of nothing (the cheapest operation that
// completes at once), enters the kernel to submit it and wait for its
// completion, and reaps it.
func roundTrip(tb testing.TB, r *Ring, timeout time.Duration, cs []Completion) {
	if err := r.PrepareCancel(1<<40, 1); err != nil {
		tb.Fatal(err)
	}
	if err := r.SubmitAndWait(timeout); err != nil {
		tb.Fatal(err)
	}
	if n := r.Reap(cs); n != 1 {
		tb.Fatalf("Reap returned %d completions, want 1", n)
	}
}

// TestRoundTripAllocs checks that a round trip allocates nothing, also with
// a timed wait, whose arguments live in the Ring.
func TestRoundTripAllocs(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
	}{
		{"untimed wait", -1},
		{"timed wait", waitLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustOpen(t, Config{Entries: 8})
			cs := make([]Completion, 4)
			allocs := testing.AllocsPerRun(100, func() { roundTrip(t, r, tt.timeout, cs) })
			if allocs != 0 {
				t.Errorf("a round trip allocates %v times", allocs)
			}
		})
	}
}

// BenchmarkNopRoundTrip measures one prepare, submit-and-wait and reap of an
// operation that completes at once; it reports the kernel entries per
// operation (1 is the goal).
func BenchmarkNopRoundTrip(b *testing.B) {
	r := mustOpen(b, Config{Entries: 64})
	cs := make([]Completion, 4)
	start := r.Enters()
	ops := 0
	b.ReportAllocs()
	for b.Loop() {
		roundTrip(b, r, -1, cs)
		ops++
	}
	b.ReportMetric(float64(r.Enters()-start)/float64(ops), "enters/op")
}
