package resp

import (
	"bufio"
	"bytes"
	"fmt"
)

// Reply limits' defaults.
const (
	// DefaultMaxDepth is how deep arrays may nest in a reply (an array in
	// an array is depth 2).
	DefaultMaxDepth = 16
	// DefaultMaxLine is the longest simple string, error or integer line
	// of a reply, in bytes before its "\r\n".
	DefaultMaxLine = 64 << 10
	// maxDepth bounds ReplyLimits.MaxDepth: the parser's stack is an array.
	maxDepth = 64
)

// ReplyLimits bound a reply, for a client or a proxy reading a server's
// replies. A field's zero value means its default (DefaultReplyLimits) and
// a negative one means no limit (for MaxDepth: the most the parser allows,
// 64).
type ReplyLimits struct {
	// MaxBulk is the longest bulk string (DefaultMaxBulk).
	MaxBulk int
	// MaxElements is the most elements of one array (DefaultMaxArgs).
	MaxElements int
	// MaxDepth is how deep arrays may nest (DefaultMaxDepth; at most 64).
	MaxDepth int
	// MaxLine is the longest simple string, error or integer
	// (DefaultMaxLine).
	MaxLine int
}

// DefaultReplyLimits are the limits of the zero ReplyLimits.
var DefaultReplyLimits = ReplyLimits{MaxBulk: DefaultMaxBulk, MaxElements: DefaultMaxArgs, MaxDepth: DefaultMaxDepth, MaxLine: DefaultMaxLine}

func (l ReplyLimits) withDefaults() ReplyLimits {
	l.MaxBulk = limitOf(l.MaxBulk, DefaultMaxBulk)
	l.MaxElements = limitOf(l.MaxElements, DefaultMaxArgs)
	l.MaxDepth = min(limitOf(l.MaxDepth, DefaultMaxDepth), maxDepth)
	l.MaxLine = limitOf(l.MaxLine, DefaultMaxLine)
	return l
}

// ScanReply returns a split function whose tokens are whole replies, raw,
// of RESP2 and RESP3 (what a server sends after HELLO 3): a simple string,
// an error, an integer, a bulk string (or null) or an array of any of them
// (or null); and RESP3's null ("_"), boolean ("#t", "#f"), double (","),
// big number ("("), blob error ("!"), verbatim string ("="), map ("%", n
// pairs), set ("~"), push (">") and attribute ("|", n pairs and then the
// value they describe). Aggregates nest at most lim.MaxDepth deep; a map
// or an attribute of n pairs counts as n elements for MaxElements. It is
// what upstream.Exchange and a proxy need to read replies from a Redis
// server. An error is a *ProtocolError.
func ScanReply(lim ReplyLimits) bufio.SplitFunc {
	lim = lim.withDefaults()
	return func(data []byte, atEOF bool) (int, []byte, error) {
		n, err := scanReply(data, &lim)
		if err != nil || n == 0 {
			return 0, nil, err
		}
		return n, data[:n:n], nil
	}
}

// ReplyScanner is ScanReply as a frame.Scanner: it keeps where it is in a
// partial reply (the values still to read at each depth, and the start of
// the value at hand), so that a reply that arrives in many reads is walked
// once instead of again from its first byte at every read; a long line is
// searched once too. Give one to a frame.Splitter, a frame.Split
// (SplitConfig.Scanner) or an upstream.Exchange (ExchangeConfig.Scanner):
// it belongs to one stream. Its tokens, limits and errors are ScanReply's.
type ReplyScanner struct {
	lim     ReplyLimits
	st      replyState
	scanned int64
}

// NewReplyScanner returns a ReplyScanner with the limits lim.
func NewReplyScanner(lim ReplyLimits) *ReplyScanner {
	s := &ReplyScanner{lim: lim.withDefaults()}
	s.st.reset()
	return s
}

// Scan is ScanReply's split function, resuming where the last call that
// asked for more stopped.
func (s *ReplyScanner) Scan(data []byte, _ bool) (int, []byte, error) {
	if s.st.i > len(data) {
		s.st.reset() // not the stream the progress was made on
	}
	n, err := s.st.scan(data, &s.lim, &s.scanned)
	if err != nil || n == 0 {
		if err != nil {
			s.st.reset()
		}
		return 0, nil, err
	}
	s.st.reset()
	return n, data[:n:n], nil
}

// Reset forgets the progress through a partial reply.
func (s *ReplyScanner) Reset() { s.st.reset() }

// Scanned returns how many bytes the scanner has examined since it was
// made (Reset does not clear it); a bulk string's payload, whose length
// its header gives, counts without being read. Tests read it to tell a
// linear scan from a quadratic one.
func (s *ReplyScanner) Scanned() int64 { return s.scanned }

// replyState is where a scan of a reply is: the values still to read at
// each depth, and the start of the next one (i) with how much of its line
// is known to hold no '\n' (line).
type replyState struct {
	left  [maxDepth + 1]int
	depth int
	i     int
	line  int
}

func (st *replyState) reset() {
	st.depth, st.i, st.line = 0, 0, 0
	st.left[0] = 1
}

// scanReply returns the length of the reply at the start of data (0:
// incomplete).
func scanReply(data []byte, lim *ReplyLimits) (int, error) {
	var st replyState
	st.reset()
	var scanned int64
	return st.scan(data, lim, &scanned)
}

// scan reads on from st: it returns the reply's length once it is whole,
// 0 while it is partial, with st at the start of the first value not yet
// whole; it adds the bytes it examined to scanned.
func (st *replyState) scan(data []byte, lim *ReplyLimits, scanned *int64) (int, error) {
	for st.depth >= 0 {
		if st.left[st.depth] == 0 {
			st.depth--
			continue
		}
		i := st.i
		if i >= len(data) {
			return 0, nil
		}
		t := data[i]
		var next int // where the value ends (a whole scalar) or its header does (an aggregate)
		count := int64(0)
		switch t {
		case '+', '-', ',', '(', '_', '#':
			w := data[i:min(len(data), i+1+lim.MaxLine+2)] // type, line, "\r\n"
			from := min(st.line, len(w))
			j := bytes.IndexByte(w[from:], '\n')
			if j < 0 {
				*scanned += int64(len(w) - from)
				if len(w) == 1+lim.MaxLine+2 || len(w) > 1+lim.MaxLine && w[1+lim.MaxLine] != '\r' {
					return 0, &ProtocolError{"too big reply line"}
				}
				st.line = len(w)
				return 0, nil
			}
			j += from
			*scanned += int64(j + 1 - from)
			st.line = 0
			if data[i+j-1] != '\r' {
				return 0, &ProtocolError{"expected '\\r\\n' after a reply line"}
			}
			switch line := data[i+1 : i+j-1]; {
			case t == '_' && len(line) != 0:
				return 0, &ProtocolError{"invalid null reply"}
			case t == '#' && (len(line) != 1 || line[0] != 't' && line[0] != 'f'):
				return 0, &ProtocolError{"invalid boolean reply"}
			}
			next = i + j + 1
		case ':':
			_, end, state := header(data, i)
			switch state {
			case incomplete:
				*scanned += int64(len(data) - i)
				return 0, nil
			case malformed:
				return 0, &ProtocolError{"invalid integer reply"}
			}
			*scanned += int64(end - i)
			next = end
		case '$', '!', '=':
			size, end, state := header(data, i)
			switch {
			case state == incomplete:
				*scanned += int64(len(data) - i)
				return 0, nil
			case state == malformed || size < -1 || size == -1 && t != '$' || size > int64(lim.MaxBulk):
				return 0, errBulkLen
			}
			next = end
			if size >= 0 {
				next = end + int(size) + 2
				if next > len(data) {
					return 0, nil // the header is read again when the payload is in: a few bytes
				}
				if data[next-2] != '\r' || data[next-1] != '\n' {
					return 0, errBulkEnd
				}
			}
			*scanned += int64(end-i) + 2
		case '*', '%', '~', '>', '|':
			n, end, state := header(data, i)
			switch {
			case state == incomplete:
				*scanned += int64(len(data) - i)
				return 0, nil
			case state == malformed || n < -1 || n == -1 && t != '*' || n > int64(lim.MaxElements):
				return 0, errMultibulkLen
			}
			*scanned += int64(end - i)
			next, count = end, n
			if t == '%' || t == '|' {
				count *= 2
			}
		default:
			return 0, &ProtocolError{fmt.Sprintf("expected a reply type, got '%c'", data[i])}
		}
		// The value is whole (an aggregate: its header): the next starts
		// after it.
		st.left[st.depth]--
		st.i = next
		if t == '|' {
			st.left[st.depth]++ // the value the attribute describes
		}
		if count > 0 {
			if st.depth+1 > lim.MaxDepth {
				return 0, &ProtocolError{fmt.Sprintf("arrays nested deeper than %d", lim.MaxDepth)}
			}
			st.depth++
			st.left[st.depth] = int(count)
		}
	}
	return st.i, nil
}
