package cpu

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// irqWordBits is the width of one comma-separated word of an smp_affinity
// mask.
const irqWordBits = 32

// IRQMask returns the /proc/irq/N/smp_affinity mask that selects cpu alone:
// comma-separated 32-bit words of 8 lowercase hex digits, most significant
// word first. CPU 0 gives "00000001", 31 "80000000", 32
// "00000001,00000000". It is [IRQMaskSet] of the one CPU.
func IRQMask(cpu int) string {
	return IRQMaskSet([]int{cpu})
}

// IRQMaskSet returns the /proc/irq/N/smp_affinity mask selecting every CPU
// in cpus (their bits ORed), in the format of [IRQMask]. It has as many words
// as the largest CPU needs; negative numbers and numbers above [MaxCPU] are
// left out, and an empty set gives "00000000".
func IRQMaskSet(cpus []int) string {
	top := 0
	for _, c := range cpus {
		if c >= 0 && c <= MaxCPU {
			top = max(top, c)
		}
	}
	words := make([]uint32, top/irqWordBits+1)
	for _, c := range cpus {
		if c >= 0 && c <= MaxCPU {
			words[c/irqWordBits] |= 1 << (c % irqWordBits)
		}
	}
	var b strings.Builder
	b.Grow(len(words) * 9)
	for i := len(words) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "%08x", words[i])
		if i > 0 {
			b.WriteByte(',')
		}
	}
	return b.String()
}

// ParseIRQMask parses an smp_affinity mask into the CPUs it selects, sorted.
// It accepts what the kernel prints as well as what [IRQMaskSet] writes:
// comma-separated words of one to eight hex digits (either case), most
// significant first, with surrounding whitespace ignored ("3\n",
// "ff,ffffffff", "00000001,00000000").
func ParseIRQMask(s string) ([]int, error) {
	mask := strings.TrimSpace(s)
	if mask == "" {
		return nil, fmt.Errorf("cpu: bad irq mask %q: empty", s)
	}
	words := strings.Split(mask, ",")
	if len(words) > MaxCPU/irqWordBits+1 {
		return nil, fmt.Errorf("cpu: bad irq mask %q: %d words is more than cpu %d needs", s, len(words), MaxCPU)
	}
	var cpus []int
	for i := len(words) - 1; i >= 0; i-- {
		w, err := parseIRQWord(words[i])
		if err != nil {
			return nil, fmt.Errorf("cpu: bad irq mask %q: word %d %q: %w", s, i+1, words[i], err)
		}
		base := (len(words) - 1 - i) * irqWordBits
		for w != 0 {
			c := base + bits.TrailingZeros32(w)
			if c > MaxCPU {
				return nil, fmt.Errorf("cpu: bad irq mask %q: cpu %d is above the largest cpu %d", s, c, MaxCPU)
			}
			cpus = append(cpus, c)
			w &= w - 1
		}
	}
	return cpus, nil
}

// parseIRQWord parses one to eight hex digits.
func parseIRQWord(s string) (uint32, error) {
	switch {
	case s == "":
		return 0, errors.New("empty word")
	case len(s) > 8:
		return 0, errors.New("more than 8 hex digits")
	case strings.TrimLeft(s, "0123456789abcdefABCDEF") != "":
		return 0, errors.New("not hex")
	}
	w, err := strconv.ParseUint(s, 16, 32)
	return uint32(w), err
}
