package resp

import (
	"bytes"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// strs returns args as strings.
func strs(args [][]byte) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out
}

func TestParse(t *testing.T) {
	small := Limits{MaxArgs: 3, MaxBulk: 5, MaxInline: 10}
	tests := []struct {
		name string
		lim  Limits
		in   string
		want []string // nil: incomplete or empty
		n    int      // bytes taken; 0: incomplete
		err  string   // the ProtocolError's text; "": none
	}{
		{name: "array", in: "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", want: []string{"GET", "k"}, n: 20},
		{name: "array then more", in: "*1\r\n$4\r\nPING\r\n*1\r\n", want: []string{"PING"}, n: 14},
		{name: "bulk holding CRLF", in: "*2\r\n$4\r\nECHO\r\n$4\r\na\r\nb\r\n", want: []string{"ECHO", "a\r\nb"}, n: 24},
		{name: "empty bulk", in: "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", want: []string{"ECHO", ""}, n: 20},
		{name: "inline", in: "SET k v\r\n", want: []string{"SET", "k", "v"}, n: 9},
		{name: "inline, LF only, spaces and tabs", in: "  GET \t k \n", want: []string{"GET", "k"}, n: 11},
		{name: "empty array is skipped", in: "*0\r\n", n: 4},
		{name: "null array is skipped", in: "*-1\r\n", n: 5},
		{name: "blank inline is skipped", in: "\r\n", n: 2},
		{name: "incomplete count", in: "*2", n: 0},
		{name: "incomplete count, CR", in: "*2\r", n: 0},
		{name: "incomplete bulk header", in: "*2\r\n$3\r\nGET\r\n$1", n: 0},
		{name: "incomplete bulk", in: "*2\r\n$3\r\nGET\r\n$1\r\nk", n: 0},
		{name: "incomplete bulk end", in: "*2\r\n$3\r\nGET\r\n$1\r\nk\r", n: 0},
		{name: "incomplete inline", in: "GET k", n: 0},
		{name: "count not a number", in: "*x\r\n", err: "invalid multibulk length"},
		{name: "count without digits", in: "*\r\n", err: "invalid multibulk length"},
		{name: "count too many digits", in: "*1234567890123456789", err: "invalid multibulk length"},
		{name: "count over the limit", lim: small, in: "*4\r\n", err: "invalid multibulk length"},
		{name: "count CR without LF", in: "*1\rx", err: "invalid multibulk length"},
		{name: "nested array", in: "*1\r\n*1\r\n$1\r\na\r\n", err: "expected '$', got '*'"},
		{name: "not a bulk", in: "*1\r\n:1\r\n", err: "expected '$', got ':'"},
		{name: "bulk length negative", in: "*1\r\n$-1\r\n", err: "invalid bulk length"},
		{name: "bulk length over the limit", lim: small, in: "*1\r\n$6\r\n", err: "invalid bulk length"},
		{name: "bulk length exactly the limit", lim: small, in: "*1\r\n$5\r\nabcde\r\n", want: []string{"abcde"}, n: 15},
		{name: "bulk without its CRLF", in: "*1\r\n$1\r\nab\r\n", err: "expected '\\r\\n' after a bulk string"},
		{name: "inline over the limit", lim: small, in: "GET 12345678", err: "too big inline request"},
		{name: "inline exactly the limit", lim: small, in: "GET 123456\n", want: []string{"GET", "123456"}, n: 11},
		{name: "inline with too many words", lim: small, in: "a b c d\n", err: "invalid multibulk length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, n, err := Parse(nil, []byte(tt.in), tt.lim)
			if tt.err != "" {
				var pe *ProtocolError
				if !errors.As(err, &pe) || !errors.Is(err, ErrProtocol) || pe.Reason != tt.err {
					t.Fatalf("error %v, want a ProtocolError %q", err, tt.err)
				}
				if want := "Protocol error: " + tt.err; err.Error() != want {
					t.Fatalf("Error() = %q, want %q", err.Error(), want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.n || !slices.Equal(strs(args), tt.want) && !(len(args) == 0 && tt.want == nil) {
				t.Fatalf("Parse = %q, %d; want %q, %d", strs(args), n, tt.want, tt.n)
			}
			// The split function agrees: the whole command is the token,
			// and Args reads the same arguments from it.
			adv, tok, err := ScanCommand(tt.lim)([]byte(tt.in), false)
			if err != nil || adv != tt.n {
				t.Fatalf("ScanCommand = %d, %q, %v; want advance %d", adv, tok, err, tt.n)
			}
			if len(tt.want) == 0 {
				if tok != nil {
					t.Fatalf("token %q for an empty or incomplete command", tok)
				}
				return
			}
			if string(tok) != tt.in[:tt.n] {
				t.Fatalf("token %q, want %q", tok, tt.in[:tt.n])
			}
			if got := strs(Args(nil, tok)); !slices.Equal(got, tt.want) {
				t.Fatalf("Args = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestParseReusesArgs: arguments are appended to dst, and an incomplete
// command leaves dst as it was.
func TestParseReusesArgs(t *testing.T) {
	dst := make([][]byte, 0, 4)
	dst = append(dst, []byte("keep"))
	args, n, err := Parse(dst, []byte("*2\r\n$3\r\nGET\r\n$1"), Limits{})
	if n != 0 || err != nil || len(args) != 1 || string(args[0]) != "keep" {
		t.Fatalf("incomplete: %q, %d, %v", strs(args), n, err)
	}
	full := []byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
	allocs := testing.AllocsPerRun(100, func() {
		dst, _, _ = Parse(dst[:0], full, Limits{})
		dst = Args(dst[:0], full)
	})
	if allocs != 0 {
		t.Fatalf("Parse and Args allocate %v times with room in dst", allocs)
	}
}

func TestReplies(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"simple", AppendSimple(nil, "OK"), "+OK\r\n"},
		{"error", AppendError(nil, "ERR bad\r\nthing"), "-ERR bad  thing\r\n"},
		{"int", AppendInt(nil, -42), ":-42\r\n"},
		{"bulk", AppendBulk(nil, []byte("a\r\nb")), "$4\r\na\r\nb\r\n"},
		{"empty bulk", AppendBulkString(nil, ""), "$0\r\n\r\n"},
		{"null", AppendNull(nil), "$-1\r\n"},
		{"array", AppendArray(nil, 2), "*2\r\n"},
		{"command", AppendCommand(nil, "SET", "k", "v"), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	for _, n := range []int{0, 9, 10, 99, 100, 12345} {
		if got, want := BulkLen(n), len(AppendBulk(nil, make([]byte, n))); got != want {
			t.Errorf("BulkLen(%d) = %d, want %d", n, got, want)
		}
	}
	if got := len(AppendInt(nil, -1<<63)); got > MaxIntLen {
		t.Errorf("the longest integer reply is %d bytes, MaxIntLen %d", got, MaxIntLen)
	}
	if !strings.HasPrefix(string(AppendInt(nil, 1<<62)), ":") {
		t.Error("AppendInt")
	}
}

var (
	number       = regexp.MustCompile(`^-?[0-9]{1,18}$`)
	numberPrefix = regexp.MustCompile(`^-?[0-9]{0,18}$`)
)

// refHeader judges the header line at the start of p ("*12\r\n") by its
// text: the number, the length of the line, and whether it is complete,
// unfinished or malformed.
func refHeader(p []byte) (int64, int, int) {
	i := bytes.Index(p, []byte("\r\n"))
	if i < 0 {
		text := string(p[1:])
		if t, ok := strings.CutSuffix(text, "\r"); ok {
			if number.MatchString(t) {
				return 0, 0, incomplete
			}
			return 0, 0, malformed
		}
		if numberPrefix.MatchString(text) {
			return 0, 0, incomplete
		}
		return 0, 0, malformed
	}
	text := string(p[1:i])
	if !number.MatchString(text) {
		return 0, 0, malformed
	}
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, 0, malformed
	}
	return v, i + 2, complete
}
