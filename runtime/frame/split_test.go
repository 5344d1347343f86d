package frame_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// splitCases are multi-token streams and the tokens each split function
// makes of them, the last one (for ScanWords) only at the end of the
// stream.
var splitCases = []struct {
	name   string
	split  bufio.SplitFunc
	max    int
	stream string
	want   []string
}{
	{"lines", frame.ScanLines(16), 16, "ping\r\necho hello\n\nlast line\n", []string{"ping", "echo hello", "", "last line"}},
	{"length", frame.ScanLengthPrefixed(16), 20,
		string(frame.AppendFrame(frame.AppendFrame(frame.AppendFrame(nil, []byte("hello")), nil), []byte("0123456789abcdef"))),
		[]string{"hello", "", "0123456789abcdef"}},
	{"words, the last at the end", bufio.ScanWords, 64, "  one two\tthree\n four", []string{"one", "two", "three", "four"}},
}

// splitAll feeds the chunks to a Splitter, then ends the stream, and
// returns a copy of every token and the first error.
func splitAll(split bufio.SplitFunc, max int, chunks ...[]byte) ([]string, error) {
	s := frame.Splitter{Split: split, MaxBuffered: max}
	var got []string
	emit := func(tok []byte) bool { got = append(got, string(tok)); return true }
	for _, c := range chunks {
		if _, err := s.Feed(c, emit); err != nil {
			return got, err
		}
		if s.Buffered() > max {
			return got, fmt.Errorf("holds %d bytes, over %d", s.Buffered(), max)
		}
	}
	return got, s.End(emit)
}

// TestSplitterEveryBoundary cuts each stream at every byte, and feeds it
// byte by byte: the tokens are the same.
func TestSplitterEveryBoundary(t *testing.T) {
	for _, tt := range splitCases {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.stream)
			for i := range len(in) + 1 {
				if got, err := splitAll(tt.split, tt.max, in[:i], in[i:]); err != nil || !slices.Equal(got, tt.want) {
					t.Fatalf("cut at %d: %q, %v; want %q", i, got, err, tt.want)
				}
			}
			var bytewise [][]byte
			for i := range in {
				bytewise = append(bytewise, in[i:i+1])
			}
			if got, err := splitAll(tt.split, tt.max, bytewise...); err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("byte by byte: %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestSplitterErrors: a partial token over the limit, the split
// function's own error, bad advances, and ErrFinalToken.
func TestSplitterErrors(t *testing.T) {
	words := bufio.ScanWords
	quit := func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		if string(tok) == "QUIT" {
			return adv, tok, bufio.ErrFinalToken
		}
		return adv, tok, err
	}
	bad := errors.New("bad token")
	picky := func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanWords(data, atEOF)
		if string(tok) == "bad" {
			return 0, nil, bad
		}
		return adv, tok, err
	}
	tests := []struct {
		name   string
		split  bufio.SplitFunc
		chunks []string
		want   []string
		err    error
	}{
		{"a word over the limit, in pieces", words, []string{"ok ", "0123456", "789abcdef"}, []string{"ok"}, frame.ErrTooLong},
		{"a word over the limit, in one read", words, []string{"ok 0123456789abcdef"}, []string{"ok"}, frame.ErrTooLong},
		{"the split function's error", picky, []string{"good ba", "d never"}, []string{"good"}, bad},
		{"negative advance", func([]byte, bool) (int, []byte, error) { return -1, nil, nil }, []string{"x"}, nil, bufio.ErrNegativeAdvance},
		{"advance too far", func(d []byte, _ bool) (int, []byte, error) { return len(d) + 1, nil, nil }, []string{"x"}, nil, bufio.ErrAdvanceTooFar},
		{"no progress", func(d []byte, _ bool) (int, []byte, error) { return 0, d[:0], nil }, []string{"x"}, nil, io.ErrNoProgress},
		{"final token", quit, []string{"a\nQU", "IT\nb\n"}, []string{"a", "QUIT"}, bufio.ErrFinalToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var chunks [][]byte
			for _, c := range tt.chunks {
				chunks = append(chunks, []byte(c))
			}
			got, err := splitAll(tt.split, 8, chunks...)
			if len(tt.want) > 0 && tt.err == nil && got == nil {
				t.Fatal("no tokens")
			}
			if !errors.Is(err, tt.err) || !slices.Equal(got, tt.want) && len(tt.want) > 0 {
				t.Fatalf("%q, %v; want %q, %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// onData feeds pieces to h's OnData on a connection that is not on a loop
// (what the adapters do without writing).
func onData(h percore.Handler, pieces ...[]byte) {
	var c percore.Conn
	h.(percore.OpenHandler).OnOpen(&c)
	for _, p := range pieces {
		h.OnData(&c, p)
	}
	if eof, ok := h.(percore.EOFHandler); ok {
		eof.OnEOF(&c)
	}
}

// collect keeps the tokens; its OnEOF keeps the connection (one that is not
// on a loop cannot close).
type collect struct{ got *[]string }

func (h collect) OnFrame(_ *percore.Conn, tok []byte) { *h.got = append(*h.got, string(tok)) }
func (h collect) OnEOF(*percore.Conn)                 {}

// viewWords is a ViewHandler that consumes whole space-ended words, an
// in-place parser's shape.
type viewWords struct{ got *[]string }

func (v viewWords) OnView(_ *percore.Conn, in []byte) (int, error) {
	done := 0
	for {
		i := bytes.IndexByte(in[done:], ' ')
		if i < 0 {
			return done, nil
		}
		if i > 0 {
			*v.got = append(*v.got, string(in[done:done+i]))
		}
		done += i + 1
	}
}

// TestAdaptersEveryBoundary: Split and View hand over the same tokens
// however the stream is cut.
func TestAdaptersEveryBoundary(t *testing.T) {
	for _, tt := range splitCases {
		t.Run("split "+tt.name, func(t *testing.T) {
			in := []byte(tt.stream)
			for i := range len(in) + 1 {
				var got []string
				h := frame.Split(tt.split, collect{&got}, frame.SplitConfig{MaxBuffered: tt.max})
				onData(h, in[:i], in[i:])
				if !slices.Equal(got, tt.want) {
					t.Fatalf("cut at %d: %q, want %q", i, got, tt.want)
				}
			}
		})
	}
	t.Run("view", func(t *testing.T) {
		in := []byte("one  two three four ")
		want := []string{"one", "two", "three", "four"}
		for i := range len(in) + 1 {
			for j := i; j <= len(in); j += 3 {
				var got []string
				onData(frame.View(viewWords{&got}, frame.SplitConfig{MaxBuffered: 8}), in[:i], in[i:j], in[j:])
				if !slices.Equal(got, want) {
					t.Fatalf("cut at %d and %d: %q, want %q", i, j, got, want)
				}
			}
		}
	})
}

// tokenEcho answers every token with "token:TOKEN\n", a framing error
// with "error: ERR\n", and records the end of the stream.
type tokenEcho struct {
	errs *pctest.Inbox[error]
}

func (h *tokenEcho) OnFrame(c *percore.Conn, tok []byte) {
	c.Write(append(append([]byte("token:"), tok...), '\n'))
}

func (h *tokenEcho) OnFrameError(c *percore.Conn, err error) {
	c.Write([]byte("error: " + err.Error() + "\n"))
	h.errs.Put(err)
}

// withEOF is tokenEcho with OnEOF: it says goodbye and closes.
type withEOF struct{ tokenEcho }

func (h *withEOF) OnEOF(c *percore.Conn) {
	c.Write([]byte("bye\n"))
	c.Close()
}

func TestSplitOverTCP(t *testing.T) {
	quitLines := func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := frame.ScanLines(64)(data, atEOF)
		if string(tok) == "quit" {
			return adv, tok, bufio.ErrFinalToken
		}
		return adv, tok, err
	}
	tests := []struct {
		name   string
		split  bufio.SplitFunc
		eof    bool // the handler implements OnEOF
		pieces []string
		want   string
	}{
		{"words in pieces, the last at the end", bufio.ScanWords, false, []string{"one tw", "o thr", "ee"}, "token:one\ntoken:two\ntoken:three\n"},
		{"the handler's OnEOF after the last token", bufio.ScanWords, true, []string{"a b"}, "token:a\ntoken:b\nbye\n"},
		{"a word over the limit", bufio.ScanWords, false, []string{"ok ", strings.Repeat("x", 40)}, "token:ok\nerror: frame too long: 40 bytes, limit 32\n"},
		{"a final token closes", quitLines, false, []string{"a\nquit\nnever\n"}, "token:a\ntoken:quit\n"},
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h := tokenEcho{errs: pctest.NewInbox[error]()}
				var th frame.Handler = &h
				if tt.eof {
					th = &withEOF{h}
				}
				rt := serve(t, b, frame.Split(tt.split, th, frame.SplitConfig{MaxBuffered: 32}))
				c := pctest.Dial(t, rt.Addr().String())
				var pieces [][]byte
				for _, p := range tt.pieces {
					pieces = append(pieces, []byte(p))
				}
				send(t, c, 20*time.Millisecond, pieces...)
				c.CloseWrite()
				if got := readToEnd(t, c); got != tt.want {
					t.Fatalf("replies %q, want %q", got, tt.want)
				}
			})
		}
	})
}

// oneAtATime answers each line after a timer, pausing the connection
// meanwhile: what a proxy waiting for its upstream does. It checks that
// no line arrives while one is in flight.
type oneAtATime struct {
	busy   bool
	faults *pctest.Inbox[string]
}

func (h *oneAtATime) start(c *percore.Conn, line []byte) {
	if h.busy {
		h.faults.Put("a line arrived while one was in flight: " + string(line))
	}
	h.busy = true
	frame.PauseRead(c)
	reply := append([]byte("done:"), line...)
	c.Loop().AfterFunc(time.Millisecond, func() {
		h.busy = false
		frame.WriteLine(c, reply)
		frame.ResumeRead(c)
	})
}

func (h *oneAtATime) OnFrame(c *percore.Conn, line []byte) { h.start(c, line) }

// OnView takes one line at a time.
func (h *oneAtATime) OnView(c *percore.Conn, in []byte) (int, error) {
	i := bytes.IndexByte(in, '\n')
	if i < 0 || h.busy {
		return 0, nil
	}
	h.start(c, in[:i])
	return i + 1, nil
}

// TestPauseResume: pipelined requests answered one at a time, in order,
// with PauseRead and ResumeRead, through Lines and through View.
func TestPauseResume(t *testing.T) {
	var req, want strings.Builder
	for i := range 20 {
		fmt.Fprintf(&req, "request %d\n", i)
		fmt.Fprintf(&want, "done:request %d\n", i)
	}
	adapters := []struct {
		name string
		h    func(*oneAtATime) percore.Handler
	}{
		{"lines", func(h *oneAtATime) percore.Handler { return frame.Lines(h, frame.LineConfig{}) }},
		{"view", func(h *oneAtATime) percore.Handler { return frame.View(h, frame.SplitConfig{}) }},
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, a := range adapters {
			t.Run(a.name, func(t *testing.T) {
				h := &oneAtATime{faults: pctest.NewInbox[string]()}
				rt := serve(t, b, a.h(h))
				c := pctest.Dial(t, rt.Addr().String())
				send(t, c, 0, []byte(req.String()))
				got := make([]byte, want.Len())
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatalf("read %q: %v", got, err)
				}
				if string(got) != want.String() {
					t.Fatalf("replies %q, want %q", got, want.String())
				}
				if f := h.faults.Drain(); len(f) > 0 {
					t.Fatal(f[0])
				}
			})
		}
	})
}

// TestViewTooLong: more than the limit left unconsumed is a TooLongError.
func TestViewTooLong(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		errs := pctest.NewInbox[error]()
		var got []string
		h := frame.View(viewErr{viewWords{&got}, errs}, frame.SplitConfig{MaxBuffered: 16})
		rt := serve(t, b, h)
		c := pctest.Dial(t, rt.Addr().String())
		send(t, c, 0, []byte("ok "+strings.Repeat("x", 100)))
		if got := readToEnd(t, c); got != "error\n" {
			t.Fatalf("replies %q, want the error", got)
		}
		var tl *frame.TooLongError
		if err := errs.Next(t, "OnFrameError"); !errors.As(err, &tl) || tl.Limit != 16 || tl.Got != 100 {
			t.Fatalf("OnFrameError got %v, want a TooLongError for 100 bytes over 16", err)
		}
	})
}

type viewErr struct {
	viewWords
	errs *pctest.Inbox[error]
}

func (v viewErr) OnFrameError(c *percore.Conn, err error) {
	c.Write([]byte("error\n"))
	v.errs.Put(err)
}

// TestLineScannerWithBufioScanner: a LineScanner keeps bufio.Scanner's
// contract too (after a call that asked for more, the next one's data
// begins with the same bytes), so it serves a Scanner that reads a byte at
// a time, with ScanLines' tokens.
func TestLineScannerWithBufioScanner(t *testing.T) {
	in := "first\r\nsecond line\n\nlast\n"
	sc := bufio.NewScanner(iotest.OneByteReader(strings.NewReader(in)))
	ls := frame.NewLineScanner(64)
	sc.Split(ls.Scan)
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"first", "second line", "", "last"}; !slices.Equal(got, want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
	if ls.Scanned() > int64(len(in)) {
		t.Fatalf("examined %d bytes of %d", ls.Scanned(), len(in))
	}
}

// TestZeroAndNegativeLimits: a limit's zero value means its default and a
// negative one means no limit, for the decoders and the adapters alike.
func TestZeroAndNegativeLimits(t *testing.T) {
	long := append(bytes.Repeat([]byte("x"), frame.DefaultMaxLine+100), '\n')
	for _, tc := range []struct {
		name    string
		max     int
		wantErr bool
	}{
		{"zero: the default", 0, true},
		{"negative: none", -1, false},
		{"positive: itself", len(long), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := frame.LineDecoder{MaxLine: tc.max}
			var lines int
			_, err := d.Feed(long, func([]byte) bool { lines++; return true })
			if gotErr := errors.Is(err, frame.ErrTooLong); gotErr != tc.wantErr || (!tc.wantErr && lines != 1) {
				t.Fatalf("LineDecoder{MaxLine: %d}: %d lines, error %v; want a too-long error: %v", tc.max, lines, err, tc.wantErr)
			}
			sp := frame.Splitter{Split: frame.ScanLines(tc.max), MaxBuffered: tc.max}
			lines = 0
			for i := 0; i < len(long); i += 4096 { // in pieces: the buffer limit counts
				if _, err = sp.Feed(long[i:min(i+4096, len(long))], func([]byte) bool { lines++; return true }); err != nil {
					break
				}
			}
			if gotErr := errors.Is(err, frame.ErrTooLong); gotErr != tc.wantErr || (!tc.wantErr && lines != 1) {
				t.Fatalf("Splitter{MaxBuffered: %d}: %d lines, error %v; want a too-long error: %v", tc.max, lines, err, tc.wantErr)
			}
		})
	}
}
