//go:build linux

package httpd

import (
	"fmt"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/http1"
)

// conn is one connection's state, kept with frame.SetValue. It belongs to
// the connection's loop.
type conn struct {
	s  *Server
	ls *loopState // the connection's loop's
	c  *percore.Conn

	req   Request
	w     Response
	h     Handler       // the request's handler
	sh    StreamHandler // h, when it takes its body in pieces
	route routeCache    // the connection's last static route (s.mux)

	// buf holds, for a request whose body spans reads, a copy of its
	// head (copied: the Request view points into it) and, for a
	// Handler, its body from bodyOff; taken from the loop only then.
	buf     []byte
	copied  bool
	bodyOff int
	piece   []byte // a Handler's body while it is one piece of this read
	headIn  []byte // the input of the last Head, during that OnView
	headAt  int

	inRequest  bool // between a head and the end of its response
	closeAfter bool // the response says Connection: close, then close
	shutdown   bool // a graceful shutdown began
	eof        bool // the client's stream ended
	gone       bool // OnClose ran
	begun      bool // Conn.BeginRequest was called for this request
	active     bool // a handler of ours is running: the Response writes in place
	ending     bool // the callback running ends the request (its response ends after it)
	inView     bool // OnView is running
	panicked   bool

	bodyPaused bool // the adapter's handler has not read the body so far
	held       bool // the response comes later (Response.Hold)
	readHeld   bool // reading paused while held (too much input behind it)
	holdTimer  *percore.Timer
	holdUntil  time.Time      // when a held request passes HandlerTimeout
	holdArmed  bool           // holdTimer is armed (it is left so between requests)
	job        *job           // the offloaded work answering this request
	aw         adapterRequest // the adapter's request in progress

	headTimer *percore.Timer
	headArmed bool

	up UpgradeHandler // the connection was upgraded: it gets the input

	remote string // the peer's address, formatted for the adapter

	// The large parts last (3 KiB each), so that the fields every
	// request touches share a few cache lines.
	d    http1.RequestDecoder
	head http1.Request // the copied head, parsed again
}

// adapterRequest is what the net/http adapter keeps for a request, told
// when its connection goes away or its outbound queue drains.
type adapterRequest interface {
	gone()
	eof()
	drained()
}

// OnView decodes every request the input holds and answers them. The
// answers are written in place into the connection's outbound queue and
// sent together once the loop's turn ends: the answers of one read go out
// in one write.
func (s *Server) OnView(c *percore.Conn, in []byte) (int, error) {
	cn, ok := c.Value().(*conn)
	if !ok {
		if up, ok := upgradedOf(c); ok {
			return up.OnView(c, in)
		}
		return len(in), nil
	}
	cn.inView = true
	n, err := cn.guardedView(in)
	cn.inView = false
	cn.headIn = nil
	if cn.w.kept > 0 {
		cn.ls.views++
		cn.w.commitKept() // the answers of this read, in one Commit
	}
	return n, err
}

func (cn *conn) view(in []byte) (int, error) {
	c := cn.c
	off := 0
	for {
		if cn.up != nil {
			n, err := cn.handOff().OnView(c, in[off:])
			return off + n, err
		}
		if cn.bodyPaused {
			return off, nil
		}
		if cn.held && !cn.d.InBody() {
			// Later requests wait behind the one answered later, in
			// View's buffer; past a bound, in the kernel's.
			if len(in)-off > cn.s.cfg.Limits.MaxHeaderBytes && !cn.readHeld {
				cn.readHeld = true
				c.PauseRead()
			}
			return off, nil
		}
		if c.Closed() {
			return len(in), nil
		}
		at := off
		n, ev, piece, err := cn.d.Next(in[off:])
		off += n
		if err != nil {
			return off, err // OnFrameError answers it; View closes c
		}
		switch ev {
		case http1.Head:
			if cn.headArmed { // checked here: the call is not inlined
				cn.stopHeadTimer()
			}
			cn.headIn, cn.headAt = in, at
			if hr := cn.d.Request(); !cn.quick(hr) {
				cn.begin(hr)
			}
		case http1.Body:
			cn.body(piece)
		case http1.End:
			cn.end()
		case http1.NeedMore:
			if cn.d.InBody() {
				cn.spanning()
			} else if off < len(in) {
				cn.startHeadTimer()
			}
			return off, nil
		}
	}
}

// begin starts a request whose head arrived: it is routed, a refused
// Expect: 100-continue answered, a StreamHandler called.
func (cn *conn) begin(hr *http1.Request) {
	s, c := cn.s, cn.c
	cn.inRequest = true
	cn.closeAfter = hr.Close || cn.shutdown
	cn.copied, cn.piece = false, nil
	cn.ending = !hr.HasBody()
	cn.req.start(hr)
	cn.w.start(hr)
	var h Handler
	var refused bool
	if s.mux != nil {
		mh := s.mux.route(&cn.req, &cn.route)
		h, cn.sh, refused = mh.h, mh.sh, mh.refuse
	} else {
		h = s.h
		if s.router != nil {
			h = s.router.Route(&cn.req)
		}
		cn.sh, _ = h.(StreamHandler)
		_, refused = h.(refuser)
	}
	cn.h = h
	if hr.Expect100 {
		if refused {
			// The final status instead of 100 Continue: the body is
			// not wanted, and the connection closes rather than read
			// it.
			cn.closeAfter = true
			cn.ending = true
			cn.serve(h)
			if !c.Closed() {
				cn.endResponse()
				cn.w.commitKept()
				c.CloseLinger()
			}
			return
		}
		cn.w.commitKept()
		c.Write(http1.Continue)
	}
	if cn.sh == nil && hr.HasBody() && s.maxBody > 0 && hr.ContentLength > int64(s.maxBody) {
		cn.fail(413, "body too large for this handler")
		return
	}
	if cn.sh != nil {
		cn.serve(h)
	}
}

// body takes a piece of the body: to the StreamHandler, or kept for the
// Handler.
func (cn *conn) body(piece []byte) {
	if cn.sh != nil {
		cn.active = true
		cn.sh.OnBody(&cn.w, &cn.req, piece)
		cn.handled()
		return
	}
	if !cn.copied && cn.piece == nil && !cn.d.Request().Chunked {
		cn.piece = piece // perhaps the whole body, in place
		return
	}
	cn.keepHead()
	if cn.piece != nil {
		cn.buf = append(cn.buf, cn.piece...)
		cn.piece = nil
	}
	if cn.s.maxBody > 0 && len(cn.buf)-cn.bodyOff+len(piece) > cn.s.maxBody {
		cn.fail(413, "body too large for this handler")
		return
	}
	cn.buf = append(cn.buf, piece...)
}

// spanning is a request whose body continues in a later read: its head
// is copied (the Request stays valid), a Handler's body so far too, and a
// graceful shutdown waits for it.
func (cn *conn) spanning() {
	cn.keepHead()
	if cn.piece != nil {
		cn.buf = append(cn.buf, cn.piece...)
		cn.piece = nil
	}
	if !cn.begun {
		cn.begun = true
		cn.c.BeginRequest()
	}
}

// keepHead copies the head of the request in progress out of the input,
// once, and points the Request at the copy.
func (cn *conn) keepHead() {
	if cn.copied {
		return
	}
	cn.copied = true
	hr := cn.d.Request()
	ls := cn.ls
	if cn.buf == nil {
		cn.buf = ls.getBuf()
	}
	want := hr.HeadLen
	if cn.sh == nil && hr.ContentLength > 0 {
		want += int(min(hr.ContentLength, int64(max(cn.s.maxBody, 0))))
	}
	if cap(cn.buf) < want {
		ls.putBuf(cn.buf)
		cn.buf = make([]byte, 0, want)
	}
	cn.buf = append(cn.buf[:0], cn.headIn[cn.headAt:cn.headAt+hr.HeadLen]...)
	cn.bodyOff = len(cn.buf)
	if ok, err := http1.ParseRequest(cn.buf, &cn.head, cn.s.cfg.Limits); !ok || err != nil {
		panic(fmt.Sprintf("httpd: a head parsed once does not parse again: %v", err)) // cannot happen
	}
	cn.req.rebase(&cn.head)
}

// end is a request whose body (if any) has arrived: the Handler is
// called, or the StreamHandler's OnEnd, and the response ends unless it
// is held.
func (cn *conn) end() {
	if cn.c.Closed() {
		return
	}
	cn.ending = true
	if cn.sh != nil {
		cn.active = true
		cn.sh.OnEnd(&cn.w, &cn.req)
		cn.handled()
	} else {
		switch {
		case cn.piece != nil:
			cn.req.body = cn.piece
		case cn.copied:
			cn.req.body = cn.buf[cn.bodyOff:]
		default:
			cn.req.body = nil
		}
		cn.req.trailer = &cn.d.Request().Trailer
		cn.serve(cn.h)
	}
	cn.settle()
}

// settle ends the response of the request whose handler returned, unless
// it is held or the connection closed, and readies the next request.
func (cn *conn) settle() {
	if !cn.held && !cn.c.Closed() {
		cn.endResponse()
		cn.finish()
	}
}

// serve runs h's ServeHTTP, from OnView: a panic is answered by
// guardedView (recover.go), once per read rather than per request.
func (cn *conn) serve(h Handler) {
	cn.active = true
	h.ServeHTTP(&cn.w, &cn.req)
	cn.handled()
}

// endResponse ends the response of a request that is not held, in place.
func (cn *conn) endResponse() {
	cn.active = true
	cn.w.end()
	cn.active = false
}

// finish ends a request whose response has ended: the next request of
// the connection may start (or the connection closes).
func (cn *conn) finish() {
	if !cn.inRequest {
		return
	}
	c := cn.c
	cn.inRequest = false
	cn.req.end()
	cn.releaseBuf()
	wasHeld := cn.held
	if cn.held {
		cn.held = false // the hold timer, left armed, finds it so
		if cn.s.idle > 0 && !c.Closed() {
			c.SetIdleTimeout(cn.s.idle) // the idle time counts from the answer
		}
	}
	if cn.begun {
		// A shutdown closes the connection once it is idle and its
		// queue sent: the response goes out whole.
		cn.begun = false
		cn.w.commitKept()
		c.EndRequest()
	}
	if cn.closeAfter || cn.shutdown || cn.eof || cn.w.broken {
		cn.w.commitKept()
		c.Close()
		return
	}
	if cn.readHeld {
		cn.readHeld = false
		c.ResumeRead()
	}
	if wasHeld && !cn.inView {
		// Show View's held input (the requests behind this one) again;
		// with none held, nothing to do (no read paused and resumed).
		frame.Redeliver(c)
	}
}

func (cn *conn) releaseBuf() {
	if cn.buf != nil {
		cn.ls.putBuf(cn.buf)
		cn.buf = nil
	}
	if cn.copied || cn.piece != nil {
		cn.copied, cn.piece = false, nil // written only when set: a pointer's store is a write barrier's check
	}
	cn.w.releaseSpill()
}

// hold makes the request in progress answered later: the connection's
// later requests wait, a shutdown waits for it, the idle timeout is off
// and HandlerTimeout bounds it. keepHead copies the head out of the
// input, so that the Request stays valid (the adapter, which copied
// what it needs into an http.Request, does without).
func (cn *conn) hold(keepHead bool) {
	if cn.held || !cn.inRequest {
		return
	}
	c := cn.c
	cn.held = true
	if keepHead {
		cn.keepHeadForHold()
	}
	if !cn.begun {
		cn.begun = true
		c.BeginRequest()
	}
	if cn.idleOffWhileHeld() {
		c.SetIdleTimeout(0)
	}
	if d := cn.s.cfg.HandlerTimeout; d > 0 {
		// The timer is not reset per request: it stays armed between
		// requests, and when it fires for an earlier one it re-arms for
		// the rest of this one's time (holdExpired).
		cn.holdUntil = c.Loop().Now().Add(d)
		switch {
		case cn.holdTimer == nil:
			cn.holdTimer = c.Loop().AfterFunc(d, cn.holdExpired)
		case !cn.holdArmed:
			cn.holdTimer.Reset(d)
		}
		cn.holdArmed = true
	}
}

// keepHeadForHold copies the head when the request is held from inside
// OnView, so that Request stays valid after it returns.
func (cn *conn) keepHeadForHold() {
	if cn.headIn != nil && !cn.copied {
		piece := cn.piece
		cn.keepHead()
		if piece != nil {
			cn.buf = append(cn.buf, piece...)
			cn.req.body = cn.buf[cn.bodyOff:]
			cn.piece = nil
		}
	}
}

// idleOffWhileHeld reports whether the idle timeout must be turned off
// while a request is held. Not when HandlerTimeout is shorter: the held
// request began at a read (the idle time counts from the last one), so
// HandlerTimeout ends it first, and the idle timer is left as it is
// rather than stopped and made again per request.
func (cn *conn) idleOffWhileHeld() bool {
	ht := cn.s.cfg.HandlerTimeout
	return cn.s.idle > 0 && (ht <= 0 || ht >= cn.s.idle)
}

// stopHold stops the hold timer for good (the connection closes or is
// handed off): a request's end leaves it armed.
func (cn *conn) stopHold() {
	if cn.holdTimer != nil {
		cn.holdTimer.Stop()
		cn.holdArmed = false
	}
}

// holdExpired answers a request held past HandlerTimeout: 503 (or a
// close, once its response began), and its work's context is cancelled.
func (cn *conn) holdExpired() {
	cn.holdArmed = false
	if !cn.held || cn.gone {
		return // armed for a request answered since
	}
	if left := cn.holdUntil.Sub(cn.c.Loop().Now()); left > 0 {
		cn.holdArmed = true // armed for an earlier request: the rest of this one's time
		cn.holdTimer.Reset(left)
		return
	}
	cn.s.nTimeout.Add(1)
	cn.cancelJob()
	if cn.aw != nil {
		cn.aw.gone()
		cn.aw = nil
	}
	cn.held = false
	cn.fail(503, "the handler did not answer in time")
}

// startHeadTimer arms the head timeout for a partial head.
func (cn *conn) startHeadTimer() {
	d := cn.s.cfg.HeadTimeout
	if cn.headArmed || d <= 0 {
		return
	}
	cn.headArmed = true
	if cn.headTimer == nil {
		cn.headTimer = cn.c.Loop().AfterFunc(d, cn.headExpired)
		return
	}
	cn.headTimer.Reset(d)
}

func (cn *conn) stopHeadTimer() {
	if cn.headArmed {
		cn.headArmed = false
		cn.headTimer.Stop()
	}
}

// headExpired answers 408 to a head that did not arrive in time.
func (cn *conn) headExpired() {
	if !cn.headArmed || cn.c.Closed() {
		return
	}
	cn.headArmed = false
	cn.fail(408, "request head not received in time")
}
