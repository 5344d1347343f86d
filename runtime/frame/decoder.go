//go:build linux

package frame

import (
	"errors"
	"fmt"
)

// Decoder is what LineDecoder and LengthDecoder have in common: a splitter
// of one connection's byte stream into frames.
type Decoder interface {
	// Feed hands every frame completed by data to emit, in order, and
	// keeps the start of an incomplete frame for the next call. It stops
	// early when emit returns false and returns how many bytes of data it
	// consumed: len(data) unless emit stopped it, in which case the bytes
	// after the last delivered frame are left to the caller (feed them
	// again to continue, or drop them). A frame over the limit is an
	// error (a *TooLongError); frames before it were delivered.
	Feed(data []byte, emit func(frame []byte) bool) (int, error)
	// Buffered returns how many bytes of an incomplete frame the decoder
	// holds.
	Buffered() int
	// Reset drops any incomplete frame and the error, and releases the
	// buffer.
	Reset()
}

// ErrTooLong is the error a frame over its limit matches (errors.Is); the
// error itself is a *TooLongError.
var ErrTooLong = errors.New("frame too long")

// TooLongError reports a frame over the limit.
type TooLongError struct {
	// Limit is the decoder's limit in bytes.
	Limit int
	// Got is the frame's length: the length a header declared, or a
	// line's length when its end had arrived; otherwise how many of the
	// line's bytes had arrived when it was rejected (the line is at least
	// that long).
	Got int
}

// Error returns "frame too long: GOT bytes, limit LIMIT".
func (e *TooLongError) Error() string {
	return fmt.Sprintf("%v: %d bytes, limit %d", ErrTooLong, e.Got, e.Limit)
}

// Unwrap returns ErrTooLong.
func (e *TooLongError) Unwrap() error { return ErrTooLong }

const (
	// minBuffer is the first size of a buffer for a partial token.
	minBuffer = 512
	// retainBuffer is the largest buffer a decoder keeps once its token
	// has been delivered; larger ones go back to the collector.
	retainBuffer = 4 << 10
)
