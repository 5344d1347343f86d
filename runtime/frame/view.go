//go:build linux

package frame

import (
	"sync"

	percore "github.com/percore/percore/runtime"
)

// ViewHandler parses a connection's input in place, from the Handler that
// View returns: OnView is shown every byte received and not yet consumed,
// contiguous, and returns how many of them it consumed (gnet's Peek and
// Discard in one call). It runs on the connection's loop thread and must
// not block; in is valid only during the call. An error closes the
// connection after the handler's OnFrameError.
//
// in always begins with the bytes the last call left: what it did not
// consume, unchanged, followed by what arrived since (the same bytes, not
// necessarily at the same address). A parser may therefore keep its
// progress through a partial message between calls, as resp.Parser and
// http1's decoders do, and read each byte once however many reads a
// message takes; a parser that starts again from in[0] at every call reads
// a message that arrives in k pieces k times over.
//
// A ViewHandler may also implement ErrorHandler and the runtime's optional
// interfaces, which the adapter forwards.
type ViewHandler interface {
	OnView(c *percore.Conn, in []byte) (consumed int, err error)
}

// View returns a percore.Handler that shows each connection's unconsumed
// input to h.OnView, for parsers that find a message's end and its parts
// in one pass (resp.Parser; a split function followed by a parse of its
// token reads each message twice: docs/decisions/0018-input-buffering.md).
// What OnView leaves is kept in a per-connection buffer, taken from the
// shared pool only while bytes are left (as is the adapter's state for the
// connection: an idle connection under View costs it nothing), and shown
// again, followed by the next read, at the next call: so a read that
// completes a message left partial is copied whole behind it, where Split
// copies only what the message needs. More than cfg.MaxBuffered bytes left is a *TooLongError:
// h's OnFrameError, then the connection closes.
//
// PauseRead and ResumeRead of this package hold the input back: while
// paused, OnView is not called, and ResumeRead shows what is left at once.
// The returned Handler implements percore.EOFHandler exactly when h does;
// what is left at the end of the stream is dropped.
func View(h ViewHandler, cfg SplitConfig) percore.Handler {
	limit := cfg.MaxBuffered
	if limit <= 0 {
		limit = DefaultMaxBuffered
	}
	return expose(&adapter{hooks: hooksOf(h), limit: limit, view: h.OnView}, h)
}

// deliverView shows the input to the view handler until it consumes
// nothing more, pauses or closes. Held bytes are shown followed by the
// read's first probeStep bytes, then twice as many while the handler takes
// none of them: once it has consumed the held bytes, the rest of the read
// is shown where it lies, without a copy (Split's machinery, for a parser
// that takes many messages at once).
func (a *adapter) deliverView(c *percore.Conn, s *session, data []byte) {
	if s.delivering {
		s.again = true // a ResumeRead from OnView: show the rest once it returns
		return
	}
	t := &s.t
	step := probeStep
	for !s.paused && !c.Closed() && t.err == nil {
		held := t.held()
		in := data
		k := 0
		if held > 0 {
			k = min(len(data), step)
			t.append(data[:k], a.limit)
			in = t.buf[t.off:]
		} else if len(data) == 0 {
			break
		}
		s.delivering, s.again = true, false
		n, err := a.view(c, in)
		s.delivering = false
		if err == nil {
			err = checkAdvance(n, len(in))
		}
		if err != nil {
			a.reject(c, t.fail(err))
			return
		}
		if c.Closed() {
			t.reset()
			return
		}
		if s.eof {
			n = len(in) // the end: what is left can never complete
		}
		if held == 0 {
			data = data[n:]
			if len(data) > 0 && (n == 0 || !s.again) {
				// The start of a message (or the handler paused).
				if len(data) > a.limit && !s.paused {
					a.reject(c, t.fail(&TooLongError{Limit: a.limit, Got: len(data)}))
					return
				}
				t.hold(data, a.limit)
				data = nil
				break
			}
			continue
		}
		t.buf = t.buf[:t.off+held] // the probe's bytes are still in data
		switch {
		case n >= held:
			t.drop = held
			data = data[n-held:]
			step = probeStep
		case n > 0:
			t.drop = n
		case k < len(data) && !s.paused:
			step *= 2 // nothing consumed: show more of the read
			if held+k > a.limit {
				a.reject(c, t.fail(&TooLongError{Limit: a.limit, Got: held + k}))
				return
			}
			continue
		default:
			// All of the read, and still partial (or paused).
			if k == len(data) {
				t.buf = t.buf[:t.off+held+k] // the probe was the whole read: keep it where it lies
				t.short = false
			} else {
				t.hold(data, a.limit)
			}
			data = nil
			if left := t.held(); left > a.limit && !s.paused {
				a.reject(c, t.fail(&TooLongError{Limit: a.limit, Got: left}))
				return
			}
		}
		t.settle()
		if data == nil && !s.again {
			break
		}
	}
	if len(data) > 0 && !c.Closed() && t.err == nil {
		t.hold(data, a.limit) // paused: keep the read
	}
	a.finish(c, s)
	a.releaseView(c, s)
}

// viewSessions are View's sessions not in use, shared by every View
// adapter: a connection under View has a session only while it holds
// bytes, is paused or has ended, and gives it back when its input
// drains, so that an idle connection (an idle WebSocket, a keep-alive
// connection between requests) costs View nothing (decision 0065). A
// sync.Pool keeps a cache per P, which is a loop's own while it runs.
var viewSessions = sync.Pool{New: func() any { return new(session) }}

// newViewSession returns a session for a, from viewSessions.
func (a *adapter) newViewSession() *session {
	s := viewSessions.Get().(*session)
	*s = session{a: a, t: tail{pool: &buffers}}
	return s
}

// releaseView gives c's session back to viewSessions once it holds
// nothing View must remember: no bytes, no buffer, no pause, no end of
// stream, no sticky error, no delivery running.
func (a *adapter) releaseView(c *percore.Conn, s *session) {
	if s.delivering || s.again || s.paused || s.eof || s.ended || !s.t.idle() || s.t.buf != nil || c.Closed() {
		return
	}
	if v, _ := c.AdapterValue().(*session); v != s {
		return
	}
	c.SetAdapterValue(nil)
	*s = session{}
	viewSessions.Put(s)
}
