package resp

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/percore/percore/runtime/frame"
)

func TestScanReply(t *testing.T) {
	flat := ReplyLimits{MaxDepth: 1, MaxBulk: 5, MaxElements: 3, MaxLine: 8}
	tests := []struct {
		name string
		lim  ReplyLimits
		in   string
		n    int    // the reply's length; 0: incomplete
		err  string // the ProtocolError's reason
	}{
		{name: "simple", in: "+OK\r\n+more", n: 5},
		{name: "error", in: "-ERR no\r\n", n: 9},
		{name: "integer", in: ":-42\r\n", n: 6},
		{name: "bulk", in: "$4\r\na\r\nb\r\n", n: 10},
		{name: "null bulk", in: "$-1\r\n", n: 5},
		{name: "null array", in: "*-1\r\n", n: 5},
		{name: "empty array", in: "*0\r\n", n: 4},
		{name: "nested", in: "*2\r\n:1\r\n*2\r\n$1\r\na\r\n*0\r\n+after\r\n", n: 23},
		{name: "flat array within the limits", lim: flat, in: "*3\r\n:1\r\n$5\r\nabcde\r\n+12345678\r\n", n: 30},
		{name: "incomplete line", in: "+OK\r", n: 0},
		{name: "incomplete array", in: "*2\r\n:1\r\n", n: 0},
		{name: "incomplete bulk", in: "$3\r\nab", n: 0},
		{name: "too deep", lim: flat, in: "*1\r\n*1\r\n:1\r\n", err: "arrays nested deeper than 1"},
		{name: "too many elements", lim: flat, in: "*4\r\n", err: "invalid multibulk length"},
		{name: "bulk too long", lim: flat, in: "$6\r\n", err: "invalid bulk length"},
		{name: "line too long", lim: flat, in: "+123456789", err: "too big reply line"},
		{name: "bad integer", in: ":1x\r\n", err: "invalid integer reply"},
		{name: "bad type", in: "?oops\r\n", err: "expected a reply type, got '?'"},
		{name: "resp3 null", in: "_\r\n", n: 3},
		{name: "resp3 null with text", in: "_x\r\n", err: "invalid null reply"},
		{name: "resp3 booleans", in: "*2\r\n#t\r\n#f\r\n", n: 12},
		{name: "resp3 bad boolean", in: "#x\r\n", err: "invalid boolean reply"},
		{name: "resp3 double and big number", in: "*2\r\n,3.14\r\n(12345678901234567890\r\n", n: 34},
		{name: "resp3 blob error", in: "!5\r\nERR x\r\n", n: 11},
		{name: "resp3 verbatim", in: "=7\r\ntxt:abc\r\n", n: 13},
		{name: "resp3 null blob error", in: "!-1\r\n", err: "invalid bulk length"},
		{name: "resp3 map", in: "%2\r\n+a\r\n:1\r\n+b\r\n_\r\n", n: 19},
		{name: "resp3 incomplete map", in: "%2\r\n+a\r\n:1\r\n+b\r\n", n: 0},
		{name: "resp3 set and push", in: "~1\r\n>2\r\n+m\r\n:1\r\n", n: 16},
		{name: "resp3 null map", in: "%-1\r\n", err: "invalid multibulk length"},
		{name: "resp3 attribute then its value", in: "|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n", n: 21},
		{name: "resp3 attribute without its value", in: "|1\r\n+ttl\r\n:3\r\n", n: 0},
		{name: "resp3 map over the element limit", lim: flat, in: "%4\r\n", err: "invalid multibulk length"},
		{name: "resp3 map too deep", lim: flat, in: "%1\r\n+k\r\n~1\r\n:1\r\n", err: "arrays nested deeper than 1"},
		{name: "line without CR", in: "+OK\n", err: "expected '\\r\\n' after a reply line"},
		{name: "bulk without CRLF", in: "$1\r\nab\r\n", err: "expected '\\r\\n' after a bulk string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			adv, tok, err := ScanReply(tt.lim)([]byte(tt.in), false)
			if tt.err != "" {
				var pe *ProtocolError
				if !errors.As(err, &pe) || pe.Reason != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || adv != tt.n || (tt.n > 0) != (tok != nil) || string(tok) != tt.in[:tt.n] {
				t.Fatalf("ScanReply = %d, %q, %v; want %d", adv, tok, err, tt.n)
			}
		})
	}
}

// refReply reads one reply the obvious way, recursively: its length, or 0
// when unfinished, or failed.
func refReply(p []byte, lim ReplyLimits, depth int) (n int, failed bool) {
	if len(p) == 0 {
		return 0, false
	}
	line := func() (string, int, bool) { // the header line's text, its length with CRLF, done
		i := bytes.Index(p, []byte("\r\n"))
		if i < 0 {
			return "", 0, false
		}
		return string(p[1:i]), i + 2, true
	}
	switch p[0] {
	case '+', '-', ',', '(', '_', '#':
		i := bytes.IndexByte(p, '\n')
		switch {
		case i < 0:
			return 0, len(p) >= 1+lim.MaxLine+2 || len(p) > 1+lim.MaxLine && p[1+lim.MaxLine] != '\r'
		case i > 1+lim.MaxLine+1:
			return 0, true
		case p[i-1] != '\r':
			return 0, true
		case p[0] == '_' && i != 2:
			return 0, true
		case p[0] == '#' && (i != 3 || p[1] != 't' && p[1] != 'f'):
			return 0, true
		}
		return i + 1, false
	case ':', '$', '*', '!', '=', '%', '~', '>', '|':
		text, n, done := line()
		if !done {
			_, _, st := refHeader(p)
			return 0, st == malformed
		}
		if !number.MatchString(text) {
			return 0, true
		}
		v, _ := strconv.ParseInt(text, 10, 64)
		switch p[0] {
		case ':':
			return n, false
		case '$', '!', '=':
			if v < -1 || v == -1 && p[0] != '$' || v > int64(lim.MaxBulk) {
				return 0, true
			}
			if v == -1 {
				return n, false
			}
			if len(p) < n+int(v)+2 {
				return 0, false
			}
			if string(p[n+int(v):n+int(v)+2]) != "\r\n" {
				return 0, true
			}
			return n + int(v) + 2, false
		}
		if v < -1 || v == -1 && p[0] != '*' || v > int64(lim.MaxElements) {
			return 0, true
		}
		if p[0] == '%' || p[0] == '|' {
			v *= 2
		}
		if v > 0 && depth+1 > lim.MaxDepth {
			return 0, true
		}
		for range max(v, 0) {
			k, failed := refReply(p[n:], lim, depth+1)
			if failed || k == 0 {
				return 0, failed
			}
			n += k
		}
		if p[0] == '|' { // then the value the attribute describes, at this depth
			k, failed := refReply(p[n:], lim, depth)
			if failed || k == 0 {
				return 0, failed
			}
			n += k
		}
		return n, false
	}
	return 0, true
}

func FuzzScanReply(f *testing.F) {
	f.Add([]byte("*2\r\n:1\r\n*2\r\n$1\r\na\r\n*0\r\n+after\r\n"), uint8(0), uint8(0), uint8(0))
	f.Add([]byte("*1\r\n*1\r\n*1\r\n:1\r\n"), uint8(2), uint8(0), uint8(0))
	f.Add([]byte("$-1\r\n*-1\r\n-ERR x\r\n"), uint8(0), uint8(3), uint8(4))
	f.Add([]byte("+"+strings.Repeat("x", 30)+"\r\n"), uint8(0), uint8(0), uint8(20))
	f.Add([]byte("|1\r\n+a\r\n%1\r\n#t\r\n~2\r\n_\r\n!3\r\nERR\r\n"), uint8(3), uint8(4), uint8(0))
	f.Add([]byte(">2\r\n=5\r\ntxt:a\r\n,1.5\r\n(1\r\n"), uint8(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, stream []byte, depth, elems, line uint8) {
		lim := ReplyLimits{MaxDepth: int(depth % 8), MaxElements: int(elems), MaxBulk: int(elems) * 4, MaxLine: int(line)}.withDefaults()
		want, wantFail := refReply(stream, lim, 0)
		n, err := scanReply(stream, &lim)
		if (err != nil) != wantFail || n != want {
			t.Fatalf("scanReply(%q) = %d, %v; the reference: %d, failed %v", stream, n, err, want, wantFail)
		}
		// A ReplyScanner shown the stream in pieces, as a splitter shows
		// it (each call's data the last one's and more), answers each
		// prefix as ScanReply does from the start.
		step := 1 + int(line)%7
		rs := NewReplyScanner(ReplyLimits{MaxDepth: int(depth % 8), MaxElements: int(elems), MaxBulk: int(elems) * 4, MaxLine: int(line)})
		for m := min(step, len(stream)); ; m = min(m+step, len(stream)) {
			wn, werr := scanReply(stream[:m], &lim)
			gn, _, gerr := rs.Scan(stream[:m], false)
			if gn != wn || (gerr != nil) != (werr != nil) {
				t.Fatalf("prefix %d of %q: ReplyScanner %d, %v; ScanReply %d, %v", m, stream, gn, gerr, wn, werr)
			}
			if wn > 0 || werr != nil || m == len(stream) {
				break
			}
		}
	})
}

// TestReplyScannerTrickleIsLinear (issue 24, a follow-up of 23.5): a reply
// of 20,000 small elements that arrives 7 bytes at a time, split by a
// frame.Splitter with a ReplyScanner, is walked once: the bytes the scanner
// examined are about the reply's length. ScanReply, which starts again
// from the reply's first byte at every read, walks it about 14,000 times.
func TestReplyScannerTrickleIsLinear(t *testing.T) {
	reply := AppendArray(nil, 20000)
	for i := range 20000 {
		if i%2 == 0 {
			reply = AppendInt(reply, int64(i))
		} else {
			reply = AppendBulkString(reply, "v")
		}
	}
	reply = append(reply, "+next\r\n"...)
	rs := NewReplyScanner(ReplyLimits{})
	sp := frame.Splitter{Scanner: rs, MaxBuffered: 1 << 20}
	var got [][]byte
	for i := 0; i < len(reply); i += 7 {
		if _, err := sp.Feed(reply[i:min(i+7, len(reply))], func(tok []byte) bool { got = append(got, bytes.Clone(tok)); return true }); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || len(got[0]) != len(reply)-7 || string(got[1]) != "+next\r\n" {
		t.Fatalf("got %d replies (the first of %d bytes), want the array of %d and +next", len(got), len(got[0]), len(reply)-7)
	}
	if scanned, limit := rs.Scanned(), int64(2*len(reply)); scanned > limit {
		t.Fatalf("the scanner examined %d bytes for a %d-byte reply: over %d, the scan is not linear", scanned, len(reply), limit)
	}
}
