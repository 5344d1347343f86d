package cpu

import (
	"slices"
	"strings"
	"testing"
)

func TestIRQMask(t *testing.T) {
	tests := []struct {
		cpu  int
		want string
	}{
		{0, "00000001"},
		{3, "00000008"},
		{31, "80000000"},
		{32, "00000001,00000000"},
		{35, "00000008,00000000"},
		{64, "00000001,00000000,00000000"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := IRQMask(tt.cpu); got != tt.want {
				t.Errorf("IRQMask(%d) = %q, want %q", tt.cpu, got, tt.want)
			}
			got, err := ParseIRQMask(tt.want)
			if err != nil || !slices.Equal(got, []int{tt.cpu}) {
				t.Errorf("ParseIRQMask(%q) = %v, %v; want [%d]", tt.want, got, err, tt.cpu)
			}
		})
	}
}

func TestIRQMaskSet(t *testing.T) {
	tests := []struct {
		name string
		cpus []int
		want string
	}{
		{"empty", nil, "00000000"},
		{"first four", []int{0, 1, 2, 3}, "0000000f"},
		{"ends of a word", []int{31, 0}, "80000001"},
		{"two words", []int{0, 32}, "00000001,00000001"},
		{"duplicates", []int{4, 4, 35}, "00000008,00000010"},
		{"negative left out", []int{-1, 1}, "00000002"},
		{"above MaxCPU left out", []int{MaxCPU + 1, 2}, "00000004"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IRQMaskSet(tt.cpus); got != tt.want {
				t.Errorf("IRQMaskSet(%v) = %q, want %q", tt.cpus, got, tt.want)
			}
		})
	}
}

func TestParseIRQMask(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []int
	}{
		{"kernel output on two cpus", "3\n", []int{0, 1}},
		{"kernel output on forty cpus", "ff,ffffffff", seq(0, 39)},
		{"upper case", "FF", seq(0, 7)},
		{"no cpus", "00000000", nil},
		{"high word only", "00000008,00000000", []int{35}},
		{"largest cpu", "1" + strings.Repeat(",00000000", MaxCPU/32), []int{MaxCPU}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseIRQMask(tt.in)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("ParseIRQMask(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseIRQMaskMalformed(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"empty", " \n", `cpu: bad irq mask " \n": empty`},
		{"empty word", "1,,2", `cpu: bad irq mask "1,,2": word 2 "": empty word`},
		{"not hex", "xyz", `cpu: bad irq mask "xyz": word 1 "xyz": not hex`},
		{"hex prefix", "0x1", `cpu: bad irq mask "0x1": word 1 "0x1": not hex`},
		{"nine digits", "123456789", `cpu: bad irq mask "123456789": word 1 "123456789": more than 8 hex digits`},
		{"above MaxCPU", "2" + strings.Repeat(",00000000", MaxCPU/32), `cpu: bad irq mask "2` + strings.Repeat(",00000000", MaxCPU/32) + `": cpu 65537 is above the largest cpu 65536`},
		{"too many words", strings.Repeat("0,", MaxCPU/32+1) + "0", `cpu: bad irq mask "` + strings.Repeat("0,", MaxCPU/32+1) + `0": 2050 words is more than cpu 65536 needs`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseIRQMask(tt.in)
			if err == nil {
				t.Fatalf("ParseIRQMask(%q) = %v, want error %q", tt.in, got, tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("ParseIRQMask(%q) error = %q, want %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func FuzzIRQMaskRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 31, 0, 32, 0, 64, 0})
	f.Add([]byte{255, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		want := sortedSet(cpuSet(data))
		mask := IRQMaskSet(want)
		got, err := ParseIRQMask(mask)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("ParseIRQMask(IRQMaskSet(%v)) = %v, %v", want, got, err)
		}
	})
}

func seq(lo, hi int) []int {
	var s []int
	for c := lo; c <= hi; c++ {
		s = append(s, c)
	}
	return s
}
