//go:build linux

package frame

import (
	"bufio"
	"encoding/binary"
	"math"
)

// HeaderLen is the length of a length-prefixed frame's header: the
// payload's length as a 4-byte big-endian unsigned integer.
const HeaderLen = 4

// DefaultMaxFrame is the payload limit of a LengthDecoder whose MaxFrame is
// zero: 8 MiB (Tokio's LengthDelimitedCodec default). (A negative MaxFrame
// means no limit beyond the header's 4 GiB.)
const DefaultMaxFrame = 8 << 20

// ScanLengthPrefixed returns a split function for length-prefixed frames,
// the one LengthDecoder and LengthPrefixed use: each frame is a
// HeaderLen-byte big-endian payload length followed by the payload, and a
// token is the payload. A header declaring more than max bytes (zero means
// DefaultMaxFrame, negative no limit) is a *TooLongError at once, before
// any of the payload is needed.
func ScanLengthPrefixed(max int) bufio.SplitFunc {
	max = limitOf(max, DefaultMaxFrame)
	return func(data []byte, atEOF bool) (int, []byte, error) {
		if len(data) < HeaderLen {
			return 0, nil, nil
		}
		size := binary.BigEndian.Uint32(data)
		if uint64(size) > uint64(max) {
			return 0, nil, &TooLongError{Limit: max, Got: int(size)}
		}
		end := HeaderLen + int(size)
		if len(data) < end {
			return 0, nil, nil
		}
		return end, data[HeaderLen:end:end], nil
	}
}

// LengthDecoder splits a stream of length-prefixed frames with
// ScanLengthPrefixed: each frame is a HeaderLen-byte big-endian payload
// length followed by the payload. It delivers payloads, without their
// header. The zero value is ready to use, with the default limit. A
// LengthDecoder is used on one goroutine at a time (a connection's loop
// thread).
type LengthDecoder struct {
	// MaxFrame is the longest payload accepted. Zero means
	// DefaultMaxFrame; negative means no limit. Set it before the first
	// Feed.
	MaxFrame int

	split bufio.SplitFunc // ScanLengthPrefixed(MaxFrame), made at the first Feed
	tail
}

func (d *LengthDecoder) limit() int { return limitOf(d.MaxFrame, DefaultMaxFrame) }

// Feed hands every payload that data completes to emit (see Decoder.Feed).
// A payload that arrived whole in data is a slice of data; one that arrived
// in pieces is a slice of the decoder's buffer. Either is valid only during
// emit. A header declaring more than MaxFrame is rejected with a
// *TooLongError at once, before any of the payload is buffered; the buffer
// of a frame in pieces grows with the bytes that arrive, not with the
// length the header declared. After an error the decoder is poisoned.
func (d *LengthDecoder) Feed(data []byte, emit func(payload []byte) bool) (int, error) {
	if d.split == nil {
		d.split = ScanLengthPrefixed(d.limit())
	}
	return d.feed(data, d.split, HeaderLen+d.limit(), emit)
}

// Buffered returns how many bytes of an incomplete frame (header and
// payload) the decoder holds; never more than HeaderLen+MaxFrame.
func (d *LengthDecoder) Buffered() int { return d.held() }

// Reset drops a partial frame and the error, and releases the buffer.
func (d *LengthDecoder) Reset() { d.reset() }

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
