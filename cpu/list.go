package cpu

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// MaxCPU is the largest CPU number this package accepts. Linux kernels are
// built for at most 8192 CPUs today; anything above MaxCPU is treated as
// malformed input rather than allocated for.
const MaxCPU = 1 << 16

// ParseList parses the kernel's CPU-list format, as found in
// /sys/devices/system/cpu/online and accepted by taskset -c: comma-separated
// elements, each a CPU ("8"), an inclusive range ("0-3"), or a range with a
// stride ("0-15:2/4", the first 2 of every 4 CPUs). Surrounding whitespace
// (such as the trailing newline of a sysfs file) is ignored, and an empty
// list yields no CPUs. The result is sorted.
//
// A CPU named twice ("0,0", or "0-3,2" whose ranges overlap) is an error:
// a list names each CPU once, and percore starts one loop per CPU (its
// Config.Cores refuses a CPU twice by the same rule), so a repeated CPU is
// a mistake to report, not a second loop to drop without a word
// (docs/decisions/0030-api-from-the-trial.md). The kernel itself merges
// such a list; no list it writes (sysfs, /proc) repeats a CPU.
//
// Malformed input (an empty element, "3-1", "a", "-1", "1-", a CPU above
// [MaxCPU], a CPU named twice) gives an error naming the list, the element
// and what is wrong, for example
// `cpu: bad cpu list "0-3,x": element 2 "x": not a number` or
// `cpu: bad cpu list "0,0": element 2 "0": cpu 0 is listed twice`.
func ParseList(s string) ([]int, error) {
	list := strings.TrimSpace(s)
	if list == "" {
		return nil, nil
	}
	var set bitset
	for i, elem := range strings.Split(list, ",") {
		if err := set.addElement(strings.TrimSpace(elem)); err != nil {
			return nil, fmt.Errorf("cpu: bad cpu list %q: element %d %q: %s", s, i+1, elem, err)
		}
	}
	return set.cpus(), nil
}

// FormatList formats cpus in the kernel's CPU-list format, compressing runs
// of two or more consecutive CPUs into ranges: {0,1,2,3,8,10,11} gives
// "0-3,8,10-11". The input need not be sorted and may hold duplicates;
// negative numbers and numbers above [MaxCPU] are left out. An empty set
// gives "".
func FormatList(cpus []int) string {
	sorted := slices.Clone(cpus)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var b strings.Builder
	for i := 0; i < len(sorted); {
		lo := sorted[i]
		j := i + 1
		for j < len(sorted) && sorted[j] == sorted[j-1]+1 {
			j++
		}
		hi := sorted[j-1]
		i = j
		lo, hi = max(lo, 0), min(hi, MaxCPU)
		if lo > hi {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(lo))
		if hi > lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(hi))
		}
	}
	return b.String()
}

// bitset is a growable set of CPU numbers in 0..MaxCPU; it bounds the work
// of parsing a list of overlapping ranges by the largest CPU, not the input.
type bitset []uint64

// addRange adds lo..hi (inclusive, 0 <= lo <= hi) a word at a time. It
// returns the first CPU of the range that was in the set already, or -1.
func (s *bitset) addRange(lo, hi int) (dup int) {
	if last := hi / 64; last >= len(*s) {
		*s = append(*s, make([]uint64, last+1-len(*s))...)
	}
	dup = -1
	for w := lo / 64; w <= hi/64; w++ {
		mask := ^uint64(0)
		if w == lo/64 {
			mask &= ^uint64(0) << (lo % 64)
		}
		if w == hi/64 {
			mask &= ^uint64(0) >> (63 - hi%64)
		}
		if both := (*s)[w] & mask; both != 0 && dup < 0 {
			dup = w*64 + bits.TrailingZeros64(both)
		}
		(*s)[w] |= mask
	}
	return dup
}

func (s bitset) cpus() []int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	cpus := make([]int, 0, n)
	for i, w := range s {
		for w != 0 {
			cpus = append(cpus, i*64+bits.TrailingZeros64(w))
			w &= w - 1
		}
	}
	return cpus
}

// addElement adds one list element, "N", "N-M" or "N-M:used/group", and
// returns what is wrong with it otherwise.
func (s *bitset) addElement(elem string) error {
	if elem == "" {
		return errors.New("empty element")
	}
	span, stride, hasStride := strings.Cut(elem, ":")
	var lo, hi int
	if loStr, hiStr, isRange := strings.Cut(span, "-"); isRange {
		var err error
		if lo, err = parseBound(loStr, "range start"); err != nil {
			return err
		}
		if hi, err = parseBound(hiStr, "range end"); err != nil {
			return err
		}
		if lo > hi {
			return fmt.Errorf("range start %d is above its end %d", lo, hi)
		}
	} else {
		var err error
		if lo, err = parseDecimal(span); err != nil {
			return err
		}
		hi = lo
	}
	used, group := hi-lo+1, hi-lo+1 // no stride: one group, all used
	if hasStride {
		var err error
		if used, group, err = parseStride(stride); err != nil {
			return err
		}
	}
	for start := lo; start <= hi; start += group {
		if dup := s.addRange(start, min(start+used-1, hi)); dup >= 0 {
			return fmt.Errorf("cpu %d is listed twice", dup)
		}
	}
	return nil
}

// parseBound parses one end of a range; what names which.
func parseBound(s, what string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("missing %s", what)
	}
	n, err := parseDecimal(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", what, s, err)
	}
	return n, nil
}

// parseDecimal parses a non-empty run of decimal digits no greater than
// MaxCPU.
func parseDecimal(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a number")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxCPU {
		return 0, fmt.Errorf("above the largest cpu %d", MaxCPU)
	}
	return n, nil
}

// parseStride parses the "used/group" suffix of a strided range.
func parseStride(s string) (used, group int, err error) {
	usedStr, groupStr, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("stride %q is not used/group", s)
	}
	if used, err = parseDecimal(usedStr); err != nil {
		return 0, 0, fmt.Errorf("stride used %q: %w", usedStr, err)
	}
	if group, err = parseDecimal(groupStr); err != nil {
		return 0, 0, fmt.Errorf("stride group %q: %w", groupStr, err)
	}
	if used == 0 || group == 0 || used > group {
		return 0, 0, fmt.Errorf("stride %d/%d needs 0 < used <= group", used, group)
	}
	return used, group, nil
}
