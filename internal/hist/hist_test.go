package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// maxRelErr is the error bound of a quantile at three significant digits
// (0.1%); the midpoint rule actually keeps it under 1/2048.
const maxRelErr = 0.001

var quantiles = []float64{0.5, 0.9, 0.99, 0.999}

// exact returns the value of rank ceil(q*n) in sorted, the definition
// Quantile approximates.
func exact(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func TestQuantileAgainstKnownDistributions(t *testing.T) {
	tests := []struct {
		name string
		gen  func(r *rand.Rand, i int) int64
		n    int
	}{
		{"uniform 1..1e6 in order", func(_ *rand.Rand, i int) int64 { return int64(i + 1) }, 1_000_000},
		{"small exact values", func(r *rand.Rand, _ int) int64 { return r.Int64N(2048) }, 10_000},
		{"exponential around 50us", func(r *rand.Rand, _ int) int64 { return int64(r.ExpFloat64() * 50_000) }, 200_000},
		{"log-uniform 1us..1s", func(r *rand.Rand, _ int) int64 { return int64(math.Pow(10, 3+6*r.Float64())) }, 200_000},
		{"bimodal 20us and 2ms", func(r *rand.Rand, i int) int64 {
			if i%100 == 0 {
				return 2_000_000 + r.Int64N(100_000)
			}
			return 20_000 + r.Int64N(2_000)
		}, 100_000},
		{"huge values", func(r *rand.Rand, _ int) int64 { return math.MaxInt64 - r.Int64N(1<<40) }, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var h Histogram
			vals := make([]int64, tt.n)
			for i := range vals {
				vals[i] = tt.gen(r, i)
				h.Record(vals[i])
			}
			slices.Sort(vals)
			if got := h.Count(); got != uint64(tt.n) {
				t.Fatalf("Count() = %d, want %d", got, tt.n)
			}
			if h.Min() != vals[0] || h.Max() != vals[len(vals)-1] {
				t.Errorf("Min, Max = %d, %d, want %d, %d", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
			}
			for _, q := range quantiles {
				want := exact(vals, q)
				got := h.Quantile(q)
				if relErr(got, want) > maxRelErr {
					t.Errorf("Quantile(%v) = %d, want %d within %.1f%% (off by %.2f%%)",
						q, got, want, 100*maxRelErr, 100*relErr(got, want))
				}
			}
		})
	}
}

func relErr(got, want int64) float64 {
	if want == 0 {
		return math.Abs(float64(got))
	}
	return math.Abs(float64(got)-float64(want)) / float64(want)
}

func TestEveryBucketBoundsItsValues(t *testing.T) {
	values := []int64{0, 1, 63, 64, 65, 127, 128, 1000, 2047, 2048, 2049, 4095, 4096, 1 << 20, 1<<20 + 1, 1<<40 - 1, math.MaxInt64}
	for _, v := range values {
		lo, w := bounds(index(v))
		if v < lo || v-lo >= w {
			t.Errorf("value %d: bucket %d is [%d, %d+%d)", v, index(v), lo, lo, w)
		}
		if lo >= 2*sub && float64(w)/float64(lo) > 1.0/sub {
			t.Errorf("value %d: bucket width %d is more than 1/%d of %d", v, w, sub, lo)
		}
	}
	if got := index(math.MaxInt64); got != numBuckets-1 {
		t.Errorf("index(MaxInt64) = %d, want the last bucket %d", got, numBuckets-1)
	}
}

func TestMergeEqualsRecordingEverything(t *testing.T) {
	tests := []struct {
		name  string
		parts int
	}{
		{"two halves", 2},
		{"many workers", 64},
		{"one part", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			var whole Histogram
			parts := make([]Histogram, tt.parts)
			for i := range 100_000 {
				v := int64(r.ExpFloat64() * 30_000)
				whole.Record(v)
				parts[i%tt.parts].Record(v)
			}
			var merged Histogram
			var empty Histogram
			merged.Merge(&empty)
			for i := range parts {
				merged.Merge(&parts[i])
			}
			merged.Merge(&empty)
			if merged.counts != whole.counts || merged.Count() != whole.Count() ||
				merged.Min() != whole.Min() || merged.Max() != whole.Max() {
				t.Fatalf("merged histogram differs from the one that recorded everything")
			}
			if math.Abs(merged.Mean()-whole.Mean()) > 1e-6*whole.Mean() {
				t.Errorf("Mean() = %v, want %v", merged.Mean(), whole.Mean())
			}
		})
	}
}

func TestEmptyAndEdgeQuantiles(t *testing.T) {
	h := new(Histogram)
	if h.Quantile(0.5) != 0 || h.Mean() != 0 || h.Count() != 0 {
		t.Fatalf("empty histogram: Quantile(0.5)=%d Mean=%v Count=%d, want zeros", h.Quantile(0.5), h.Mean(), h.Count())
	}
	h.Record(-5) // counts as 0
	h.Record(1000)
	h.Record(2000)
	tests := []struct {
		name string
		q    float64
		want int64
	}{
		{"q=0 is the minimum", 0, 0},
		{"q=1 is the maximum", 1, 2000},
		{"q above 1 is the maximum", 2, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.Quantile(tt.q); got != tt.want {
				t.Errorf("Quantile(%v) = %d, want %d", tt.q, got, tt.want)
			}
		})
	}
	h.Reset()
	if h.Count() != 0 || h.Max() != 0 {
		t.Errorf("after Reset: Count=%d Max=%d, want 0", h.Count(), h.Max())
	}
}

// TestThreeSignificantDigits checks HdrHistogram's precision: below 2048
// every value has a bucket of its own, and above it two values that differ
// by more than 1/1024 of the smaller never share a bucket.
func TestThreeSignificantDigits(t *testing.T) {
	for v := int64(0); v < 2*sub; v++ {
		if lo, w := bounds(index(v)); lo != v || w != 1 {
			t.Fatalf("value %d: bucket [%d, %d+%d), want exactly [%d, %d]", v, lo, lo, w, v, v+1)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 100_000 {
		a := 2048 + r.Int64N(1<<50)
		b := a + a/1024 + 1
		if index(a) == index(b) {
			t.Fatalf("%d and %d (%.4f%% apart) share bucket %d", a, b, 100*float64(b-a)/float64(a), index(a))
		}
	}
}

func TestCountAtOrAbove(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	var h Histogram
	vals := make([]int64, 50_000)
	for i := range vals {
		vals[i] = int64(math.Pow(10, 2+6*r.Float64()))
		h.Record(vals[i])
	}
	slices.Sort(vals)
	for _, v := range []int64{0, 1, 100, 1000, 2047, 2048, 99_999, 100_000, 5_000_000, vals[len(vals)-1], vals[len(vals)-1] + 1, math.MaxInt64} {
		i, _ := slices.BinarySearch(vals, v)
		want := uint64(len(vals) - i)
		got := h.CountAtOrAbove(v)
		// Values in v's own bucket may fall on either side: at most
		// those the bucket holds.
		lo, w := bounds(index(v))
		j, _ := slices.BinarySearch(vals, lo)
		k, _ := slices.BinarySearch(vals, lo+w)
		slack := uint64(k - j)
		if got+slack < want || got > want+slack {
			t.Errorf("CountAtOrAbove(%d) = %d, want %d (within the %d values of its bucket)", v, got, want, slack)
		}
	}
	var empty Histogram
	if got := empty.CountAtOrAbove(0); got != 0 {
		t.Errorf("empty: CountAtOrAbove(0) = %d, want 0", got)
	}
}

// TestResetClearsEverything checks that Reset, which clears only the range
// of buckets in use, leaves h equal to a new Histogram.
func TestResetClearsEverything(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	h := new(Histogram)
	for round := range 5 {
		for range 1000 {
			h.Record(r.Int64N(1 << (10 + 10*round)))
		}
		h.Reset()
		if *h != (Histogram{}) {
			t.Fatalf("round %d: Reset left counts or totals behind", round)
		}
	}
}

func TestRecordDoesNotAllocate(t *testing.T) {
	var h Histogram
	allocs := testing.AllocsPerRun(1000, func() { h.Record(12345) })
	if allocs != 0 {
		t.Errorf("Record allocates %v times per call, want 0", allocs)
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	v := int64(1)
	for b.Loop() {
		h.Record(v)
		v = v*31 + 7
		if v < 0 {
			v = 1
		}
	}
}
