package cpu

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

func TestParseList(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []int
	}{
		{"single cpu", "0", []int{0}},
		{"ranges and singles", "0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}},
		{"sysfs trailing newline", "0-1\n", []int{0, 1}},
		{"surrounding whitespace", " \t2,4 \n", []int{2, 4}},
		{"space after comma", "1, 3", []int{1, 3}},
		{"empty list", "", nil},
		{"empty sysfs file", "\n", nil},
		{"unsorted", "3,1,2", []int{1, 2, 3}},
		{"adjacent ranges", "0-3,4-5", []int{0, 1, 2, 3, 4, 5}},
		{"interleaved strides", "0-7:1/2,1-7:1/2", []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"one-cpu range", "7-7", []int{7}},
		{"leading zeros", "007", []int{7}},
		{"largest cpu", "65536", []int{MaxCPU}},
		{"strided range", "0-7:2/4", []int{0, 1, 4, 5}},
		{"stride of one in three", "1-9:1/3", []int{1, 4, 7}},
		{"stride on a single cpu", "5:1/2", []int{5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseList(tt.in)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("ParseList(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseListMalformed(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"not a number", "0-3,x", `cpu: bad cpu list "0-3,x": element 2 "x": not a number`},
		{"letters", "a", `cpu: bad cpu list "a": element 1 "a": not a number`},
		{"empty element", "1,,2", `cpu: bad cpu list "1,,2": element 2 "": empty element`},
		{"only a comma", ",", `cpu: bad cpu list ",": element 1 "": empty element`},
		{"trailing comma", "1,", `cpu: bad cpu list "1,": element 2 "": empty element`},
		{"reversed range", "3-1", `cpu: bad cpu list "3-1": element 1 "3-1": range start 3 is above its end 1`},
		{"negative", "-1", `cpu: bad cpu list "-1": element 1 "-1": missing range start`},
		{"open range", "1-", `cpu: bad cpu list "1-": element 1 "1-": missing range end`},
		{"bad range end", "1-x", `cpu: bad cpu list "1-x": element 1 "1-x": range end "x": not a number`},
		{"two dashes", "1-2-3", `cpu: bad cpu list "1-2-3": element 1 "1-2-3": range end "2-3": not a number`},
		{"plus sign", "+1", `cpu: bad cpu list "+1": element 1 "+1": not a number`},
		{"hex", "0x1", `cpu: bad cpu list "0x1": element 1 "0x1": not a number`},
		{"inner space", "1 2", `cpu: bad cpu list "1 2": element 1 "1 2": not a number`},
		{"above MaxCPU", "65537", `cpu: bad cpu list "65537": element 1 "65537": above the largest cpu 65536`},
		{"overflows int", "0-99999999999999999999999", `cpu: bad cpu list "0-99999999999999999999999": element 1 "0-99999999999999999999999": range end "99999999999999999999999": above the largest cpu 65536`},
		{"stride without group", "0-7:2", `cpu: bad cpu list "0-7:2": element 1 "0-7:2": stride "2" is not used/group`},
		{"stride used above group", "0-7:5/4", `cpu: bad cpu list "0-7:5/4": element 1 "0-7:5/4": stride 5/4 needs 0 < used <= group`},
		{"stride group zero", "0-7:0/0", `cpu: bad cpu list "0-7:0/0": element 1 "0-7:0/0": stride 0/0 needs 0 < used <= group`},
		{"cpu twice", "0,0", `cpu: bad cpu list "0,0": element 2 "0": cpu 0 is listed twice`},
		{"unsorted with duplicates", "3,1,2,1", `cpu: bad cpu list "3,1,2,1": element 4 "1": cpu 1 is listed twice`},
		{"overlapping ranges", "0-3,2-5", `cpu: bad cpu list "0-3,2-5": element 2 "2-5": cpu 2 is listed twice`},
		{"cpu inside a range", "0-3,2", `cpu: bad cpu list "0-3,2": element 2 "2": cpu 2 is listed twice`},
		{"overlapping strides", "0-7:2/4,1-7:2/4", `cpu: bad cpu list "0-7:2/4,1-7:2/4": element 2 "1-7:2/4": cpu 1 is listed twice`},
		{"twice past the first word", "100,64-127", `cpu: bad cpu list "100,64-127": element 2 "64-127": cpu 100 is listed twice`},
		{"stride not a number", "0-7:a/4", `cpu: bad cpu list "0-7:a/4": element 1 "0-7:a/4": stride used "a": not a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseList(tt.in)
			if err == nil {
				t.Fatalf("ParseList(%q) = %v, want error %q", tt.in, got, tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("ParseList(%q) error = %q, want %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

func TestFormatList(t *testing.T) {
	tests := []struct {
		name string
		in   []int
		want string
	}{
		{"empty", nil, ""},
		{"single", []int{0}, "0"},
		{"runs and singles", []int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"},
		{"run of two", []int{10, 11}, "10-11"},
		{"unsorted with duplicates", []int{3, 1, 2, 2, 9}, "1-3,9"},
		{"negative left out", []int{-2, -1, 0, 1}, "0-1"},
		{"above MaxCPU left out", []int{MaxCPU, MaxCPU + 1}, "65536"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			if got := FormatList(tt.in); got != tt.want {
				t.Errorf("FormatList(%v) = %q, want %q", tt.in, got, tt.want)
			}
			if !slices.Equal(in, tt.in) {
				t.Errorf("FormatList modified its input: %v, was %v", tt.in, in)
			}
		})
	}
}

// cpuSet decodes fuzz bytes into a CPU set: each pair of bytes is one CPU.
func cpuSet(data []byte) []int {
	var cpus []int
	for len(data) >= 2 {
		cpus = append(cpus, int(binary.LittleEndian.Uint16(data)))
		data = data[2:]
	}
	return cpus
}

func sortedSet(cpus []int) []int {
	s := slices.Clone(cpus)
	slices.Sort(s)
	return slices.Compact(s)
}

func FuzzListRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 0, 1, 0, 2, 0, 3, 0, 8, 0, 10, 0, 11, 0})
	f.Add([]byte{255, 255, 0, 4, 1, 4, 0, 0})
	f.Add([]byte("0-3,8,10-11\n"))
	f.Add([]byte("0-15:2/4,100"))
	f.Fuzz(func(t *testing.T, data []byte) {
		want := sortedSet(cpuSet(data))
		text := FormatList(want)
		got, err := ParseList(text)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("ParseList(FormatList(%v)) = ParseList(%q) = %v, %v", want, text, got, err)
		}
		// Whatever ParseList accepts must survive the round trip too. Its
		// cost grows with the span of each strided element, so long inputs
		// (thousands of whole-machine strides) only slow the engine down.
		if len(data) > 4096 {
			return
		}
		parsed, err := ParseList(string(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "cpu: bad cpu list ") {
				t.Fatalf("ParseList(%q) error %q lacks its prefix", data, err)
			}
			return
		}
		if again, err := ParseList(FormatList(parsed)); err != nil || !slices.Equal(again, parsed) {
			t.Fatalf("ParseList(%q) = %v, but its round trip gives %v, %v", data, parsed, again, err)
		}
	})
}
