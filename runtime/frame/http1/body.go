package http1

import (
	"bytes"
	"io"
)

// Event is what a decoder's Next found.
type Event uint8

const (
	// NeedMore: nothing more can be told from the bytes shown; call Next
	// again once more have arrived (with the bytes not consumed first).
	NeedMore Event = iota
	// Head: a message head was parsed (RequestDecoder.Request,
	// ResponseDecoder.Response).
	Head
	// Body: piece is the next bytes of the body, a slice of the input.
	Body
	// End: the message is complete, its trailers parsed; the next bytes
	// start the next message.
	End
)

func (e Event) String() string {
	switch e {
	case NeedMore:
		return "NeedMore"
	case Head:
		return "Head"
	case Body:
		return "Body"
	case End:
		return "End"
	}
	return "Event(?)"
}

// bodyMode is how a message's body is framed.
type bodyMode uint8

const (
	bodyNone   bodyMode = iota // no body: End at once
	bodyLength                 // remaining bytes of a Content-Length
	bodyChunked
	bodyClose // until the connection closes (responses only)
)

// chunkState is where a chunked body's decoder is.
type chunkState uint8

const (
	chunkSize chunkState = iota // at a chunk-size line (or the last chunk and its trailers)
	chunkData                   // inside a chunk's data
	chunkCRLF                   // at the CRLF after a chunk's data
)

// body decodes one message's body, as its bytes arrive.
type body struct {
	mode      bodyMode
	chunk     chunkState
	remaining int64 // of the Content-Length, or of the current chunk
	total     int64 // chunk bytes declared so far
	max       int64 // negative: no limit
	lim       *Limits
	trailer   *Headers
	tooLarge  *Error // what a body over max is
	// lineSeen is how far the search for a chunk-size line's end got
	// (from the line's start); ts is the progress through a partial
	// trailer section.
	lineSeen int
	ts       headScan
}

// next decodes from data: it returns the bytes it consumed (framing and
// data), Body with the data piece, End once the body and its trailers are
// complete, or NeedMore.
func (b *body) next(data []byte) (n int, ev Event, piece []byte, err *Error) {
	switch b.mode {
	case bodyNone:
		return 0, End, nil, nil
	case bodyLength:
		if b.remaining == 0 {
			b.mode = bodyNone
			return 0, End, nil, nil
		}
		if len(data) == 0 {
			return 0, NeedMore, nil, nil
		}
		k := int(min(int64(len(data)), b.remaining))
		b.remaining -= int64(k)
		return k, Body, data[:k], nil
	case bodyClose:
		if len(data) == 0 {
			return 0, NeedMore, nil, nil
		}
		return len(data), Body, data, nil
	}
	// Chunked: framing is consumed until a data piece, the end, or a
	// partial line.
	for {
		switch b.chunk {
		case chunkData:
			if len(data[n:]) == 0 {
				return n, NeedMore, nil, nil
			}
			k := int(min(int64(len(data)-n), b.remaining))
			b.remaining -= int64(k)
			if b.remaining == 0 {
				b.chunk = chunkCRLF
			}
			return n + k, Body, data[n : n+k], nil
		case chunkCRLF:
			rest := data[n:]
			if len(rest) < 2 {
				if len(rest) == 1 && rest[0] != '\r' {
					return n, NeedMore, nil, errChunkEnd
				}
				return n, NeedMore, nil, nil
			}
			if rest[0] != '\r' || rest[1] != '\n' {
				return n, NeedMore, nil, errChunkEnd
			}
			n += 2
			b.chunk = chunkSize
		case chunkSize:
			ln, k, ok, err := b.chunkLine(data[n:])
			if err != nil {
				return n, NeedMore, nil, err
			}
			if !ok {
				if len(data)-n > maxChunkLine {
					return n, NeedMore, nil, errChunkLine
				}
				return n, NeedMore, nil, nil
			}
			if k > maxChunkLine {
				return n, NeedMore, nil, errChunkLine
			}
			size, err := parseChunkSize(ln)
			if err != nil {
				return n, NeedMore, nil, err
			}
			if size == 0 {
				// The last chunk: take it with its trailer section at
				// once, or not at all, so that the trailers are slices
				// of one input.
				m, ok, err := b.trailers(data[n+k:])
				if err != nil || !ok {
					return n, NeedMore, nil, err
				}
				b.mode, b.lineSeen = bodyNone, 0
				return n + k + m, End, nil, nil
			}
			b.total += size
			if b.max >= 0 && b.total > b.max {
				return n, NeedMore, nil, b.tooLarge
			}
			n += k
			b.lineSeen = 0
			b.remaining = size
			b.chunk = chunkData
		}
	}
}

// chunkLine is line over a chunk-size line, searching for its end from
// where the last call stopped (data begins at the line, as it did then).
func (b *body) chunkLine(data []byte) (ln []byte, n int, ok bool, err *Error) {
	if b.lineSeen > len(data) {
		b.lineSeen = 0
	}
	i := bytes.IndexByte(data[b.lineSeen:], '\n')
	if i < 0 {
		b.lineSeen = len(data)
		return nil, 0, false, nil
	}
	i += b.lineSeen
	b.lineSeen = i // found again at once if the line is not taken (the last chunk, its trailers partial)
	if i == 0 || data[i-1] != '\r' {
		return nil, 0, false, errBareLF
	}
	return data[:i-1], i + 1, true, nil
}

// trailers parses the trailer section after the last chunk, keeping the
// progress through a partial one as a head's is kept.
func (b *body) trailers(data []byte) (int, bool, *Error) {
	if b.ts.active() {
		whole, err := b.ts.trailers(data, b.lim)
		if err != nil || !whole {
			return 0, false, err
		}
		b.ts.reset()
	}
	m, ok, err := b.parseTrailers(data)
	if err == nil && !ok {
		// Partial: note how far it is whole, for the next call.
		b.ts.trailers(data, b.lim)
	}
	return m, ok, err
}

// parseTrailers parses the trailer section at the start of data.
func (b *body) parseTrailers(data []byte) (int, bool, *Error) {
	lim := b.lim
	b.trailer.reset()
	end := data[:min(len(data), lim.MaxHeaderBytes)]
	m, ok, err := parseFields(end, b.trailer, lim.MaxHeaders)
	if err != nil {
		if err == errTooManyFields {
			return 0, false, errTrailerTooLarge
		}
		return 0, false, err
	}
	if !ok && len(data) > lim.MaxHeaderBytes {
		return 0, false, errTrailerTooLarge
	}
	return m, ok, nil
}

// parseChunkSize parses chunk-size [ chunk-ext ]: hex digits (at most 15,
// so that the size fits with room), then nothing, or extensions after
// optional whitespace and a ';', whose bytes must be field-value bytes.
func parseChunkSize(ln []byte) (int64, *Error) {
	var size int64
	i := 0
	for ; i < len(ln); i++ {
		c := ln[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			goto ext
		}
		if i >= 15 {
			return 0, errChunkSize
		}
		size = size<<4 | int64(d)
	}
ext:
	if i == 0 {
		return 0, errChunkSize
	}
	rest := ln[i:]
	if len(rest) == 0 {
		return size, nil
	}
	rest = bytes.TrimLeft(rest, " \t")
	if len(rest) == 0 || rest[0] != ';' {
		return 0, errChunkSize
	}
	for _, c := range rest {
		if !fieldValue[c] {
			return 0, errChunkSize
		}
	}
	return size, nil
}

// eof says whether a body that reached the end of the stream is complete:
// only a body read until close is.
func (b *body) eof() error {
	switch b.mode {
	case bodyNone, bodyClose:
		b.mode = bodyNone
		return nil
	case bodyLength:
		if b.remaining == 0 {
			return nil
		}
	}
	return io.ErrUnexpectedEOF
}
