package resp

import (
	"bytes"
	"fmt"
	"slices"
)

// Parser reads commands in place, as Parse does, and keeps its progress
// through a partial command between calls, as Redis keeps a client's
// multibulklen and bulklen: a command that arrives in many pieces is read
// once, not again from its start at every piece, so its cost is linear in
// its size whatever the pieces.
//
// Its contract is frame.View's: each call's data begins with the bytes the
// last call was shown and did not take. After a call that returns a
// command (n > 0) the next call's data starts after that command; after
// one that returns n == 0 (a partial command) it starts with the same
// partial command, followed by whatever arrived since. Reset forgets the
// progress (a new connection, or input dropped). The zero value is ready to
// use. A Parser belongs to one connection and is used on its loop's thread.
type Parser struct {
	// Progress through a partial command: pos bytes of it are read.
	// state says what pos is at: the start (nothing read), a bulk
	// header, a bulk's payload (bulk bytes and its CRLF), or the rest of
	// an inline line.
	pos   int
	state uint8
	argc  int64 // the array's count
	left  int64 // bulk strings of the array not yet read, the current one included
	bulk  int64
	first int // where the array's first bulk header starts
	// offs holds the offset and length of each argument read so far of
	// a partial array, so that once it is whole its arguments are made
	// without parsing it again (wide: an offset past 4 GiB, and they are
	// parsed again).
	offs []uint32
	wide bool
	// scanned counts the bytes examined (Scanned).
	scanned int64
}

// A Parser's state.
const (
	atStart = iota
	atBulkHeader
	atBulkPayload
	inLine
)

// Parse reads the command at the start of data, resuming where the last
// call left a partial one. It returns what Parse returns: the command's
// arguments appended to dst (slices of data), the bytes it took (0 while
// the command is partial) and a *ProtocolError for a malformed command,
// which also resets the progress.
func (p *Parser) Parse(dst [][]byte, data []byte, lim Limits) (args [][]byte, n int, err error) {
	lim = lim.withDefaults()
	if p.pos > len(data) {
		p.Reset() // not the input the progress was made on: start again
	}
	start := len(dst)
	fresh := p.state == atStart
	var out *[][]byte
	if fresh {
		out = &dst // one pass: the arguments are taken as they are read
	}
	n, err = p.scan(data, &lim, out)
	switch {
	case err != nil:
		p.Reset()
		return dst[:start], 0, err
	case n == 0:
		return dst[:start], 0, nil
	}
	argc, inline := p.argc, p.state == inLine
	defer p.Reset()
	if fresh {
		return dst, n, nil
	}
	// Resumed: the arguments read by earlier calls were in bytes that
	// have moved since. An array's are made from their offsets, into
	// room made once (the command is whole: its count is no longer a
	// claim); an inline command's line is split again.
	if inline || p.wide {
		p.scanned += int64(n)
		dst = slices.Grow(dst, int(argc))
		if _, _, err = parse(data[:n], &lim, &dst); err != nil {
			return dst[:start], 0, err // an inline command with too many words
		}
		return dst, n, nil
	}
	dst = slices.Grow(dst, int(argc))
	for i := 0; i+1 < len(p.offs); i += 2 {
		at, end := int(p.offs[i]), int(p.offs[i])+int(p.offs[i+1])
		dst = append(dst, data[at:end:end])
	}
	return dst, n, nil
}

// maxKeptOffs bounds the room for argument offsets a Parser keeps between
// commands.
const maxKeptOffs = 8 << 10

// Reset forgets the progress through a partial command.
func (p *Parser) Reset() {
	p.pos, p.state, p.argc, p.left, p.bulk, p.first, p.wide = 0, atStart, 0, 0, 0, 0, false
	if cap(p.offs) > maxKeptOffs {
		p.offs = nil
	}
	p.offs = p.offs[:0]
}

// Scanned returns how many bytes of input the parser has examined since it
// was made (Reset does not clear it): about a command's size for every
// command, however it arrived. Tests and metrics read it to tell a linear
// parse from a quadratic one.
func (p *Parser) Scanned() int64 { return p.scanned }

// Partial reports whether the parser holds progress through a partial
// command.
func (p *Parser) Partial() bool { return p.state != atStart }

// scan reads on from p's progress. It returns the command's length once it
// is complete (the state is then the caller's to reset), 0 while it is
// partial, keeping the progress. args, when set, receives the arguments as
// they are read (a scan from the start).
func (p *Parser) scan(data []byte, lim *Limits, args *[][]byte) (int, error) {
	from := p.pos
	defer func() { p.scanned += int64(max(p.pos, from) - from) }()
	if p.state == atStart {
		if len(data) == 0 {
			return 0, nil
		}
		if data[0] != '*' {
			p.state = inLine
		} else {
			count, i, st := header(data, 0)
			switch {
			case st == incomplete:
				p.scanned += int64(len(data)) // read again next time: a header is at most 21 bytes
				return 0, nil
			case st == malformed || count > int64(lim.MaxArgs):
				return 0, errMultibulkLen
			case count <= 0:
				return i, nil
			}
			p.state, p.argc, p.left, p.pos, p.first = atBulkHeader, count, count, i, i
			if args != nil {
				*args = slices.Grow(*args, int(min(count, int64(len(data)-i)/6+1))) // as parse does
			}
		}
	}
	if p.state == inLine {
		return p.line(data, lim, args)
	}
	argc := 0
	if args != nil {
		argc = len(*args)
	}
	for p.left > 0 {
		if p.state == atBulkHeader {
			i := p.pos
			if i >= len(data) {
				return p.partial(data, args, argc)
			}
			if data[i] != '$' {
				return 0, &ProtocolError{fmt.Sprintf("expected '$', got '%c'", data[i])}
			}
			size, j, st := header(data, i)
			switch {
			case st == incomplete:
				p.scanned += int64(len(data) - i) // looked at, read again next time (at most 21 bytes)
				return p.partial(data, args, argc)
			case st == malformed || size < 0 || size > int64(lim.MaxBulk):
				return 0, errBulkLen
			}
			p.state, p.bulk, p.pos = atBulkPayload, size, j
		}
		end := p.pos + int(p.bulk)
		if end+2 > len(data) {
			return p.partial(data, args, argc)
		}
		if data[end] != '\r' || data[end+1] != '\n' {
			return 0, errBulkEnd
		}
		if args != nil {
			*args = append(*args, data[p.pos:end:end])
		} else {
			p.note(p.pos, int(p.bulk))
		}
		p.state, p.pos = atBulkHeader, end+2
		p.left--
	}
	return p.pos, nil
}

// partial keeps the progress of a partial array and drops the arguments
// appended for it, noting their offsets instead (found again from the
// array's start, a walk over no more than this call's bytes), so that
// the arguments are made once the command is complete.
func (p *Parser) partial(data []byte, args *[][]byte, argc int) (int, error) {
	if args == nil {
		return 0, nil
	}
	*args = (*args)[:argc]
	i := p.first
	for range p.argc - p.left {
		size, j, _ := header(data, i)
		p.note(j, int(size))
		p.scanned += int64(j + int(size) + 2 - i)
		i = j + int(size) + 2
	}
	return 0, nil
}

// note keeps the offset and length of an argument of a partial array.
func (p *Parser) note(at, size int) {
	if uint64(at)+uint64(size) > 1<<32-1 {
		p.wide = true
		return
	}
	p.offs = append(p.offs, uint32(at), uint32(size))
}

// line looks for the end of an inline command from where the last call
// stopped looking.
func (p *Parser) line(data []byte, lim *Limits, args *[][]byte) (int, error) {
	limit := min(len(data), lim.MaxInline+1)
	if p.pos < limit {
		if i := bytes.IndexByte(data[p.pos:limit], '\n'); i >= 0 {
			p.pos += i + 1
			if args == nil {
				return p.pos, nil // the arguments: the caller's second pass
			}
			n, _, err := parseInline(data[:p.pos], lim, args)
			return n, err
		}
		p.pos = limit
	}
	if len(data) > lim.MaxInline {
		return 0, errInline
	}
	return 0, nil
}
