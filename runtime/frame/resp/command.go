package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Redis's own limits, the defaults of Limits.
const (
	// DefaultMaxArgs is the most arguments of a command (Redis's 1024*1024).
	DefaultMaxArgs = 1 << 20
	// DefaultMaxBulk is the longest argument (Redis's proto-max-bulk-len,
	// 512 MiB).
	DefaultMaxBulk = 512 << 20
	// DefaultMaxInline is the longest inline command line (Redis's
	// PROTO_INLINE_MAX_SIZE, 64 KiB).
	DefaultMaxInline = 64 << 10
)

// Limits bound a command. A field's zero value means its default (so the
// zero Limits is Redis's limits, DefaultLimits) and a negative one means
// no limit.
type Limits struct {
	// MaxArgs is the most arguments of a command, its name included.
	MaxArgs int
	// MaxBulk is the longest argument of an array command, in bytes.
	MaxBulk int
	// MaxInline is the longest inline command, in bytes before its '\n'.
	MaxInline int
}

// DefaultLimits are the limits of the zero Limits: Redis's own.
var DefaultLimits = Limits{MaxArgs: DefaultMaxArgs, MaxBulk: DefaultMaxBulk, MaxInline: DefaultMaxInline}

func (l Limits) withDefaults() Limits {
	l.MaxArgs = limitOf(l.MaxArgs, DefaultMaxArgs)
	l.MaxBulk = limitOf(l.MaxBulk, DefaultMaxBulk)
	l.MaxInline = limitOf(l.MaxInline, DefaultMaxInline)
	return l
}

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

// ErrProtocol is what every *ProtocolError matches (errors.Is).
var ErrProtocol = errors.New("resp: protocol error")

// ProtocolError is a malformed command, or one over the limits. Its Error
// is Redis's text for the same fault: "Protocol error: " and Reason.
type ProtocolError struct {
	Reason string // "invalid bulk length", "expected '$', got '*'", ...
}

// Error returns "Protocol error: " followed by the reason.
func (e *ProtocolError) Error() string { return "Protocol error: " + e.Reason }

// Unwrap returns ErrProtocol.
func (e *ProtocolError) Unwrap() error { return ErrProtocol }

var (
	errMultibulkLen = &ProtocolError{"invalid multibulk length"}
	errBulkLen      = &ProtocolError{"invalid bulk length"}
	errBulkEnd      = &ProtocolError{"expected '\\r\\n' after a bulk string"}
	errInline       = &ProtocolError{"too big inline request"}
)

// ScanCommand returns a split function whose tokens are whole commands,
// raw: an array of bulk strings from its '*' to its last "\r\n", or an
// inline command's line with its "\r\n" (or "\n"). Empty commands are
// skipped. Read a token's arguments with Args. An error is a
// *ProtocolError; a partial command at the end of the stream is dropped.
func ScanCommand(lim Limits) bufio.SplitFunc {
	lim = lim.withDefaults()
	return func(data []byte, atEOF bool) (int, []byte, error) {
		n, argc, err := parse(data, &lim, nil)
		switch {
		case err != nil || n == 0:
			return 0, nil, err
		case argc == 0:
			return n, nil, nil
		}
		return n, data[:n:n], nil
	}
}

// Args appends the arguments of cmd, a token of ScanCommand, to dst and
// returns the extended slice. The arguments are slices of cmd. It returns
// dst unchanged if cmd is not a complete, well-formed command.
func Args(dst [][]byte, cmd []byte) [][]byte {
	start := len(dst)
	n, _, err := parse(cmd, &noLimits, &dst)
	if n == 0 || err != nil {
		return dst[:start]
	}
	return dst
}

var noLimits = Limits{MaxArgs: 1<<31 - 1, MaxBulk: 1<<31 - 1, MaxInline: 1<<31 - 1}

// Parse reads the command at the start of data in place: it appends the
// command's arguments (slices of data) to dst and returns them with the
// number of bytes the command took. n is 0 when data holds only the start
// of a command. An empty command takes its bytes and has no arguments. An
// error is a *ProtocolError. Parse starts from data[0] at every call: a
// server whose commands may arrive in pieces uses a Parser, which reads
// each byte once however many pieces a command takes.
func Parse(dst [][]byte, data []byte, lim Limits) (args [][]byte, n int, err error) {
	lim = lim.withDefaults()
	start := len(dst)
	n, _, err = parse(data, &lim, &dst)
	if n == 0 || err != nil {
		return dst[:start], 0, err
	}
	return dst, n, nil
}

// parse reads the command at the start of data: the bytes it takes (0:
// incomplete) and its number of arguments, appended to *args when args is
// not nil.
func parse(data []byte, lim *Limits, args *[][]byte) (n, argc int, err error) {
	if len(data) == 0 {
		return 0, 0, nil
	}
	if data[0] != '*' {
		return parseInline(data, lim, args)
	}
	count, i, st := header(data, 0)
	switch {
	case st == incomplete:
		return 0, 0, nil
	case st == malformed || count > int64(lim.MaxArgs):
		return 0, 0, errMultibulkLen
	case count <= 0:
		return i, 0, nil
	}
	start := 0
	if args != nil {
		start = len(*args)
		// Room for the arguments at once, as many as the bytes there
		// can hold (an argument takes at least 6), not as many as the
		// count claims.
		*args = slices.Grow(*args, int(min(count, int64(len(data)-i)/6+1)))
	}
	for range count {
		if i >= len(data) {
			return cut(args, start)
		}
		if data[i] != '$' {
			return 0, 0, &ProtocolError{fmt.Sprintf("expected '$', got '%c'", data[i])}
		}
		size, j, st := header(data, i)
		switch {
		case st == incomplete:
			return cut(args, start)
		case st == malformed || size < 0 || size > int64(lim.MaxBulk):
			return 0, 0, errBulkLen
		}
		end := j + int(size)
		if end+2 > len(data) {
			return cut(args, start)
		}
		if data[end] != '\r' || data[end+1] != '\n' {
			return 0, 0, errBulkEnd
		}
		if args != nil {
			*args = append(*args, data[j:end:end])
		}
		i = end + 2
	}
	return i, int(count), nil
}

// cut drops the arguments of an incomplete command.
func cut(args *[][]byte, start int) (int, int, error) {
	if args != nil {
		*args = (*args)[:start]
	}
	return 0, 0, nil
}

// parseInline reads an inline command: a line of words.
func parseInline(data []byte, lim *Limits, args *[][]byte) (n, argc int, err error) {
	i := bytes.IndexByte(data[:min(len(data), lim.MaxInline+1)], '\n')
	if i < 0 {
		if len(data) > lim.MaxInline {
			return 0, 0, errInline
		}
		return 0, 0, nil
	}
	line := data[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	for len(line) > 0 {
		k := 0
		for k < len(line) && (line[k] == ' ' || line[k] == '\t') {
			k++
		}
		line = line[k:]
		if len(line) == 0 {
			break
		}
		k = 0
		for k < len(line) && line[k] != ' ' && line[k] != '\t' {
			k++
		}
		if argc++; argc > lim.MaxArgs {
			return 0, 0, errMultibulkLen
		}
		if args != nil {
			*args = append(*args, line[:k:k])
		}
		line = line[k:]
	}
	return i + 1, argc, nil
}

// A header's state.
const (
	complete = iota
	incomplete
	malformed
)

// maxDigits is the most digits of a count or a length: 18 always fit an
// int64.
const maxDigits = 18

// header reads "<type><integer>\r\n" at data[i:]: the integer and the
// index after its "\r\n".
func header(data []byte, i int) (v int64, next int, state int) {
	j := i + 1
	neg := j < len(data) && data[j] == '-'
	if neg {
		j++
	}
	start := j
	for ; j < len(data) && data[j] >= '0' && data[j] <= '9'; j++ {
		if j-start == maxDigits {
			return 0, 0, malformed
		}
		v = v*10 + int64(data[j]-'0')
	}
	switch {
	case j == len(data):
		return 0, 0, incomplete
	case j == start || data[j] != '\r':
		return 0, 0, malformed
	case j+1 == len(data):
		return 0, 0, incomplete
	case data[j+1] != '\n':
		return 0, 0, malformed
	}
	if neg {
		v = -v
	}
	return v, j + 2, complete
}
