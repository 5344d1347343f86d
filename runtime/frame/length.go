//go:build linux

package frame

import (
	"encoding/binary"
	"math"
)

// HeaderLen is the length of a length-prefixed frame's header: the
// payload's length as a 4-byte big-endian unsigned integer.
const HeaderLen = 4

// DefaultMaxFrame is the payload limit of a LengthDecoder whose MaxFrame is
// zero: 8 MiB (Tokio's LengthDelimitedCodec default).
const DefaultMaxFrame = 8 << 20

// LengthDecoder splits a stream of length-prefixed frames: each frame is a
// HeaderLen-byte big-endian payload length followed by the payload. It
// delivers payloads, without their header. The zero value is ready to use,
// with the default limit. A LengthDecoder is used on one goroutine at a
// time (a connection's loop thread).
type LengthDecoder struct {
	// MaxFrame is the longest payload accepted. Zero or less means
	// DefaultMaxFrame. Set it before the first Feed.
	MaxFrame int

	hdr  [HeaderLen]byte // a header in pieces; read only while nhdr < HeaderLen
	nhdr int             // header bytes held; HeaderLen once need is known
	need int             // the pending frame's payload length
	buf  []byte          // the pending frame's payload so far
	err  error
}

func (d *LengthDecoder) limit() int {
	if d.MaxFrame <= 0 {
		return DefaultMaxFrame
	}
	return d.MaxFrame
}

// Feed hands every payload that data completes to emit (see Decoder.Feed).
// A payload that arrived whole in data is a slice of data; one that arrived
// in pieces is a slice of the decoder's buffer. Either is valid only during
// emit. A header declaring more than MaxFrame is rejected with a
// *TooLongError at once, before any of the payload is buffered; the buffer
// of a frame in pieces grows with the bytes that arrive, not with the
// length the header declared. After an error the decoder is poisoned.
func (d *LengthDecoder) Feed(data []byte, emit func(payload []byte) bool) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	limit := d.limit()
	n := 0
	if d.nhdr > 0 {
		k, frame, err := d.resume(data, limit)
		if err != nil || frame == nil {
			return k, err
		}
		n = k
		more := emit(frame)
		d.nhdr, d.buf = 0, recycle(d.buf)
		if !more {
			return n, nil
		}
	}
	for n < len(data) {
		rest := data[n:]
		if len(rest) < HeaderLen {
			d.nhdr = copy(d.hdr[:], rest)
			return len(data), nil
		}
		size := binary.BigEndian.Uint32(rest)
		if uint64(size) > uint64(limit) {
			return n, d.fail(limit, int(size))
		}
		end := HeaderLen + int(size)
		if end > len(rest) {
			d.nhdr, d.need = HeaderLen, int(size)
			d.buf = appendBounded(d.buf, rest[HeaderLen:], d.need)
			return len(data), nil
		}
		n += end
		if !emit(rest[HeaderLen:end]) {
			return n, nil
		}
	}
	return n, nil
}

// resume continues the frame whose header (or part of it) arrived earlier.
// It returns how many bytes of data it took and, once the frame is
// complete, its payload (a slice of data when the payload came whole after
// a split header, else of the buffer; never nil).
func (d *LengthDecoder) resume(data []byte, limit int) (int, []byte, error) {
	n := 0
	if d.nhdr < HeaderLen {
		n = copy(d.hdr[d.nhdr:], data)
		d.nhdr += n
		if d.nhdr < HeaderLen {
			return n, nil, nil
		}
		size := binary.BigEndian.Uint32(d.hdr[:])
		if uint64(size) > uint64(limit) {
			return n, nil, d.fail(limit, int(size))
		}
		d.need = int(size)
		if rest := data[n:]; len(rest) >= d.need {
			return n + d.need, rest[:d.need:d.need], nil
		}
	}
	k := min(d.need-len(d.buf), len(data)-n)
	d.buf = appendBounded(d.buf, data[n:n+k], d.need)
	n += k
	if len(d.buf) < d.need {
		return n, nil, nil
	}
	return n, d.buf, nil
}

// Buffered returns how many bytes of an incomplete frame (header and
// payload) the decoder holds; never more than HeaderLen+MaxFrame.
func (d *LengthDecoder) Buffered() int {
	if d.nhdr < HeaderLen {
		return d.nhdr
	}
	return HeaderLen + len(d.buf)
}

// Reset drops a partial frame and the error, and releases the buffer.
func (d *LengthDecoder) Reset() { *d = LengthDecoder{MaxFrame: d.MaxFrame} }

// fail poisons the decoder and releases its buffer.
func (d *LengthDecoder) fail(limit, got int) error {
	d.nhdr, d.need, d.buf = 0, 0, nil
	d.err = &TooLongError{Limit: limit, Got: got}
	return d.err
}

// AppendFrame appends payload with its header to dst and returns the
// extended slice, for clients and tests that build a stream of frames. It
// panics if payload is longer than math.MaxUint32, which no header can
// declare.
func AppendFrame(dst, payload []byte) []byte {
	if uint64(len(payload)) > math.MaxUint32 {
		panic("frame: payload longer than a 4-byte header can declare")
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}
