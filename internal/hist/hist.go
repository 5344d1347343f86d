// Package hist is a log-linear histogram of non-negative integer values
// (latencies in nanoseconds, in practice) with HdrHistogram's precision of
// three significant decimal digits.
//
// Values below 2048 are counted exactly. Above that, every power of two is
// split into 1024 equal sub-buckets, so a bucket is never wider than 1/1024
// of its lower bound (HdrHistogram's layout for numberOfSignificantValueDigits
// = 3: its sub-bucket count is the power of two at or above 2*10^3). A
// quantile is reported as its bucket's midpoint, which is within 1/2048
// (0.05%) of the true value, and never outside [Min, Max]. Min, Max and Mean
// are exact. Every non-negative int64 has a bucket: nothing saturates.
//
// A Histogram is 432 KiB, most of it never touched: Reset, Merge and
// Quantile visit only the buckets between Min's and Max's, so their cost
// follows the range of the values recorded, not the size of the array, and
// the pages of untouched buckets stay unmapped in a fresh allocation.
//
// A Histogram is not safe for concurrent use: give each worker its own and
// Merge them when the workers are done. Record allocates nothing.
package hist

import (
	"math"
	"math/bits"
)

// subBits is log2 of the number of sub-buckets per power of two: 10 gives
// 1024, three significant digits.
const subBits = 10

// sub is the number of sub-buckets per power of two.
const sub = 1 << subBits

// numBuckets covers every non-negative int64: the largest value has
// bits.Len64 = 63, so its exponent is 63-(subBits+1) and its mantissa < 2*sub.
const numBuckets = (63-(subBits+1))*sub + 2*sub

// Histogram counts values in log-linear buckets. The zero value is empty and
// ready to use. Allocate it once per worker (it is 432 KiB).
type Histogram struct {
	counts [numBuckets]uint64
	n      uint64
	sum    float64
	min    int64
	max    int64
}

// index returns the bucket of v (v >= 0).
func index(v int64) int {
	u := uint64(v)
	e := bits.Len64(u) - (subBits + 1)
	if e <= 0 {
		return int(u) // exact below 2*sub
	}
	return e*sub + int(u>>uint(e))
}

// bounds returns the smallest value of bucket i and the bucket's width.
func bounds(i int) (lo, width int64) {
	if i < 2*sub {
		return int64(i), 1
	}
	e := i/sub - 1
	m := int64(i - e*sub)
	return m << uint(e), 1 << uint(e)
}

// Record counts one value. Negative values count as 0.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[index(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

// used returns the range of buckets that may hold counts: from Min's to
// Max's, or an empty range when h is empty.
func (h *Histogram) used() (from, to int) {
	if h.n == 0 {
		return 0, 0
	}
	return index(h.min), index(h.max) + 1
}

// Merge adds every value counted by o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	from, to := o.used()
	for i := from; i < to; i++ {
		h.counts[i] += o.counts[i]
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Reset empties h. It clears only the buckets between Min's and Max's.
func (h *Histogram) Reset() {
	from, to := h.used()
	clear(h.counts[from:to])
	h.n, h.sum, h.min, h.max = 0, 0, 0, 0
}

// Count returns how many values were recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Min returns the smallest value recorded, exactly, or 0 when h is empty.
func (h *Histogram) Min() int64 { return h.min }

// Max returns the largest value recorded, exactly, or 0 when h is empty.
func (h *Histogram) Max() int64 { return h.max }

// Mean returns the mean of the values recorded (exact up to float64
// rounding), or 0 when h is empty.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile returns the value below or at which a fraction q (0..1) of the
// recorded values lie: the midpoint of the bucket holding the value of rank
// ceil(q*Count), clamped to [Min, Max]. It returns 0 when h is empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	from, to := h.used()
	for i := from; i < to; i++ {
		seen += h.counts[i]
		if seen >= rank {
			lo, w := bounds(i)
			v := lo + (w-1)/2
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// CountAtOrAbove returns how many recorded values are at or above v, to
// the histogram's precision: a value in v's own bucket counts when the
// bucket's midpoint is at or above v (exactly, below 2048).
func (h *Histogram) CountAtOrAbove(v int64) uint64 {
	if h.n == 0 || v > h.max {
		return 0
	}
	if v <= h.min {
		return h.n
	}
	var n uint64
	from, to := h.used()
	for i := to - 1; i >= from; i-- {
		lo, w := bounds(i)
		if lo+(w-1)/2 < v {
			break
		}
		n += h.counts[i]
	}
	return n
}
