//go:build linux

package frame

import "bytes"

// DefaultMaxLine is the line limit of a LineDecoder whose MaxLine is zero:
// 64 KiB.
const DefaultMaxLine = 64 << 10

// LineDecoder splits a stream into lines. A line ends with '\n'; the '\n',
// and a '\r' just before it, are not part of the line delivered. The zero
// value is ready to use, with the default limit. A LineDecoder is used on
// one goroutine at a time (a connection's loop thread).
type LineDecoder struct {
	// MaxLine is the longest line accepted, counting every byte before
	// the '\n' (a '\r' included). Zero or less means DefaultMaxLine. Set
	// it before the first Feed.
	MaxLine int

	buf []byte // the start of a line whose end has not arrived
	err error
}

func (d *LineDecoder) limit() int {
	if d.MaxLine <= 0 {
		return DefaultMaxLine
	}
	return d.MaxLine
}

// Feed hands every line that data completes to emit (see Decoder.Feed). A
// line that arrived whole in data is a slice of data; one that arrived in
// pieces is a slice of the decoder's buffer. Either is valid only during
// emit. A line is rejected with a *TooLongError as soon as more than MaxLine
// of its bytes have arrived without a '\n', so the decoder never holds more
// than MaxLine bytes. After an error the decoder is poisoned.
func (d *LineDecoder) Feed(data []byte, emit func(line []byte) bool) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	limit := d.limit()
	n := 0
	if len(d.buf) > 0 {
		// Complete the pending line, looking for its end only as far as
		// the limit allows.
		room := limit - len(d.buf)
		i := bytes.IndexByte(data[:min(len(data), room+1)], '\n')
		if i < 0 {
			if len(d.buf)+len(data) > limit {
				return 0, d.fail(limit, len(d.buf)+lineLen(data))
			}
			d.buf = appendBounded(d.buf, data, limit)
			return len(data), nil
		}
		d.buf = appendBounded(d.buf, data[:i], limit)
		n = i + 1
		more := emit(trimCR(d.buf))
		d.buf = recycle(d.buf)
		if !more {
			return n, nil
		}
	}
	for n < len(data) {
		rest := data[n:]
		i := bytes.IndexByte(rest[:min(len(rest), limit+1)], '\n')
		if i < 0 {
			if len(rest) > limit {
				return n, d.fail(limit, lineLen(rest))
			}
			d.buf = appendBounded(d.buf, rest, limit)
			return len(data), nil
		}
		n += i + 1
		if !emit(trimCR(rest[:i])) {
			return n, nil
		}
	}
	return n, nil
}

// Buffered returns how many bytes of a line whose end has not arrived the
// decoder holds; never more than MaxLine.
func (d *LineDecoder) Buffered() int { return len(d.buf) }

// Reset drops a partial line and the error, and releases the buffer.
func (d *LineDecoder) Reset() { d.buf, d.err = nil, nil }

// fail poisons the decoder and releases its buffer.
func (d *LineDecoder) fail(limit, got int) error {
	d.buf = nil
	d.err = &TooLongError{Limit: limit, Got: got}
	return d.err
}

// lineLen returns the length of the line at the start of p: up to its '\n',
// or all of p.
func lineLen(p []byte) int {
	if i := bytes.IndexByte(p, '\n'); i >= 0 {
		return i
	}
	return len(p)
}

func trimCR(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		return line[:n-1]
	}
	return line
}
