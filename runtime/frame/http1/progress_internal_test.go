package http1

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// decoder is what RequestDecoder and ResponseDecoder have in common.
type decoder interface {
	Next(data []byte) (int, Event, []byte, error)
}

// forget drops a decoder's progress through a partial head, chunk-size
// line and trailer section: with it called before every Next, a decoder
// parses as the codec did before it kept progress, from the start of what
// it is shown, which makes it the reference of the decoder that keeps it.
func forget(d decoder) {
	switch d := d.(type) {
	case *RequestDecoder:
		d.scan.reset()
		d.body.lineSeen = 0
		d.body.ts.reset()
	case *ResponseDecoder:
		d.scan.reset()
		d.body.lineSeen = 0
		d.body.ts.reset()
	}
}

// step is one call's outcome, with the head it found.
type step struct {
	n     int
	ev    Event
	piece string
	err   string
	head  string
}

func describe(d decoder, n int, ev Event, piece []byte, err error) step {
	s := step{n: n, ev: ev, piece: string(piece)}
	if err != nil {
		s.err = err.Error()
	}
	if ev == Head {
		var hs *Headers
		switch d := d.(type) {
		case *RequestDecoder:
			r := d.Request()
			s.head = fmt.Sprintf("%s %s 1.%d host=%q cl=%d chunked=%v close=%v len=%d", r.Method, r.Target, r.Minor, r.Host, r.ContentLength, r.Chunked, r.Close, r.HeadLen)
			hs = &r.Header
		case *ResponseDecoder:
			r := d.Response()
			s.head = fmt.Sprintf("%d %q 1.%d cl=%d chunked=%v close=%v len=%d", r.Status, r.Reason, r.Minor, r.ContentLength, r.Chunked, r.Close, r.HeadLen)
			hs = &r.Header
		}
		for _, h := range hs.All() {
			s.head += fmt.Sprintf(" [%s: %s]", h.Name, h.Value)
		}
	}
	if ev == End {
		switch d := d.(type) {
		case *RequestDecoder:
			for _, h := range d.Request().Trailer.All() {
				s.head += fmt.Sprintf(" [%s: %s]", h.Name, h.Value)
			}
		case *ResponseDecoder:
			for _, h := range d.Response().Trailer.All() {
				s.head += fmt.Sprintf(" [%s: %s]", h.Name, h.Value)
			}
		}
	}
	return s
}

// feed shows d the stream in the pieces cuts describe, as frame.View
// shows a connection's input (what a call did not consume is shown again,
// followed by the next piece, from a fresh copy), and returns every call's
// outcome. reference forgets the progress before every call.
func feed(d decoder, stream []byte, cuts []int, reference bool) []step {
	var out []step
	var held []byte
	for _, c := range cuts {
		held = append(append([]byte(nil), held...), stream[:c]...)
		stream = stream[c:]
		for {
			if reference {
				forget(d)
			}
			n, ev, piece, err := d.Next(held)
			out = append(out, describe(d, n, ev, piece, err))
			held = held[n:]
			if err != nil {
				return out
			}
			if ev == NeedMore {
				break
			}
		}
	}
	return out
}

// compareFeeds runs the stream through a decoder that keeps its progress
// and through the reference, in the same pieces, and fails at the first
// call whose outcome differs.
func compareFeeds(t *testing.T, mk func() decoder, stream []byte, cuts []int, what string) {
	t.Helper()
	got := feed(mk(), stream, cuts, false)
	want := feed(mk(), stream, cuts, true)
	for i := range max(len(got), len(want)) {
		var g, w step
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Fatalf("%s: call %d of %d: keeping progress %+v, parsing afresh %+v\nstream %q cuts %v", what, i, len(want), g, w, stream, cuts)
		}
	}
}

// randomMessages builds a stream of requests (or responses) with random
// fields, bodies of both framings and trailers, some bytes mutated.
func randomMessages(rng *rand.Rand, response bool) []byte {
	var b []byte
	for range 1 + rng.IntN(3) {
		if rng.IntN(4) == 0 {
			b = append(b, "\r\n"...)
		}
		if response {
			b = append(b, "HTTP/1.1 "...)
			b = strconv.AppendInt(b, int64(100+rng.IntN(500)), 10)
			b = append(b, " Some reason\r\n"...)
		} else {
			b = append(b, []string{"GET", "POST", "PUT", "G@T"}[rng.IntN(4)]...)
			b = append(b, ' ', '/')
			b = append(b, strings.Repeat("p", rng.IntN(60))...)
			b = append(b, " HTTP/1.1\r\nHost: h\r\n"...)
		}
		for range rng.IntN(12) {
			b = append(b, "X-"...)
			b = strconv.AppendInt(b, int64(rng.IntN(100)), 10)
			b = append(b, ": "...)
			b = append(b, strings.Repeat("v", rng.IntN(80))...)
			b = append(b, "\r\n"...)
		}
		switch rng.IntN(3) {
		case 0:
			b = append(b, "Content-Length: 5\r\n\r\nhello"...)
		case 1:
			b = append(b, "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"...)
			if rng.IntN(2) == 0 {
				b = append(b, "0\r\nT-1: x\r\nT-2: "...)
				b = append(b, strings.Repeat("t", rng.IntN(40))...)
				b = append(b, "\r\n\r\n"...)
			} else {
				b = append(b, "0\r\n\r\n"...)
			}
		default:
			if response {
				b = append(b, "Content-Length: 0\r\n"...)
			}
			b = append(b, "\r\n"...)
		}
	}
	for range rng.IntN(3) { // a broken byte now and then
		if rng.IntN(3) == 0 {
			b[rng.IntN(len(b))] = "\n\r :\x01a"[rng.IntN(6)]
		}
	}
	return b
}

func randomCuts(rng *rand.Rand, n, most int) []int {
	var cuts []int
	for n > 0 {
		c := min(n, 1+rng.IntN(most))
		cuts = append(cuts, c)
		n -= c
	}
	return cuts
}

// TestProgressMatchesAFreshParse: decoders that keep their progress
// through partial heads, chunk-size lines and trailers give, call for call,
// what the codec gave when it parsed afresh at every call: the same
// consumption, events, heads and errors, for random requests and responses
// (some malformed) in random pieces, and with limits small enough to be
// reached. The seed is printed on failure.
func TestProgressMatchesAFreshParse(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 2))
	for round := range 400 {
		response := round%2 == 1
		stream := randomMessages(rng, response)
		cuts := randomCuts(rng, len(stream), []int{1, 7, 64}[rng.IntN(3)])
		lim := Limits{}
		if rng.IntN(3) == 0 {
			lim = Limits{MaxRequestLine: 20 + rng.IntN(60), MaxHeaderBytes: 40 + rng.IntN(400), MaxHeaders: 1 + rng.IntN(8)}
		}
		mk := func() decoder {
			if response {
				return &ResponseDecoder{Limits: lim}
			}
			return &RequestDecoder{Limits: lim}
		}
		compareFeeds(t, mk, stream, cuts, fmt.Sprintf("seed %d round %d", seed, round))
	}
}

// FuzzProgress is TestProgressMatchesAFreshParse over any input.
func FuzzProgress(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n\r\n"), []byte{1, 3}, false, uint16(0))
	f.Add([]byte("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), []byte{0}, false, uint16(30))
	f.Add([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nT: x\r\n\r\n"), []byte{2}, false, uint16(0))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"), []byte{4}, true, uint16(0))
	f.Add([]byte("HTTP/1.1 200 OK\nX: y\r\n\r\n"), []byte{0}, true, uint16(16))
	f.Fuzz(func(t *testing.T, stream, cutBytes []byte, response bool, small uint16) {
		var cuts []int
		for i, n := 0, len(stream); n > 0; i++ {
			c := n
			if len(cutBytes) > 0 {
				c = min(n, int(cutBytes[i%len(cutBytes)])+1)
			}
			cuts = append(cuts, c)
			n -= c
		}
		lim := Limits{}
		if small > 0 {
			lim = Limits{MaxRequestLine: int(small % 64), MaxHeaderBytes: int(small % 512), MaxHeaders: int(small % 9)}
		}
		mk := func() decoder {
			if response {
				return &ResponseDecoder{Limits: lim}
			}
			return &RequestDecoder{Limits: lim}
		}
		compareFeeds(t, mk, stream, cuts, "fuzz")
	})
}

// TestHeadWorkIsLinear trickles heads of the largest size the defaults
// allow (a 32 KiB head of 100 fields, an 8 KiB request line) in 1- and
// 7-byte pieces, and counts the bytes the decoder examines: about the
// head's size a few times over, not once per piece (parsed afresh at every
// piece, the first costs some 500 MB).
func TestHeadWorkIsLinear(t *testing.T) {
	var head bytes.Buffer
	head.WriteString("GET /" + strings.Repeat("t", 8000) + " HTTP/1.1\r\nHost: h\r\n")
	for i := range 98 {
		fmt.Fprintf(&head, "X-%d: %s\r\n", i, strings.Repeat("v", 240))
	}
	head.WriteString("\r\n")
	resp := []byte("HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Field: "+strings.Repeat("v", 300)+"\r\n", 99) + "Content-Length: 0\r\n\r\n")
	tests := []struct {
		name  string
		d     decoder
		in    []byte
		piece int
	}{
		{"a 32 KB request head byte by byte", &RequestDecoder{}, head.Bytes(), 1},
		{"a 32 KB request head in 7-byte pieces", &RequestDecoder{}, head.Bytes(), 7},
		{"a 30 KB response head byte by byte", &ResponseDecoder{}, resp, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scanned := func() int64 {
				if d, ok := tt.d.(*RequestDecoder); ok {
					return d.scan.scanned
				}
				return tt.d.(*ResponseDecoder).scan.scanned
			}
			n := int64(len(tt.in))
			heads := 0
			for end := 0; end < len(tt.in); {
				end = min(end+tt.piece, len(tt.in))
				k, ev, _, err := tt.d.Next(tt.in[:end])
				if err != nil {
					t.Fatalf("after %d bytes: %v", end, err)
				}
				if ev == Head {
					if k != len(tt.in) {
						t.Fatalf("head of %d bytes, want %d", k, len(tt.in))
					}
					heads++
				}
				if scanned() > 4*n+64 {
					t.Fatalf("%d bytes examined after %d of %d bytes: the parse is not linear", scanned(), end, n)
				}
			}
			if heads != 1 {
				t.Fatalf("%d heads", heads)
			}
			t.Logf("%d bytes examined for a %d-byte head", scanned(), n)
		})
	}
}
