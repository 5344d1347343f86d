//go:build linux

package frame

import percore "github.com/percore/percore/runtime"

// ViewHandler parses a connection's input in place, from the Handler that
// View returns: OnView is shown every byte received and not yet consumed,
// contiguous, and returns how many of them it consumed (gnet's Peek and
// Discard in one call). It runs on the connection's loop thread and must
// not block; in is valid only during the call. An error closes the
// connection after the handler's OnFrameError.
//
// A ViewHandler may also implement ErrorHandler and the runtime's optional
// interfaces, which the adapter forwards.
type ViewHandler interface {
	OnView(c *percore.Conn, in []byte) (consumed int, err error)
}

// View returns a percore.Handler that shows each connection's unconsumed
// input to h.OnView, for parsers that find a message's end and its parts
// in one pass (resp.Parse; a split function followed by a parse of its
// token reads each message twice: docs/decisions/0018-input-buffering.md).
// What OnView leaves is kept in a per-connection buffer, taken from the
// shared pool only while bytes are left, and shown again, followed by the
// next read, at the next call: so a read that completes a message left
// partial is copied whole behind it, where Split copies only what the
// message needs. More than cfg.MaxBuffered bytes left is a *TooLongError:
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

// deliverView shows the held bytes, then data, to the view handler until it
// consumes nothing more, pauses or closes.
func (a *adapter) deliverView(c *percore.Conn, s *session, data []byte) {
	if s.delivering {
		s.again = true // a ResumeRead from OnView: show the rest once it returns
		return
	}
	for !s.paused && !c.Closed() && s.t.err == nil {
		var in []byte
		held := s.t.held() > 0
		if held {
			s.t.append(data, a.limit)
			data = nil
			in = s.t.buf[s.t.off:]
		} else {
			in, data = data, nil
		}
		if len(in) == 0 {
			break
		}
		s.delivering, s.again = true, false
		n, err := a.view(c, in)
		s.delivering = false
		if err == nil {
			err = checkAdvance(n, len(in))
		}
		if err != nil {
			a.reject(c, s.t.fail(err))
			return
		}
		if c.Closed() {
			s.t.reset()
			return
		}
		if s.eof {
			n = len(in) // the end: what is left can never complete
		}
		if held {
			s.t.drop = n
			s.t.settle()
		} else if n < len(in) {
			s.t.hold(in[n:], a.limit)
		}
		if left := s.t.held(); left > a.limit && !s.paused {
			a.reject(c, s.t.fail(&TooLongError{Limit: a.limit, Got: left}))
			return
		}
		if !s.again || n == 0 {
			break
		}
	}
	if len(data) > 0 && !c.Closed() && s.t.err == nil {
		s.t.hold(data, a.limit) // paused: keep the read
	}
	a.finish(c, s)
}
