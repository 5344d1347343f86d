package http1_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/percore/percore/runtime/frame/http1"
)

// decoded is everything a RequestDecoder yields for a stream.
type decoded struct {
	reqs []got
	err  *http1.Error
	rest int // bytes not consumed at the end
}

type got struct {
	method, target string
	minor          int
	host           string
	headers        []string // "name: value"
	body           string
	trailers       []string
	close, expect  bool
	chunked        bool
}

// decodeAll feeds stream to a decoder in pieces of at most cut bytes (0:
// whole), keeping what Next did not consume as frame.View would, and
// returns what it found.
func decodeAll(t testing.TB, stream []byte, cut int, lim http1.Limits) decoded {
	t.Helper()
	d := &http1.RequestDecoder{Limits: lim}
	var out decoded
	var cur *got
	var held []byte
	for pos := 0; ; {
		end := len(stream)
		if cut > 0 {
			end = min(pos+cut, len(stream))
		}
		held = append(held, stream[pos:end]...)
		pos = end
		off := 0
		for {
			n, ev, piece, err := d.Next(held[off:])
			if n < 0 || off+n > len(held) {
				t.Fatalf("Next consumed %d of %d", n, len(held)-off)
			}
			off += n
			if err != nil {
				var he *http1.Error
				if !errors.As(err, &he) {
					t.Fatalf("error %v is not an *http1.Error", err)
				}
				out.err = he
				out.rest = len(held) - off
				return out
			}
			switch ev {
			case http1.Head:
				r := d.Request()
				out.reqs = append(out.reqs, got{method: string(r.Method), target: string(r.Target),
					minor: r.Minor, host: string(r.Host), close: r.Close, expect: r.Expect100, chunked: r.Chunked})
				cur = &out.reqs[len(out.reqs)-1]
				for _, h := range r.Header.All() {
					cur.headers = append(cur.headers, string(h.Name)+": "+string(h.Value))
				}
			case http1.Body:
				if len(piece) == 0 {
					t.Fatal("empty Body piece")
				}
				cur.body += string(piece)
			case http1.End:
				for _, h := range d.Request().Trailer.All() {
					cur.trailers = append(cur.trailers, string(h.Name)+": "+string(h.Value))
				}
				cur = nil
			}
			if ev == http1.NeedMore {
				break
			}
		}
		held = append(held[:0], held[off:]...)
		if pos == len(stream) {
			out.rest = len(held)
			return out
		}
	}
}

func TestRequestTable(t *testing.T) {
	const host = "Host: example.com\r\n"
	long := strings.Repeat("a", 9000)
	manyFields := strings.Repeat("X-A: b\r\n", 101)
	cases := []struct {
		name   string
		in     string
		status int // 0: accepted
		want   []got
		lim    http1.Limits
	}{
		{name: "simple GET", in: "GET /a?b=c HTTP/1.1\r\n" + host + "\r\n",
			want: []got{{method: "GET", target: "/a?b=c", minor: 1, host: "example.com", headers: []string{"Host: example.com"}}}},
		{name: "HTTP/1.0 closes", in: "GET / HTTP/1.0\r\n\r\n", want: []got{{method: "GET", target: "/", close: true}}},
		{name: "HTTP/1.0 keep-alive", in: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
			want: []got{{method: "GET", target: "/", headers: []string{"Connection: Keep-Alive"}}}},
		{name: "Connection close", in: "GET / HTTP/1.1\r\n" + host + "Connection: foo, close\r\n\r\n",
			want: []got{{method: "GET", target: "/", minor: 1, host: "example.com", close: true,
				headers: []string{"Host: example.com", "Connection: foo, close"}}}},
		{name: "OWS trimmed", in: "GET / HTTP/1.1\r\nHost:\t example.com \t\r\nX-Empty:\r\n\r\n",
			want: []got{{method: "GET", target: "/", minor: 1, host: "example.com", headers: []string{"Host: example.com", "X-Empty: "}}}},
		{name: "leading empty line skipped", in: "\r\nGET / HTTP/1.1\r\n" + host + "\r\n",
			want: []got{{method: "GET", target: "/", minor: 1, host: "example.com", headers: []string{"Host: example.com"}}}},
		{name: "content-length body", in: "POST /u HTTP/1.1\r\n" + host + "Content-Length: 5\r\n\r\nhello",
			want: []got{{method: "POST", target: "/u", minor: 1, host: "example.com", body: "hello",
				headers: []string{"Host: example.com", "Content-Length: 5"}}}},
		{name: "identical duplicate lengths", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
			want: []got{{method: "POST", target: "/", minor: 1, host: "example.com", body: "hi",
				headers: []string{"Host: example.com", "Content-Length: 2", "Content-Length: 2"}}}},
		{name: "chunked with extension and trailer",
			in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n, world!!!\r\n0\r\nX-Sum: 7\r\n\r\n",
			want: []got{{method: "POST", target: "/", minor: 1, host: "example.com", body: "hello, world!!!", chunked: true,
				headers: []string{"Host: example.com", "Transfer-Encoding: chunked"}, trailers: []string{"X-Sum: 7"}}}},
		{name: "expect 100-continue", in: "PUT / HTTP/1.1\r\n" + host + "Expect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
			want: []got{{method: "PUT", target: "/", minor: 1, host: "example.com", body: "x", expect: true,
				headers: []string{"Host: example.com", "Expect: 100-continue", "Content-Length: 1"}}}},
		{name: "pipelined", in: "GET /1 HTTP/1.1\r\n" + host + "\r\nPOST /2 HTTP/1.1\r\n" + host + "Content-Length: 1\r\n\r\nzGET /3 HTTP/1.1\r\n" + host + "\r\n",
			want: []got{
				{method: "GET", target: "/1", minor: 1, host: "example.com", headers: []string{"Host: example.com"}},
				{method: "POST", target: "/2", minor: 1, host: "example.com", body: "z", headers: []string{"Host: example.com", "Content-Length: 1"}},
				{method: "GET", target: "/3", minor: 1, host: "example.com", headers: []string{"Host: example.com"}},
			}},
		{name: "OPTIONS *", in: "OPTIONS * HTTP/1.1\r\n" + host + "\r\n",
			want: []got{{method: "OPTIONS", target: "*", minor: 1, host: "example.com", headers: []string{"Host: example.com"}}}},
		{name: "absolute form", in: "GET http://example.com/x HTTP/1.1\r\n" + host + "\r\n",
			want: []got{{method: "GET", target: "http://example.com/x", minor: 1, host: "example.com", headers: []string{"Host: example.com"}}}},

		// Smuggling defences (RFC 9112 sections 2.2, 5.1, 5.2, 6.1, 6.3).
		{name: "CL and TE", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 400},
		{name: "TE and CL", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", status: 400},
		{name: "differing lengths", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", status: 400},
		{name: "length list", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 3, 3\r\n\r\nabc", status: 400},
		{name: "signed length", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: +3\r\n\r\nabc", status: 400},
		{name: "hex length", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 0x3\r\n\r\nabc", status: 400},
		{name: "huge length", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 99999999999999999999\r\n\r\n", status: 400},
		{name: "bare LF in request line", in: "GET / HTTP/1.1\n" + host + "\r\n", status: 400},
		{name: "bare LF in field", in: "GET / HTTP/1.1\r\nHost: x\n\r\n", status: 400},
		{name: "bare LF ends head", in: "GET / HTTP/1.1\r\nHost: x\r\n\n", status: 400},
		{name: "bare CR in field", in: "GET / HTTP/1.1\r\nHost: x\rX-A: b\r\n\r\n", status: 400},
		{name: "obs-fold", in: "GET / HTTP/1.1\r\n" + host + "X-A: b\r\n c\r\n\r\n", status: 400},
		{name: "obs-fold tab", in: "GET / HTTP/1.1\r\n" + host + "X-A: b\r\n\tc\r\n\r\n", status: 400},
		{name: "space before colon", in: "GET / HTTP/1.1\r\n" + host + "Content-Length : 3\r\n\r\nabc", status: 400},
		{name: "TE obfuscated by space", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n", status: 400},
		{name: "NUL in value", in: "GET / HTTP/1.1\r\n" + host + "X-A: a\x00b\r\n\r\n", status: 400},
		{name: "unknown coding", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\n\r\n", status: 501},
		{name: "chunked not last", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked, gzip\r\n\r\n", status: 400},
		{name: "chunked twice", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
		{name: "TE in 1.0", in: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 400},
		{name: "TE xchunked", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: xchunked\r\n\r\n", status: 501},
		{name: "chunk size bare LF", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", status: 400},
		{name: "chunk data without CRLF", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n3\r\nhelloX\r\n0\r\n\r\n", status: 400},
		{name: "chunk size not hex", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", status: 400},
		{name: "chunk size overflow", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", status: 400},
		{name: "chunk size with space", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n5 z\r\nhello\r\n", status: 400},
		{name: "no Host", in: "GET / HTTP/1.1\r\n\r\n", status: 400},
		{name: "two Hosts", in: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", status: 400},
		{name: "bad Host", in: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", status: 400},
		{name: "HTTP/2.0", in: "GET / HTTP/2.0\r\n" + host + "\r\n", status: 505},
		{name: "lowercase version", in: "GET / http/1.1\r\n" + host + "\r\n", status: 400},
		{name: "two spaces", in: "GET  / HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "bad method", in: "G(T / HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "target not a path", in: "GET a HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "expect other", in: "GET / HTTP/1.1\r\n" + host + "Expect: tea\r\n\r\n", status: 417},
		{name: "no colon", in: "GET / HTTP/1.1\r\n" + host + "junk\r\n\r\n", status: 400},

		// Limits.
		{name: "request line too long", in: "GET /" + long + " HTTP/1.1\r\n" + host + "\r\n", status: 414},
		{name: "request line too long, partial", in: "GET /" + long, status: 414},
		{name: "head too large", in: "GET / HTTP/1.1\r\n" + host + strings.Repeat("X-Long: "+strings.Repeat("v", 1000)+"\r\n", 40) + "\r\n", status: 431},
		{name: "head too large, partial", in: "GET / HTTP/1.1\r\n" + host + strings.Repeat("X-Long: "+strings.Repeat("v", 1000)+"\r\n", 40), status: 431},
		{name: "too many fields", in: "GET / HTTP/1.1\r\n" + host + manyFields + "\r\n", status: 431},
		{name: "body too large by length", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 11\r\n\r\n", status: 413,
			lim: http1.Limits{MaxBody: 10}},
		{name: "body too large chunked", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\n", status: 413,
			lim: http1.Limits{MaxBody: 10}},
		{name: "trailers too many", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n0\r\n" + manyFields + "\r\n", status: 431},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, cut := range []int{0, 1, 7} {
				out := decodeAll(t, []byte(tc.in), cut, tc.lim)
				if tc.status != 0 {
					if out.err == nil || out.err.Status != tc.status {
						t.Fatalf("cut %d: got %v (requests %+v), want status %d", cut, out.err, out.reqs, tc.status)
					}
					continue
				}
				if out.err != nil {
					t.Fatalf("cut %d: %v", cut, out.err)
				}
				if out.rest != 0 {
					t.Errorf("cut %d: %d bytes left", cut, out.rest)
				}
				if fmt.Sprint(out.reqs) != fmt.Sprint(tc.want) {
					t.Errorf("cut %d:\n got %+v\nwant %+v", cut, out.reqs, tc.want)
				}
			}
		})
	}
}

// TestEverySplitPoint cuts a pipeline of requests of every kind at every
// point into two reads, and at every pair of points into three: the
// requests decoded are the same as from one read.
func TestEverySplitPoint(t *testing.T) {
	stream := []byte("GET /a HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n" +
		"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbody" +
		"POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: v\r\n\r\n" +
		"GET /d HTTP/1.0\r\n\r\n")
	want := decodeAll(t, stream, 0, http1.Limits{})
	if want.err != nil || len(want.reqs) != 4 {
		t.Fatalf("whole: %v, %d requests", want.err, len(want.reqs))
	}
	wantS := fmt.Sprint(want.reqs)
	split := func(cuts ...int) string {
		d := &http1.RequestDecoder{}
		var out decoded
		var cur *got
		var held []byte
		prev := 0
		for _, c := range append(cuts, len(stream)) {
			held = append(held, stream[prev:c]...)
			prev = c
			off := 0
			for {
				n, ev, piece, err := d.Next(held[off:])
				off += n
				if err != nil {
					t.Fatalf("cuts %v: %v", cuts, err)
				}
				if ev == http1.NeedMore {
					break
				}
				switch ev {
				case http1.Head:
					r := d.Request()
					out.reqs = append(out.reqs, got{method: string(r.Method), target: string(r.Target),
						minor: r.Minor, host: string(r.Host), close: r.Close, chunked: r.Chunked})
					cur = &out.reqs[len(out.reqs)-1]
					for _, h := range r.Header.All() {
						cur.headers = append(cur.headers, string(h.Name)+": "+string(h.Value))
					}
				case http1.Body:
					cur.body += string(piece)
				case http1.End:
					for _, h := range d.Request().Trailer.All() {
						cur.trailers = append(cur.trailers, string(h.Name)+": "+string(h.Value))
					}
				}
			}
			held = append(held[:0], held[off:]...)
		}
		if len(held) != 0 {
			t.Fatalf("cuts %v: %d bytes left", cuts, len(held))
		}
		return fmt.Sprint(out.reqs)
	}
	for i := 1; i < len(stream); i++ {
		if got := split(i); got != wantS {
			t.Fatalf("cut at %d:\n got %s\nwant %s", i, got, wantS)
		}
	}
	for i := 1; i < len(stream); i += 3 {
		for j := i + 1; j < len(stream); j += 5 {
			if got := split(i, j); got != wantS {
				t.Fatalf("cuts at %d, %d:\n got %s\nwant %s", i, j, got, wantS)
			}
		}
	}
}

// TestErrorIsSticky: after an error the decoder returns it again and
// consumes nothing.
func TestErrorIsSticky(t *testing.T) {
	d := &http1.RequestDecoder{}
	in := []byte("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
	_, _, _, err := d.Next(in)
	if err == nil {
		t.Fatal("no error")
	}
	n, ev, _, err2 := d.Next(in)
	if n != 0 || ev != http1.NeedMore || !errors.Is(err2, err) {
		t.Fatalf("second Next: %d %v %v", n, ev, err2)
	}
	d.Reset()
	if _, ev, _, err := d.Next(in[bytes.Index(in, []byte("\r\n\r\n"))+4:]); err != nil || ev != http1.Head {
		t.Fatalf("after Reset: %v %v", ev, err)
	}
}

func TestParseRequest(t *testing.T) {
	var r http1.Request
	ok, err := http1.ParseRequest([]byte("GET / HTTP/1.1\r\nHost: a\r\n"), &r, http1.Limits{})
	if ok || err != nil {
		t.Fatalf("partial: %v %v", ok, err)
	}
	in := []byte("GET /x HTTP/1.1\r\nhOsT: a\r\nX-Y: z\r\n\r\nrest")
	ok, err = http1.ParseRequest(in, &r, http1.Limits{})
	if !ok || err != nil {
		t.Fatalf("whole: %v %v", ok, err)
	}
	if r.HeadLen != len(in)-4 || string(r.Host) != "a" || string(r.Header.Get("x-y")) != "z" || !r.Header.Has("HOST") || r.Header.Get("nope") != nil {
		t.Fatalf("%+v", r)
	}
}

func TestHasToken(t *testing.T) {
	for _, tc := range []struct {
		v, tok string
		want   bool
	}{
		{"close", "close", true}, {"Keep-Alive, Close", "close", true}, {" upgrade ,close ", "close", true},
		{"closed", "close", false}, {"", "close", false}, {"x-close", "close", false},
	} {
		if got := http1.HasToken([]byte(tc.v), tc.tok); got != tc.want {
			t.Errorf("HasToken(%q, %q) = %v", tc.v, tc.tok, got)
		}
	}
}
