package http1_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/runtime/frame/http1"
)

type gotResp struct {
	status int
	body   string
	close  bool
}

// decodeResponses decodes stream in pieces of cut bytes; heads lists, per
// response, whether it answers a HEAD; eof says the stream ends there.
func decodeResponses(t *testing.T, stream []byte, cut int, heads []bool, eof bool) ([]gotResp, error) {
	t.Helper()
	d := &http1.ResponseDecoder{}
	var out []gotResp
	var held []byte
	next := 0
	expect := func() {
		if next < len(heads) {
			d.Expect(heads[next])
		}
	}
	expect()
	for pos := 0; pos < len(stream) || pos == 0; {
		end := len(stream)
		if cut > 0 {
			end = min(pos+cut, len(stream))
		}
		held = append(held, stream[pos:end]...)
		pos = end
		off := 0
		for {
			n, ev, piece, err := d.Next(held[off:])
			off += n
			if err != nil {
				return out, err
			}
			if ev == http1.NeedMore {
				break
			}
			switch ev {
			case http1.Head:
				r := d.Response()
				out = append(out, gotResp{status: r.Status, close: r.Close})
			case http1.Body:
				out[len(out)-1].body += string(piece)
			case http1.End:
				if !d.Response().Interim() {
					next++
					expect()
				}
			}
		}
		held = append(held[:0], held[off:]...)
		if len(stream) == 0 {
			break
		}
	}
	if eof {
		if err := d.EOF(); err != nil {
			return out, err
		}
	}
	return out, nil
}

func TestResponses(t *testing.T) {
	stream := "HTTP/1.1 100 Continue\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" +
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + // answers a HEAD
		"HTTP/1.1 204 No Content\r\n\r\n" +
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n" +
		"HTTP/1.1 200\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\n\r\n" +
		"HTTP/1.0 200 OK\r\n\r\nuntil the end"
	heads := []bool{false, true, false, false, false, false}
	want := []gotResp{{status: 100}, {status: 200, body: "hello"}, {status: 200}, {status: 204}, {status: 304},
		{status: 200, body: "abc"}, {status: 200, body: "until the end", close: true}}
	for _, cut := range []int{0, 1, 5} {
		out, err := decodeResponses(t, []byte(stream), cut, heads, true)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if len(out) != len(want) {
			t.Fatalf("cut %d: %+v", cut, out)
		}
		for i := range want {
			if out[i] != want[i] {
				t.Errorf("cut %d: response %d: %+v, want %+v", cut, i, out[i], want[i])
			}
		}
	}
}

func TestResponseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		eof      bool
		want     error // nil: any *http1.Error with 502
	}{
		{name: "not HTTP", in: "SSH-2.0-OpenSSH\r\n\r\n"},
		{name: "bad status", in: "HTTP/1.1 2x0 OK\r\n\r\n"},
		{name: "bare LF", in: "HTTP/1.1 200 OK\nContent-Length: 0\n\n"},
		{name: "bad length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"},
		{name: "differing lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"},
		{name: "obs-fold", in: "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n"},
		{name: "bad chunk", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nq\r\n"},
		{name: "cut body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", eof: true, want: io.ErrUnexpectedEOF},
		{name: "cut chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab", eof: true, want: io.ErrUnexpectedEOF},
		{name: "head too large", in: "HTTP/1.1 200 OK\r\n" + strings.Repeat("X: "+strings.Repeat("y", 1000)+"\r\n", 40)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeResponses(t, []byte(tc.in), 0, nil, tc.eof)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				return
			}
			var he *http1.Error
			if !errors.As(err, &he) || he.Status != 502 {
				t.Fatalf("got %v, want a 502 *http1.Error", err)
			}
		})
	}
}

// TestBothLengthAndChunkedResponse: Transfer-Encoding wins, and the
// connection is not reused (RFC 9112 6.3 rule 3).
func TestBothLengthAndChunkedResponse(t *testing.T) {
	out, err := decodeResponses(t, []byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nz\r\n0\r\n\r\n"), 0, nil, false)
	if err != nil || len(out) != 1 || out[0].body != "z" || !out[0].close {
		t.Fatalf("%+v %v", out, err)
	}
}

func TestAppendError(t *testing.T) {
	date := (&http1.Date{}).Get(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	b := http1.AppendError(nil, 431, "request header block too large", date)
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 431 || !resp.Close || resp.Header.Get("Date") != "Tue, 01 Dec 2026 12:00:00 GMT" ||
		string(body) != "431 Request Header Fields Too Large: request header block too large\n" {
		t.Fatalf("%d %v %q %q", resp.StatusCode, resp.Close, resp.Header.Get("Date"), body)
	}
}

func TestDate(t *testing.T) {
	var d http1.Date
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	if got := string(d.Get(t0)); got != t0.UTC().Format(http.TimeFormat) {
		t.Fatalf("%q", got)
	}
	if got := string(d.Get(t0.Add(1500 * time.Millisecond))); got != "Tue, 01 Dec 2026 11:00:01 GMT" {
		t.Fatalf("%q", got)
	}
}

func TestAppendChunk(t *testing.T) {
	b := []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
	b = http1.AppendChunk(b, []byte("hello, "))
	b = http1.AppendChunk(b, nil)
	b = http1.AppendChunk(b, bytes.Repeat([]byte("w"), 300))
	b = http1.AppendLastChunk(b)
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "hello, "+strings.Repeat("w", 300) {
		t.Fatalf("%q %v", body, err)
	}
}

// TestDecodeAllocs: decoding pipelined requests with up to InlineHeaders
// fields, chunked bodies and trailers included, allocates nothing.
func TestDecodeAllocs(t *testing.T) {
	head := "GET /plaintext HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("X-F: v\r\n", http1.InlineHeaders-1) + "\r\n"
	stream := []byte(head + head + "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\n")
	d := &http1.RequestDecoder{}
	var rd http1.ResponseDecoder
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 13\r\nDate: x\r\n\r\nHello, World!")
	allocs := testing.AllocsPerRun(200, func() {
		for off := 0; off < len(stream); {
			n, ev, _, err := d.Next(stream[off:])
			if err != nil || (n == 0 && ev == http1.NeedMore) {
				panic(err)
			}
			off += n
		}
		for off := 0; ; {
			n, ev, _, err := rd.Next(resp[off:])
			if err != nil {
				panic(err)
			}
			off += n
			if ev == http1.End {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round", allocs)
	}
}

func BenchmarkDecodePlaintext(b *testing.B) {
	req := []byte("GET /plaintext HTTP/1.1\r\nHost: server\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Gecko/20130501 Firefox/30.0 AppleWebKit/600.00 Chrome/30.0.0000.0 Trident/10.0 Safari/600.00\r\nCookie: uid=12345678901234567890; __utma=1.1234567890.1234567890.1234567890.1234567890.12; wd=2560x1600\r\nAccept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\nAccept-Language: en-US,en;q=0.5\r\nConnection: keep-alive\r\n\r\n")
	d := &http1.RequestDecoder{}
	b.SetBytes(int64(len(req)))
	b.ReportAllocs()
	for b.Loop() {
		n, ev, _, err := d.Next(req)
		if err != nil || ev != http1.Head || n != len(req) {
			b.Fatal(ev, err)
		}
		if _, ev, _, _ = d.Next(req[n:]); ev != http1.End {
			b.Fatal(ev)
		}
	}
}
