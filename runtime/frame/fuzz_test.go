package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// chunk cuts stream into pieces whose lengths come from cuts (each byte a
// length from 1 to 256, cycled), so that fuzzing explores every chunking.
func chunk(stream, cuts []byte) [][]byte {
	var out [][]byte
	for i := 0; len(stream) > 0; i++ {
		n := len(stream)
		if len(cuts) > 0 {
			n = min(int(cuts[i%len(cuts)])+1, len(stream))
		}
		out = append(out, stream[:n])
		stream = stream[n:]
	}
	return out
}

// refLines is the line codec written the obvious way: the lines of stream,
// whether a line over limit stops it, and the bytes left over.
func refLines(stream []byte, limit int) (lines []string, tooLong bool, rest int) {
	for {
		i := bytes.IndexByte(stream, '\n')
		if i < 0 {
			return lines, len(stream) > limit, len(stream)
		}
		if i > limit {
			return lines, true, 0
		}
		lines = append(lines, string(bytes.TrimSuffix(stream[:i], []byte("\r"))))
		stream = stream[i+1:]
	}
}

// refFrames is the length-prefixed codec written the obvious way.
func refFrames(stream []byte, limit int) (frames []string, tooLong bool, rest int) {
	for {
		if len(stream) < HeaderLen {
			return frames, false, len(stream)
		}
		n := binary.BigEndian.Uint32(stream)
		if uint64(n) > uint64(limit) {
			return frames, true, 0
		}
		if len(stream)-HeaderLen < int(n) {
			return frames, false, len(stream)
		}
		frames = append(frames, string(stream[HeaderLen:HeaderLen+int(n)]))
		stream = stream[HeaderLen+int(n):]
	}
}

// checkChunkings feeds stream whole and in the chunks cuts describe, and
// checks that both give the reference's frames, error and leftover, and
// that the decoder never holds more than limit+extra bytes.
func checkChunkings(t *testing.T, newDecoder func() Decoder, stream, cuts []byte, limit, extra int,
	ref func([]byte, int) ([]string, bool, int)) {
	want, wantErr, wantRest := ref(stream, limit)
	for _, chunks := range [][][]byte{{stream}, chunk(stream, cuts)} {
		d := newDecoder()
		got, peak, err := feedAll(d, chunks...)
		if err != nil && !errors.Is(err, ErrTooLong) {
			t.Fatalf("%d chunks: unexpected error %v", len(chunks), err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%d chunks: frames %q, want %q", len(chunks), got, want)
		}
		if (err != nil) != wantErr {
			t.Fatalf("%d chunks: error %v, want a too-long error: %v", len(chunks), err, wantErr)
		}
		if err == nil && d.Buffered() != wantRest {
			t.Fatalf("%d chunks: Buffered() = %d, want %d", len(chunks), d.Buffered(), wantRest)
		}
		if peak > limit+extra {
			t.Fatalf("%d chunks: held %d bytes, limit %d", len(chunks), peak, limit)
		}
	}
}

func FuzzLineDecoder(f *testing.F) {
	f.Add([]byte("ping\necho hi\r\nx"), []byte{2, 0, 5}, uint8(8))
	f.Add([]byte("\n\n\r\n\r"), []byte{0}, uint8(1))
	f.Add(bytes.Repeat([]byte("a"), 300), []byte{99}, uint8(0))
	f.Add([]byte("abcd\r\nabcde\nab"), []byte{3, 1}, uint8(4))
	f.Fuzz(func(t *testing.T, stream, cuts []byte, max uint8) {
		limit := int(max) // 0: the default
		if limit == 0 {
			limit = DefaultMaxLine
		}
		checkChunkings(t, func() Decoder { return &LineDecoder{MaxLine: int(max)} },
			stream, cuts, limit, 0, refLines)
	})
}

func FuzzLengthDecoder(f *testing.F) {
	seed := AppendFrame(AppendFrame(AppendFrame(nil, []byte("hello")), nil), []byte("world!"))
	f.Add(seed, []byte{1, 3, 0}, uint8(6))
	f.Add(seed, []byte{0}, uint8(5))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, []byte{1}, uint8(0))
	f.Add(seed[:13], []byte{6}, uint8(200))
	f.Fuzz(func(t *testing.T, stream, cuts []byte, max uint8) {
		limit := int(max)
		if limit == 0 {
			limit = DefaultMaxFrame
		}
		checkChunkings(t, func() Decoder { return &LengthDecoder{MaxFrame: int(max)} },
			stream, cuts, limit, HeaderLen, refFrames)
	})
}
