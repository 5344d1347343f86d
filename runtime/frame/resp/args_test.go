package resp_test

import (
	"bytes"
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

// TestZeroAndNegativeLimits: a limit's zero value means its default and a
// negative one means no limit.
func TestZeroAndNegativeLimits(t *testing.T) {
	inline := append([]byte("SET k "), bytes.Repeat([]byte("v"), resp.DefaultMaxInline+10)...)
	inline = append(inline, "\r\n"...)
	line := append([]byte("+"), bytes.Repeat([]byte("x"), resp.DefaultMaxLine+10)...)
	line = append(line, "\r\n"...)
	for _, tc := range []struct {
		name    string
		lim     int
		wantErr bool
	}{
		{"zero: the default", 0, true},
		{"negative: none", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, n, err := resp.Parse(nil, inline, resp.Limits{MaxInline: tc.lim})
			if (err != nil) != tc.wantErr || (!tc.wantErr && (n != len(inline) || len(args) != 3)) {
				t.Fatalf("Parse with MaxInline %d: %d args, %d bytes, %v; want an error: %v", tc.lim, len(args), n, err, tc.wantErr)
			}
			adv, _, err := resp.ScanReply(resp.ReplyLimits{MaxLine: tc.lim})(line, false)
			if (err != nil) != tc.wantErr || (!tc.wantErr && adv != len(line)) {
				t.Fatalf("ScanReply with MaxLine %d: %d bytes, %v; want an error: %v", tc.lim, adv, err, tc.wantErr)
			}
		})
	}
	if resp.DefaultLimits.MaxBulk != resp.DefaultMaxBulk || resp.DefaultReplyLimits.MaxDepth != resp.DefaultMaxDepth {
		t.Fatalf("the defaults as data disagree with the constants: %+v %+v", resp.DefaultLimits, resp.DefaultReplyLimits)
	}
}
