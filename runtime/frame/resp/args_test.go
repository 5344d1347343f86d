package resp_test

import (
	"math"
	"testing"

	"github.com/percore/percore/runtime/frame/resp"
)

func TestEqualFold(t *testing.T) {
	cases := []struct {
		b, upper string
		want     bool
	}{
		{"NX", "NX", true},
		{"nx", "NX", true},
		{"Nx", "NX", true},
		{"keepttl", "KEEPTTL", true},
		{"N", "NX", false},
		{"NXX", "NX", false},
		{"", "", true},
		{"MX", "NX", false},
		{"\u212a", "K", false}, // the Kelvin sign folds to K in Unicode, not in Redis
		{"\x0e\x18", "NX", false},
	}
	for _, tc := range cases {
		if got := resp.EqualFold([]byte(tc.b), tc.upper); got != tc.want {
			t.Errorf("EqualFold(%q, %q) = %v, want %v", tc.b, tc.upper, got, tc.want)
		}
	}
}

// TestParseInt: integers as Redis's string2ll reads them (issue 31, item 9,
// found "-0" and "-05" taken for integers).
func TestParseInt(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"-7", -7, true},
		{"1234567890", 1234567890, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"-9223372036854775808", math.MinInt64, true},
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"-0", 0, false},
		{"007", 0, false},
		{"-05", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1.5", 0, false},
		{"1e3", 0, false},
		{"1a", 0, false},
		{"05", 0, false},
		{"123456789012345678901", 0, false},
	}
	for _, tc := range cases {
		got, ok := resp.ParseInt([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { resp.ParseInt([]byte("-1234567")) }); n != 0 {
		t.Errorf("ParseInt allocates %v times", n)
	}
}
