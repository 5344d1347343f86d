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
// replies. Zero or negative fields mean their defaults.
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

func (l ReplyLimits) withDefaults() ReplyLimits {
	if l.MaxBulk <= 0 {
		l.MaxBulk = DefaultMaxBulk
	}
	if l.MaxElements <= 0 {
		l.MaxElements = DefaultMaxArgs
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	l.MaxDepth = min(l.MaxDepth, maxDepth)
	if l.MaxLine <= 0 {
		l.MaxLine = DefaultMaxLine
	}
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

// scanReply returns the length of the reply at the start of data (0:
// incomplete).
func scanReply(data []byte, lim *ReplyLimits) (int, error) {
	var left [maxDepth + 1]int // values still to read, by depth
	depth := 0
	left[0] = 1
	i := 0
	for depth >= 0 {
		if left[depth] == 0 {
			depth--
			continue
		}
		left[depth]--
		if i >= len(data) {
			return 0, nil
		}
		switch t := data[i]; t {
		case '+', '-', ',', '(', '_', '#':
			w := data[i:min(len(data), i+1+lim.MaxLine+2)] // type, line, "\r\n"
			j := bytes.IndexByte(w, '\n')
			if j < 0 {
				if len(w) == 1+lim.MaxLine+2 || len(w) > 1+lim.MaxLine && w[1+lim.MaxLine] != '\r' {
					return 0, &ProtocolError{"too big reply line"}
				}
				return 0, nil
			}
			if data[i+j-1] != '\r' {
				return 0, &ProtocolError{"expected '\\r\\n' after a reply line"}
			}
			switch line := data[i+1 : i+j-1]; {
			case t == '_' && len(line) != 0:
				return 0, &ProtocolError{"invalid null reply"}
			case t == '#' && (len(line) != 1 || line[0] != 't' && line[0] != 'f'):
				return 0, &ProtocolError{"invalid boolean reply"}
			}
			i += j + 1
		case ':':
			_, next, st := header(data, i)
			switch st {
			case incomplete:
				return 0, nil
			case malformed:
				return 0, &ProtocolError{"invalid integer reply"}
			}
			i = next
		case '$', '!', '=':
			size, next, st := header(data, i)
			switch {
			case st == incomplete:
				return 0, nil
			case st == malformed || size < -1 || size == -1 && t != '$' || size > int64(lim.MaxBulk):
				return 0, errBulkLen
			case size == -1:
				i = next
				continue
			}
			end := next + int(size)
			if end+2 > len(data) {
				return 0, nil
			}
			if data[end] != '\r' || data[end+1] != '\n' {
				return 0, errBulkEnd
			}
			i = end + 2
		case '*', '%', '~', '>', '|':
			count, next, st := header(data, i)
			switch {
			case st == incomplete:
				return 0, nil
			case st == malformed || count < -1 || count == -1 && t != '*' || count > int64(lim.MaxElements):
				return 0, errMultibulkLen
			}
			i = next
			if t == '%' || t == '|' {
				count *= 2
			}
			if t == '|' {
				left[depth]++ // the value the attribute describes
			}
			if count <= 0 {
				continue
			}
			if depth+1 > lim.MaxDepth {
				return 0, &ProtocolError{fmt.Sprintf("arrays nested deeper than %d", lim.MaxDepth)}
			}
			depth++
			left[depth] = int(count)
		default:
			return 0, &ProtocolError{fmt.Sprintf("expected a reply type, got '%c'", data[i])}
		}
	}
	return i, nil
}
