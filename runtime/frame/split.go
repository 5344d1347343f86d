//go:build linux

package frame

import (
	"bufio"
	"io"
	"sync"
)

// DefaultMaxBuffered is the limit of a Splitter, and of the Handler that
// Split returns, whose MaxBuffered is zero: 64 KiB. (A negative
// MaxBuffered means no limit.)
const DefaultMaxBuffered = 64 << 10

const (
	// probeStep is how many bytes of a read are first appended to a held
	// partial token to complete it; the probe doubles while the split
	// function asks for more. The bytes after the token stay in the read
	// and are split there, without a copy.
	probeStep = 512
	// maxEmptyTokens is how many tokens in a row a split function may
	// return without advancing (bufio.Scanner's limit).
	maxEmptyTokens = 100
)

// tail is the machinery every splitter of this package shares: the bytes
// of a partial token, held between reads, and the calls to a
// bufio.SplitFunc over them and over what arrives next.
//
// A token that lies whole in a read is a slice of the read. Only a partial
// token is copied, into buf, and only as much of the next read as the
// split function needs to complete it. A connection with no partial token
// holds nothing (with a pool) or a small retained buffer (without one).
type tail struct {
	buf  []byte // buf[off:] is held
	off  int
	drop int // bytes of buf[off:] the last token took, dropped at the next call (the token points into buf)
	// short is set when the held bytes are known to be a partial token:
	// the split function asked for more and nothing arrived since.
	short bool
	empty int   // tokens in a row that advanced nothing
	err   error // sticky: a framing error, or bufio.ErrFinalToken after the final token
	// pool, when set, takes buf back as soon as nothing is held (the
	// adapters' per-connection state); without it buf is kept up to
	// retainBuffer bytes (a Decoder).
	pool *sync.Pool
	box  *buffer // buf's box from pool
	// copied counts the bytes copied into buf (held bytes moved or
	// grown included), for the tests that check a partial message costs
	// a copy linear in its size.
	copied int64
	// scanner, when the split function is a Scanner's Scan, is reset
	// whenever what it made progress on is dropped.
	scanner Scanner
}

// buffer boxes a pooled slice, so that putting it back allocates nothing.
type buffer struct{ b []byte }

// keep holds rest, the start of a partial token, when split's answer
// over it (adv, tok, err) asked for more and rest is within limit; it
// reports whether it did. Any other answer is left to next.
func (t *tail) keep(rest []byte, adv int, tok []byte, err error, limit int) bool {
	if adv != 0 || tok != nil || err != nil || len(rest) > limit {
		return false
	}
	t.hold(rest, limit)
	t.short = true
	return true
}

// idle reports whether t holds nothing and has nothing to drop or report:
// a token that lies whole in the next read can be split from it directly.
func (t *tail) idle() bool { return t.err == nil && t.drop == 0 && len(t.buf) == t.off }

// held returns how many bytes of a partial token are held.
func (t *tail) held() int { return len(t.buf) - t.off - t.drop }

// next returns the next token of the stream made of the held bytes
// followed by *data, advancing *data past the bytes it took. ok is false
// when no complete token is left: the rest of *data, the start of a
// partial token, is then held and *data is empty. atEOF says that *data is
// the end of the stream (the split function is called with atEOF set; a
// partial token left then is dropped). A token is valid until the next
// call. The error, if any, is sticky; bufio.ErrFinalToken comes with the
// final token (ok when there is one).
func (t *tail) next(data *[]byte, split bufio.SplitFunc, limit int, atEOF bool) ([]byte, bool, error) {
	if t.err != nil {
		if t.err == bufio.ErrFinalToken {
			t.release()
		}
		return nil, false, t.err
	}
	if t.drop != 0 {
		t.settle()
	}
	for {
		var (
			adv int
			tok []byte
			err error
		)
		if len(t.buf) == t.off { // nothing held (nothing to drop either)
			d := *data
			if len(d) == 0 && !atEOF {
				return nil, false, nil
			}
			adv, tok, err = split(d, atEOF)
			if err == nil && tok != nil && adv > 0 && adv <= len(d) {
				// The common case: a whole token in the read.
				*data = d[adv:]
				t.empty = 0
				return tok, true, nil
			}
			if bad := checkAdvance(adv, len(d)); bad != nil {
				return nil, false, t.fail(bad)
			}
			if adv == 0 && tok == nil && err == nil {
				*data = nil
				if atEOF {
					return nil, false, nil // a partial token at the end: dropped
				}
				if len(d) > limit {
					return nil, false, t.fail(&TooLongError{Limit: limit, Got: len(d)})
				}
				t.hold(d, limit)
				t.short = true
				return nil, false, nil
			}
			*data = d[adv:]
		} else {
			var more bool
			adv, tok, err, more = t.complete(data, split, limit, atEOF)
			if more {
				return nil, false, err
			}
		}
		switch {
		case err == bufio.ErrFinalToken:
			// The buffer stays until the next call: the token may
			// point into it.
			t.err = err
			return tok, tok != nil, err
		case err != nil:
			return nil, false, t.fail(err)
		}
		if adv > 0 {
			t.empty = 0
		} else if t.empty++; t.empty > maxEmptyTokens {
			return nil, false, t.fail(io.ErrNoProgress)
		}
		if tok != nil {
			return tok, true, nil
		}
		t.settle() // the split function skipped bytes: go on
	}
}

// complete calls split over the held bytes and as much of *data as it
// needs: first probeStep bytes, then twice as many each time it asks for
// more. A token (or an error) returns its advance with more false; the
// bytes of *data it did not take stay in *data. A need for more than all
// of *data returns more true, with all of *data held, or the error that
// the held bytes are over the limit.
func (t *tail) complete(data *[]byte, split bufio.SplitFunc, limit int, atEOF bool) (adv int, tok []byte, err error, more bool) {
	d := *data
	if len(d) == 0 && t.short && !atEOF {
		return 0, nil, nil, true
	}
	n := t.held()
	k := min(len(d), probeStep)
	t.append(d[:k], limit)
	for {
		w := t.buf[t.off:]
		eof := atEOF && k == len(d)
		adv, tok, err = split(w, eof)
		if bad := checkAdvance(adv, len(w)); bad != nil {
			return 0, nil, t.fail(bad), true
		}
		if adv != 0 || tok != nil || err != nil {
			break
		}
		if len(w) > limit {
			return 0, nil, t.fail(&TooLongError{Limit: limit, Got: len(w)}), true
		}
		if k == len(d) {
			*data = nil
			t.short = true
			if eof {
				t.release() // a partial token at the end: dropped
			}
			return 0, nil, nil, true
		}
		next := min(len(d), 2*k)
		t.append(d[k:next], limit)
		k = next
	}
	// Give back the probe's bytes the token did not take: they are still
	// in *data. The token may point into them; they stay untouched until
	// the next call.
	t.buf = t.buf[:t.off+n]
	t.short = false
	if adv >= n {
		*data = d[adv-n:]
		t.drop = n
	} else {
		t.drop = adv
	}
	return adv, tok, err, false
}

// checkAdvance returns the error of a split function's advance outside
// [0, n] (bufio.Scanner's).
func checkAdvance(adv, n int) error {
	switch {
	case adv < 0:
		return bufio.ErrNegativeAdvance
	case adv > n:
		return bufio.ErrAdvanceTooFar
	}
	return nil
}

// settle drops the bytes the last token took, releasing the buffer when
// nothing is left.
func (t *tail) settle() {
	if t.drop == 0 {
		return
	}
	t.off += t.drop
	t.drop = 0
	if t.off == len(t.buf) {
		t.release()
	}
}

// hold keeps p after the held bytes.
func (t *tail) hold(p []byte, limit int) {
	t.settle()
	t.append(p, limit)
	t.short = false
}

// append adds p after buf, moving the held bytes to the front first when
// that makes room, and growing the buffer by doubling otherwise, up to
// limit unless p needs more.
func (t *tail) append(p []byte, limit int) {
	if len(p) == 0 {
		return
	}
	if t.buf == nil && t.pool != nil {
		if b, ok := t.pool.Get().(*buffer); ok {
			t.box, t.buf = b, b.b[:0]
		}
	}
	if len(t.buf)+len(p) > cap(t.buf) && t.off > 0 {
		t.buf = t.buf[:copy(t.buf, t.buf[t.off:])]
		t.copied += int64(len(t.buf))
		t.off = 0
	}
	if need := len(t.buf) + len(p); need > cap(t.buf) {
		nb := make([]byte, len(t.buf), max(need, min(max(2*cap(t.buf), minBuffer), limit)))
		t.copied += int64(copy(nb, t.buf))
		t.buf = nb
	}
	t.buf = append(t.buf, p...)
	t.copied += int64(len(p))
}

// release gives the buffer back: to the pool, or kept when small. Nothing
// is held then, so a Scanner's progress is over too.
func (t *tail) release() {
	t.off, t.drop, t.short = 0, 0, false
	if t.scanner != nil {
		t.scanner.Reset()
	}
	switch {
	case t.buf == nil:
	case cap(t.buf) > retainBuffer:
		t.buf, t.box = nil, nil
	case t.pool != nil:
		b := t.box
		if b == nil {
			b = new(buffer)
		}
		b.b = t.buf[:0]
		t.pool.Put(b)
		t.buf, t.box = nil, nil
	default:
		t.buf = t.buf[:0]
	}
}

// fail poisons t with err and releases the buffer.
func (t *tail) fail(err error) error {
	t.err = err
	if t.scanner != nil {
		t.scanner.Reset()
	}
	t.buf, t.box, t.off, t.drop, t.short = nil, nil, 0, 0, false
	return err
}

// reset drops a partial token and the error, and releases the buffer.
func (t *tail) reset() {
	t.release()
	t.buf, t.box, t.err, t.empty = nil, nil, nil, 0
}

// feed is Decoder.Feed over split.
func (t *tail) feed(data []byte, split bufio.SplitFunc, limit int, emit func([]byte) bool) (int, error) {
	rest := data
	for {
		if t.idle() && len(rest) > 0 {
			// The common case, without next's bookkeeping: a whole
			// token in the read. Anything else goes to next, which
			// calls split again over the same bytes (split functions
			// are pure, as bufio.Scanner assumes; a Scanner that
			// asked for more resumes over them).
			adv, tok, err := split(rest, false)
			if err == nil && tok != nil && adv > 0 && adv <= len(rest) {
				rest = rest[adv:]
				t.empty = 0
				if !emit(tok) {
					return len(data) - len(rest), nil
				}
				continue
			}
			if t.keep(rest, adv, tok, err, limit) {
				return len(data), nil
			}
		}
		tok, ok, err := t.next(&rest, split, limit, false)
		if ok {
			more := emit(tok)
			if err == nil && more {
				continue
			}
		}
		return len(data) - len(rest), err
	}
}

// end splits what is held with atEOF set, handing emit the last tokens.
func (t *tail) end(split bufio.SplitFunc, limit int, emit func([]byte) bool) error {
	var none []byte
	for {
		tok, ok, err := t.next(&none, split, limit, true)
		if !ok || err != nil {
			if ok {
				emit(tok)
			}
			t.release()
			return err
		}
		if !emit(tok) {
			return nil
		}
	}
}

// Splitter is a Decoder for any split function: a bufio.SplitFunc called
// over a connection's bytes as they arrive, as a bufio.Scanner calls it
// over a reader. As with a bufio.Scanner, the split function may be called
// more than once over the same bytes, and must not keep state between
// calls; a split function that does is a Scanner, given as Scanner. The
// line and length-prefixed decoders are Splitters with a LineScanner and
// ScanLengthPrefixed. A Splitter is used on one goroutine at a time (a
// connection's loop thread).
type Splitter struct {
	// Split splits the stream into tokens (bufio.SplitFunc: advance,
	// token, error; bufio.ErrFinalToken ends the stream). Set it, or
	// Scanner, before the first Feed.
	Split bufio.SplitFunc
	// Scanner, when set, splits the stream instead of Split, keeping its
	// progress through a partial token (Scanner): this Splitter's own,
	// not shared. Reset resets it too.
	Scanner Scanner
	// MaxBuffered is the most bytes of a partial token the Splitter
	// holds between calls: a split function that asks for more once that
	// many are held fails with a *TooLongError. Zero means
	// DefaultMaxBuffered; negative means no limit.
	MaxBuffered int

	tail
	scan bufio.SplitFunc // Scanner.Scan, bound once
}

func (s *Splitter) limit() int { return limitOf(s.MaxBuffered, DefaultMaxBuffered) }

// split returns the split function: Scanner's Scan when there is a
// Scanner, else Split.
func (s *Splitter) split() bufio.SplitFunc {
	if s.Scanner == nil {
		return s.Split
	}
	if s.tail.scanner != s.Scanner {
		s.tail.scanner, s.scan = s.Scanner, s.Scanner.Scan
	}
	return s.scan
}

// Feed hands every token that data completes to emit (see Decoder.Feed).
// A token that lies whole in data is handed over as Split returned it, a
// slice of data; one that arrived in pieces points into the Splitter's
// buffer. Either is valid only during emit. An error from Split, or a
// partial token over MaxBuffered, poisons the Splitter: every later Feed
// returns it. bufio.ErrFinalToken is returned after its token was emitted,
// and later Feeds return it too.
func (s *Splitter) Feed(data []byte, emit func(token []byte) bool) (int, error) {
	return s.feed(data, s.split(), s.limit(), emit)
}

// End is the end of the stream: it calls Split with atEOF set over what is
// held, hands emit the tokens that makes, and drops what is left. It
// returns Split's error, if any.
func (s *Splitter) End(emit func(token []byte) bool) error {
	return s.end(s.split(), s.limit(), emit)
}

// Buffered returns how many bytes of a partial token the Splitter holds.
func (s *Splitter) Buffered() int { return s.held() }

// Reset drops a partial token and the error, and releases the buffer.
func (s *Splitter) Reset() { s.reset() }
