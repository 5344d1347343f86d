//go:build linux

package frame

import (
	"bufio"
	"bytes"
)

// DefaultMaxLine is the line limit of a LineDecoder whose MaxLine is zero:
// 64 KiB. (A negative MaxLine means no limit.)
const DefaultMaxLine = 64 << 10

// ScanLines returns a split function for lines ending in '\n', the one
// LineDecoder and Lines use. A token is a line without its '\n' and a '\r'
// just before it. A line longer than max bytes (every byte before the
// '\n', a '\r' included; zero means DefaultMaxLine, negative no limit)
// is a *TooLongError as soon as more than max of its bytes are there, so
// that a splitter never needs to hold more than max bytes. Unlike
// bufio.ScanLines, a last line without its '\n' at the end of the stream is
// not a token.
//
// It keeps no state, so it searches a partial line from its start at every
// call: a line that arrives in many reads costs the square of its length.
// A LineScanner (what Lines and LineDecoder use) searches it once.
func ScanLines(max int) bufio.SplitFunc {
	max = limitOf(max, DefaultMaxLine)
	return func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data[:min(len(data), max+1)], '\n'); i >= 0 {
			return i + 1, trimCR(data[:i]), nil
		}
		if len(data) > max {
			return 0, nil, &TooLongError{Limit: max, Got: lineLen(data)}
		}
		return 0, nil, nil
	}
}

// LineDecoder splits a stream into lines with a LineScanner. A line ends with
// '\n'; the '\n', and a '\r' just before it, are not part of the line
// delivered. The zero value is ready to use, with the default limit. A
// LineDecoder is used on one goroutine at a time (a connection's loop
// thread).
type LineDecoder struct {
	// MaxLine is the longest line accepted, counting every byte before
	// the '\n' (a '\r' included). Zero means DefaultMaxLine; negative
	// means no limit. Set it before the first Feed.
	MaxLine int

	split bufio.SplitFunc // a LineScanner's Scan, made at the first Feed
	tail
}

func (d *LineDecoder) limit() int { return limitOf(d.MaxLine, DefaultMaxLine) }

// Feed hands every line that data completes to emit (see Decoder.Feed). A
// line that arrived whole in data is a slice of data; one that arrived in
// pieces is a slice of the decoder's buffer. Either is valid only during
// emit. A line is rejected with a *TooLongError as soon as more than MaxLine
// of its bytes have arrived without a '\n', so the decoder never holds more
// than MaxLine bytes. After an error the decoder is poisoned.
func (d *LineDecoder) Feed(data []byte, emit func(line []byte) bool) (int, error) {
	if d.split == nil {
		sc := NewLineScanner(d.limit())
		d.tail.scanner, d.split = sc, sc.Scan
	}
	return d.feed(data, d.split, d.limit(), emit)
}

// Buffered returns how many bytes of a line whose end has not arrived the
// decoder holds; never more than MaxLine.
func (d *LineDecoder) Buffered() int { return d.held() }

// Reset drops a partial line and the error, and releases the buffer.
func (d *LineDecoder) Reset() { d.reset() }

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
