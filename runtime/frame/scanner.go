//go:build linux

package frame

import (
	"bytes"
	"math"
)

// Scanner is a split function that keeps its progress through a partial
// token between calls, so that a token that arrives in many pieces is
// examined once rather than again from its start at every piece (issue 23;
// docs/decisions/0029-parsers-keep-their-progress.md). A stateless
// bufio.SplitFunc given a held partial token examines it all again each
// time a read adds to it: a line trickled a byte at a time up to a 64 KiB
// limit costs 2 GB of searching.
//
// Scan has bufio.SplitFunc's contract, and one guarantee more, which this
// package's splitters (and bufio.Scanner) keep: after a call that asked for
// more (it returned 0, nil, nil), the next call's data begins with that
// call's data, unchanged (not necessarily at the same address), unless
// Reset came in between. So a Scanner may resume where it stopped. After
// any other answer (a token, a skip, an error) it starts afresh.
//
// A Scanner belongs to one stream (one connection): Split and Lines make
// one per connection (SplitConfig.Scanner), a Splitter or a LineDecoder
// holds its own. NewLineScanner is Lines' and LineDecoder's;
// runtime/frame/resp has ReplyScanner for Redis replies.
type Scanner interface {
	Scan(data []byte, atEOF bool) (advance int, token []byte, err error)
	// Reset forgets the progress: the next call's data starts a token.
	Reset()
}

// LineScanner is ScanLines as a Scanner: it remembers how far it has
// searched a partial line for its '\n', so that a line that arrives in
// pieces is searched once. Its tokens, limit and errors are ScanLines'.
// Scanned counts the bytes it examined.
type LineScanner struct {
	max      int
	searched int // bytes of the partial line at the start of data known to hold no '\n'
	scanned  int64
}

// NewLineScanner returns a LineScanner for lines of at most max bytes
// before the '\n' (ScanLines' limit: zero means DefaultMaxLine, a negative
// max means no limit).
func NewLineScanner(max int) *LineScanner { return &LineScanner{max: limitOf(max, DefaultMaxLine)} }

// Scan is ScanLines' split function, resuming the search for the '\n'
// where the last call that asked for more stopped.
func (s *LineScanner) Scan(data []byte, _ bool) (int, []byte, error) {
	from := s.searched
	if from > len(data) {
		from = 0 // not the stream the progress was made on
	}
	w := data[:min(len(data), s.max+1)]
	if from < len(w) {
		if i := bytes.IndexByte(w[from:], '\n'); i >= 0 {
			s.scanned += int64(i + 1)
			s.searched = 0
			i += from
			return i + 1, trimCR(data[:i]), nil
		}
		s.scanned += int64(len(w) - from)
	}
	if len(data) > s.max {
		s.searched = 0
		return 0, nil, &TooLongError{Limit: s.max, Got: lineLen(data)}
	}
	s.searched = len(data)
	return 0, nil, nil
}

// Reset forgets how far a partial line was searched.
func (s *LineScanner) Reset() { s.searched = 0 }

// Scanned returns how many bytes the scanner has examined since it was
// made (Reset does not clear it): about a line's length for every line,
// however it arrived. Tests read it to tell a linear split from a
// quadratic one.
func (s *LineScanner) Scanned() int64 { return s.scanned }

// noLimit is what a negative limit means: none. It is far below
// math.MaxInt, so that a limit plus a header's few bytes cannot overflow.
const noLimit = math.MaxInt / 2

// limitOf applies the package's zero-value rule to a limit: zero means def,
// a negative value means no limit.
func limitOf(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return noLimit
	}
	return min(v, noLimit)
}
