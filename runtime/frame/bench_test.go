package frame_test

import (
	"bytes"
	"testing"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// lineStream is 64 lines of 32 bytes ("...\r\n" included).
var lineStream = bytes.Repeat(append(bytes.Repeat([]byte("x"), 30), '\r', '\n'), 64)

// frameStream is 64 frames of 28-byte payloads (32 bytes with headers).
var frameStream = func() []byte {
	var b []byte
	for range 64 {
		b = frame.AppendFrame(b, bytes.Repeat([]byte("y"), 28))
	}
	return b
}()

// benchFeed feeds stream to d per op in reads of size bytes (0: whole).
func benchFeed(b *testing.B, d frame.Decoder, stream []byte, size int) {
	b.Helper()
	frames := 0
	emit := func([]byte) bool { frames++; return true }
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		p := stream
		for len(p) > 0 {
			n := len(p)
			if size > 0 {
				n = min(size, n)
			}
			if _, err := d.Feed(p[:n], emit); err != nil {
				b.Fatal(err)
			}
			p = p[n:]
		}
	}
	if frames == 0 {
		b.Fatal("no frames")
	}
}

// The decoders deliver whole frames from the read (no copy) and reassemble
// split ones in a retained buffer: 0 allocs/op either way.
func BenchmarkLineDecoder(b *testing.B) {
	b.Run("whole", func(b *testing.B) { benchFeed(b, &frame.LineDecoder{}, lineStream, 0) })
	b.Run("split", func(b *testing.B) { benchFeed(b, &frame.LineDecoder{}, lineStream, 100) })
}

func BenchmarkLengthDecoder(b *testing.B) {
	b.Run("whole", func(b *testing.B) { benchFeed(b, &frame.LengthDecoder{}, frameStream, 0) })
	b.Run("split", func(b *testing.B) { benchFeed(b, &frame.LengthDecoder{}, frameStream, 100) })
}

// BenchmarkLinesOnData measures the Lines adapter's OnData on a connection
// that is not on a loop (the handler writes nothing).
func BenchmarkLinesOnData(b *testing.B) {
	lines := 0
	h := frame.Lines(frame.HandlerFunc(func(*percore.Conn, []byte) { lines++ }), frame.LineConfig{})
	var c percore.Conn
	h.(percore.OpenHandler).OnOpen(&c)
	b.SetBytes(int64(len(lineStream)))
	b.ReportAllocs()
	for b.Loop() {
		h.OnData(&c, lineStream[:1000])
		h.OnData(&c, lineStream[1000:])
	}
}

func BenchmarkLengthPrefixedOnData(b *testing.B) {
	h := frame.LengthPrefixed(frame.HandlerFunc(func(*percore.Conn, []byte) {}), frame.LengthConfig{})
	var c percore.Conn
	h.(percore.OpenHandler).OnOpen(&c)
	b.SetBytes(int64(len(frameStream)))
	b.ReportAllocs()
	for b.Loop() {
		h.OnData(&c, frameStream[:1000])
		h.OnData(&c, frameStream[1000:])
	}
}

// lastLine consumes input up to its last '\n'.
type lastLine struct{}

func (lastLine) OnView(_ *percore.Conn, in []byte) (int, error) {
	return bytes.LastIndexByte(in, '\n') + 1, nil
}

// TestDecodingAllocatesNothing asserts what the benchmarks show (the
// partial token's buffer comes from the pool and goes back to it).
func TestDecodingAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("under -race sync.Pool drops a quarter of what is put back, by design, so the partial tokens' buffers are not always reused; make test runs the allocation tests without -race as well")
	}
	lines := frame.Lines(frame.HandlerFunc(func(*percore.Conn, []byte) {}), frame.LineConfig{})
	frames := frame.LengthPrefixed(frame.HandlerFunc(func(*percore.Conn, []byte) {}), frame.LengthConfig{})
	split := frame.Split(frame.ScanLines(0), frame.HandlerFunc(func(*percore.Conn, []byte) {}), frame.SplitConfig{})
	view := frame.View(lastLine{}, frame.SplitConfig{})
	var lc, fc, sc, vc percore.Conn
	lines.(percore.OpenHandler).OnOpen(&lc)
	frames.(percore.OpenHandler).OnOpen(&fc)
	split.(percore.OpenHandler).OnOpen(&sc)
	view.(percore.OpenHandler).OnOpen(&vc)
	tests := []struct {
		name string
		f    func()
	}{
		{"lines", func() { lines.OnData(&lc, lineStream[:1000]); lines.OnData(&lc, lineStream[1000:]) }},
		{"length", func() { frames.OnData(&fc, frameStream[:1000]); frames.OnData(&fc, frameStream[1000:]) }},
		{"split", func() { split.OnData(&sc, lineStream[:1000]); split.OnData(&sc, lineStream[1000:]) }},
		{"view", func() { view.OnData(&vc, lineStream[:1000]); view.OnData(&vc, lineStream[1000:]) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f() // the first split frame sizes the buffer
			if n := testing.AllocsPerRun(100, tt.f); n != 0 {
				t.Fatalf("%v allocations per pair of reads, want 0", n)
			}
		})
	}
}
