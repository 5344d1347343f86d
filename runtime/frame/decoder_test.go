package frame

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// feedAll feeds chunks to d in order and returns a copy of every frame
// delivered, the largest Buffered seen, and the first error.
func feedAll(d Decoder, chunks ...[]byte) (frames []string, peak int, err error) {
	for _, c := range chunks {
		n, ferr := d.Feed(c, func(f []byte) bool {
			frames = append(frames, string(f))
			return true
		})
		peak = max(peak, d.Buffered())
		if ferr != nil {
			return frames, peak, ferr
		}
		if n != len(c) {
			return frames, peak, fmt.Errorf("Feed consumed %d of %d bytes without being stopped", n, len(c))
		}
	}
	return frames, peak, nil
}

func strs(ss ...string) [][]byte {
	var out [][]byte
	for _, s := range ss {
		out = append(out, []byte(s))
	}
	return out
}

// tooLong checks that err is a *TooLongError with the limit and length.
func tooLong(t *testing.T, err error, limit, got int) {
	t.Helper()
	var tl *TooLongError
	if !errors.As(err, &tl) || !errors.Is(err, ErrTooLong) {
		t.Fatalf("error %v: want a *TooLongError matching ErrTooLong", err)
	}
	if tl.Limit != limit || tl.Got != got {
		t.Fatalf("TooLongError{Limit: %d, Got: %d}, want {%d, %d}", tl.Limit, tl.Got, limit, got)
	}
}

func TestLineDecoder(t *testing.T) {
	long := strings.Repeat("a", DefaultMaxLine)
	tests := []struct {
		name     string
		max      int
		chunks   [][]byte
		want     []string
		errGot   int // a TooLongError with this Got; 0: no error
		buffered int
	}{
		{name: "one line", chunks: strs("ping\n"), want: []string{"ping"}},
		{name: "crlf stripped", chunks: strs("ping\r\n"), want: []string{"ping"}},
		{name: "only the last cr stripped", chunks: strs("a\r\r\n"), want: []string{"a\r"}},
		{name: "cr inside kept", chunks: strs("a\rb\n"), want: []string{"a\rb"}},
		{name: "empty lines", chunks: strs("\n\r\n"), want: []string{"", ""}},
		{name: "three in one read", chunks: strs("a\nbb\nccc\n"), want: []string{"a", "bb", "ccc"}},
		{name: "split in two", chunks: strs("hel", "lo\n"), want: []string{"hello"}},
		{name: "split between cr and lf", chunks: strs("ab\r", "\n"), want: []string{"ab"}},
		{name: "byte by byte", chunks: strs("h", "i", "\r", "\n", "x", "\n"), want: []string{"hi", "x"}},
		{name: "end and start in one read", chunks: strs("a", "b\nc", "d\n"), want: []string{"ab", "cd"}},
		{name: "partial line held", chunks: strs("ok\nabc"), want: []string{"ok"}, buffered: 3},
		{name: "empty reads", chunks: strs("", "a", "", "\n"), want: []string{"a"}},
		{name: "exactly the limit", max: 4, chunks: strs("abcd\n"), want: []string{"abcd"}},
		{name: "exactly the limit in pieces", max: 4, chunks: strs("ab", "cd", "\n"), want: []string{"abcd"}},
		{name: "limit counts the cr", max: 4, chunks: strs("abc\r\n"), want: []string{"abc"}},
		{name: "limit counts the cr, over", max: 4, chunks: strs("abcd\r\n"), errGot: 5},
		{name: "over the limit", max: 4, chunks: strs("abcde\n"), errGot: 5},
		{name: "over the limit in pieces", max: 4, chunks: strs("abc", "de\n"), errGot: 5},
		{name: "over the limit without end", max: 4, chunks: strs("abcdefgh"), errGot: 8},
		{name: "over the limit, end arrives later", max: 4, chunks: strs("abcd", "efgh", "\n"), errGot: 8},
		{name: "lines before the long one delivered", max: 4, chunks: strs("ok\nabcdefgh\nno\n"), want: []string{"ok"}, errGot: 8},
		{name: "zero max is the default", chunks: strs(long + "\n"), want: []string{long}},
		{name: "zero max is the default, over", chunks: strs(long, "a\n"), errGot: DefaultMaxLine + 1},
		{name: "negative max is the default", max: -1, chunks: strs(long + "\n"), want: []string{long}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &LineDecoder{MaxLine: tt.max}
			got, peak, err := feedAll(d, tt.chunks...)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("lines %q, want %q", got, tt.want)
			}
			limit := d.limit()
			if peak > limit {
				t.Fatalf("buffered %d bytes, over the limit %d", peak, limit)
			}
			if tt.errGot == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if d.Buffered() != tt.buffered {
					t.Fatalf("Buffered() = %d, want %d", d.Buffered(), tt.buffered)
				}
				return
			}
			tooLong(t, err, limit, tt.errGot)
			if d.Buffered() != 0 || d.buf != nil {
				t.Fatalf("a failed decoder holds %d bytes (cap %d)", d.Buffered(), cap(d.buf))
			}
		})
	}
}

func TestLengthDecoder(t *testing.T) {
	frame := func(payloads ...string) []byte {
		var b []byte
		for _, p := range payloads {
			b = AppendFrame(b, []byte(p))
		}
		return b
	}
	hello := frame("hello")
	header := func(n uint32) []byte { return []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)} }
	tests := []struct {
		name     string
		max      int
		chunks   [][]byte
		want     []string
		errGot   int
		buffered int
	}{
		{name: "one frame", chunks: [][]byte{hello}, want: []string{"hello"}},
		{name: "empty payload", chunks: [][]byte{frame("")}, want: []string{""}},
		{name: "several in one read", chunks: [][]byte{frame("a", "", "bcd")}, want: []string{"a", "", "bcd"}},
		{name: "header split", chunks: [][]byte{hello[:2], hello[2:]}, want: []string{"hello"}},
		{name: "header split, then empty payload", chunks: [][]byte{frame("")[:3], frame("")[3:]}, want: []string{""}},
		{name: "header whole, payload later", chunks: [][]byte{hello[:4], hello[4:]}, want: []string{"hello"}},
		{name: "payload split", chunks: [][]byte{hello[:6], hello[6:]}, want: []string{"hello"}},
		{name: "header split, payload split", chunks: [][]byte{hello[:1], hello[1:6], hello[6:]}, want: []string{"hello"}},
		{name: "end and start in one read", chunks: [][]byte{hello[:7], append(hello[7:len(hello):len(hello)], hello...)}, want: []string{"hello", "hello"}},
		{name: "partial header held", chunks: [][]byte{hello[:3]}, buffered: 3},
		{name: "partial payload held", chunks: [][]byte{hello[:7]}, buffered: 7},
		{name: "exactly the limit", max: 5, chunks: [][]byte{hello}, want: []string{"hello"}},
		{name: "over the limit", max: 4, chunks: [][]byte{hello}, errGot: 5},
		{name: "over the limit, header alone", max: 1024, chunks: [][]byte{header(1 << 30)}, errGot: 1 << 30},
		{name: "over the limit, header split", max: 1024, chunks: [][]byte{header(2048)[:2], header(2048)[2:]}, errGot: 2048},
		{name: "frames before the long one delivered", max: 5, chunks: [][]byte{frame("ok", "toolong", "no")}, want: []string{"ok"}, errGot: 7},
		{name: "largest header, default limit", chunks: [][]byte{header(1<<32 - 1)}, errGot: 1<<32 - 1},
		{name: "zero max is the default", chunks: [][]byte{header(DefaultMaxFrame)}, buffered: HeaderLen},
		{name: "zero max is the default, over", chunks: [][]byte{header(DefaultMaxFrame + 1)}, errGot: DefaultMaxFrame + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &LengthDecoder{MaxFrame: tt.max}
			got, peak, err := feedAll(d, tt.chunks...)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("frames %q, want %q", got, tt.want)
			}
			limit := d.limit()
			if peak > HeaderLen+limit || cap(d.buf) > limit {
				t.Fatalf("buffered %d bytes (cap %d), over the limit %d", peak, cap(d.buf), limit)
			}
			if tt.errGot == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if d.Buffered() != tt.buffered {
					t.Fatalf("Buffered() = %d, want %d", d.Buffered(), tt.buffered)
				}
				return
			}
			tooLong(t, err, limit, tt.errGot)
			if d.Buffered() != 0 || d.buf != nil {
				t.Fatalf("a failed decoder holds %d bytes (cap %d)", d.Buffered(), cap(d.buf))
			}
		})
	}
}

// TestNeverBuffersOverLimit feeds 10,000 bytes without a line end, 100 at a
// time: the decoder holds at most the limit, and fails as soon as the line
// exceeds it.
func TestNeverBuffersOverLimit(t *testing.T) {
	const limit = 1024
	d := &LineDecoder{MaxLine: limit}
	chunk := bytes.Repeat([]byte("x"), 100)
	fed := 0
	for fed < 10000 {
		_, err := d.Feed(chunk, func([]byte) bool { t.Fatal("no line expected"); return false })
		fed += len(chunk)
		if d.Buffered() > limit || cap(d.buf) > limit {
			t.Fatalf("after %d bytes: buffered %d (cap %d), limit %d", fed, d.Buffered(), cap(d.buf), limit)
		}
		if err != nil {
			if fed != 1100 {
				t.Fatalf("failed after %d bytes, want 1100 (the first read past the limit)", fed)
			}
			tooLong(t, err, limit, 1100)
			return
		}
	}
	t.Fatal("10,000 bytes without a line end were accepted")
}

// TestLengthBufferGrowsWithData: a header declaring a large frame does not
// make the decoder allocate that frame up front.
func TestLengthBufferGrowsWithData(t *testing.T) {
	d := &LengthDecoder{}
	p := AppendFrame(nil, make([]byte, 1<<20))
	if _, _, err := feedAll(d, p[:HeaderLen+10]); err != nil {
		t.Fatal(err)
	}
	if cap(d.buf) > minBuffer {
		t.Fatalf("after 10 bytes of a 1 MiB frame the buffer has cap %d, want at most %d", cap(d.buf), minBuffer)
	}
}

func TestPoisoned(t *testing.T) {
	decoders := []struct {
		name    string
		d       Decoder
		bad, ok []byte
	}{
		{"line", &LineDecoder{MaxLine: 2}, []byte("abc\n"), []byte("ok\n")},
		{"length", &LengthDecoder{MaxFrame: 2}, AppendFrame(nil, []byte("abc")), AppendFrame(nil, []byte("ok"))},
	}
	for _, tt := range decoders {
		t.Run(tt.name, func(t *testing.T) {
			_, err1 := tt.d.Feed(tt.bad, func([]byte) bool { return true })
			if !errors.Is(err1, ErrTooLong) {
				t.Fatalf("error %v, want ErrTooLong", err1)
			}
			n, err2 := tt.d.Feed(tt.ok, func([]byte) bool { t.Fatal("a poisoned decoder delivered a frame"); return true })
			if n != 0 || err2 != err1 {
				t.Fatalf("after an error Feed = %d, %v; want 0, %v", n, err2, err1)
			}
			tt.d.Reset()
			got, _, err := feedAll(tt.d, tt.ok)
			if err != nil || !slices.Equal(got, []string{"ok"}) {
				t.Fatalf("after Reset: %q, %v", got, err)
			}
		})
	}
}

// TestStop checks that Feed stops when emit returns false and says where,
// so that the caller can feed the rest later and get the same frames.
func TestStop(t *testing.T) {
	decoders := []struct {
		name string
		d    Decoder
		data []byte
	}{
		{"line", &LineDecoder{}, []byte("a\nbb\nccc\nd")},
		{"length", &LengthDecoder{}, AppendFrame(AppendFrame(AppendFrame(AppendFrame(nil, []byte("a")), []byte("bb")), []byte("ccc")), []byte("d"))[:HeaderLen*4+6]},
	}
	for _, tt := range decoders {
		t.Run(tt.name, func(t *testing.T) {
			// Split after the first byte so that the first frame comes
			// from the buffer or the split header path, the rest from data.
			if _, err := tt.d.Feed(tt.data[:1], func([]byte) bool { return true }); err != nil {
				t.Fatal(err)
			}
			var got []string
			rest := tt.data[1:]
			for range 10 {
				n, err := tt.d.Feed(rest, func(f []byte) bool {
					got = append(got, string(f))
					return false
				})
				if err != nil {
					t.Fatal(err)
				}
				if n == len(rest) {
					break
				}
				rest = rest[n:]
			}
			if want := []string{"a", "bb", "ccc"}; !slices.Equal(got, want) {
				t.Fatalf("frames %q, want %q", got, want)
			}
			if tt.d.Buffered() == 0 {
				t.Fatal("the trailing partial frame was not kept")
			}
		})
	}
}

// TestBufferRetention: a small split frame's buffer is kept (the next one
// costs no allocation); a large one's is released after its frame.
func TestBufferRetention(t *testing.T) {
	t.Run("line", func(t *testing.T) {
		d := &LineDecoder{}
		small := []byte("0123456789\n")
		emit := func([]byte) bool { return true }
		allocs := testing.AllocsPerRun(100, func() {
			d.Feed(small[:5], emit)
			d.Feed(small[5:], emit)
		})
		if allocs != 0 {
			t.Fatalf("a small line in two pieces allocates %v times", allocs)
		}
		if cap(d.buf) == 0 {
			t.Fatal("the small buffer was released")
		}
		big := append(bytes.Repeat([]byte("b"), 3*retainBuffer), '\n')
		feedAll(d, big[:10], big[10:])
		if d.buf != nil {
			t.Fatalf("a %d-byte buffer was kept after its line", cap(d.buf))
		}
	})
	t.Run("length", func(t *testing.T) {
		d := &LengthDecoder{}
		small := AppendFrame(nil, []byte("0123456789"))
		emit := func([]byte) bool { return true }
		allocs := testing.AllocsPerRun(100, func() {
			d.Feed(small[:7], emit)
			d.Feed(small[7:], emit)
		})
		if allocs != 0 {
			t.Fatalf("a small frame in two pieces allocates %v times", allocs)
		}
		big := AppendFrame(nil, make([]byte, 3*retainBuffer))
		feedAll(d, big[:10], big[10:])
		if d.buf != nil {
			t.Fatalf("a %d-byte buffer was kept after its frame", cap(d.buf))
		}
	})
}

func TestTooLongErrorMessage(t *testing.T) {
	err := error(&TooLongError{Limit: 1024, Got: 10000})
	if got, want := err.Error(), "frame too long: 10000 bytes, limit 1024"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
