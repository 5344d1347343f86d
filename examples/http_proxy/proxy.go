//go:build linux

package main

import (
	"errors"
	"net"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/pool"
)

// maxHeld bounds what frame.View holds for a connection between reads: a
// partial head (the codec rejects one over MaxHeaderBytes), a partial chunk
// line or trailer section, or while reading is paused the rest of one read.
const maxHeld = http1.DefaultMaxHeaderBytes + 2*percore.DefaultBufferSize

// proxy is the handler of client connections (behind frame.View) and the
// owner of the upstream pools.
type proxy struct {
	pools   []*pool.Pool[*upConn]
	hosts   [][]byte // each upstream's address, the Host of a request without one
	timeout time.Duration
	idle    time.Duration // a client's idle timeout, while the proxy reads it
	lim     http1.Limits
	loops   percore.PerLoop[loopState]
}

// loopState is one loop's: its Date cache, its pools' Locals and the
// round-robin position among the upstreams.
type loopState struct {
	date   http1.Date
	locals []*pool.Local[*upConn]
	next   int
}

var (
	_ frame.ViewHandler       = (*proxy)(nil)
	_ frame.ErrorHandler      = (*proxy)(nil)
	_ percore.OpenHandler     = (*proxy)(nil)
	_ percore.CloseHandler    = (*proxy)(nil)
	_ percore.DrainHandler    = (*proxy)(nil)
	_ percore.ShutdownHandler = (*proxy)(nil)
)

func (p *proxy) setup(l *percore.Loop) error {
	ls := loopState{}
	for _, pl := range p.pools {
		ls.locals = append(ls.locals, pl.Local(l))
	}
	p.loops.Set(l, ls)
	return nil
}

func (p *proxy) handler() percore.Handler {
	return frame.View(p, frame.SplitConfig{MaxBuffered: maxHeld})
}

// Why a client's reading is held (a bit set: reading resumes when none is).
const (
	holdExchange = 1 << iota // an exchange is waiting for its connection or its response
	holdUpstream             // the upstream's outbound queue is full (request body backpressure)
)

// client is one client connection.
type client struct {
	c        *percore.Conn
	p        *proxy
	d        http1.RequestDecoder
	ip       []byte // the client's address, for X-Forwarded-For
	hold     uint8
	paused   bool // frame.PauseRead is in effect
	inView   bool // OnView is running
	closed   bool
	shutdown bool
	ex       exchange
}

func (p *proxy) OnOpen(c *percore.Conn) {
	cl := &client{c: c, p: p, d: http1.RequestDecoder{Limits: p.lim}}
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		cl.ip = ta.AddrPort().Addr().Unmap().AppendTo(nil)
	}
	cl.ex.cl = cl
	cl.ex.gotFn = cl.ex.got
	c.SetValue(cl)
}

func (p *proxy) OnClose(c *percore.Conn, _ error) {
	if cl, ok := c.Value().(*client); ok {
		cl.closed = true
		cl.ex.abandon()
	}
}

// OnDrain: the client took enough of a response body to read the upstream
// again.
func (p *proxy) OnDrain(c *percore.Conn) {
	cl := c.Value().(*client)
	cl.ex.clientDrained()
}

func (p *proxy) OnShutdown(c *percore.Conn) {
	if cl, ok := c.Value().(*client); ok {
		cl.shutdown = true
	}
}

// holdRead adds a reason to stop reading the client.
func (cl *client) holdRead(why uint8) {
	cl.hold |= why
	if !cl.inView && !cl.paused {
		cl.pause()
	}
}

// releaseRead removes a reason; with none left, reading resumes (and what
// View kept is shown at once).
func (cl *client) releaseRead(why uint8) {
	cl.hold &^= why
	if cl.hold == 0 && cl.paused && !cl.inView && !cl.closed {
		cl.paused = false
		cl.c.SetIdleTimeout(cl.p.idle)
		frame.ResumeRead(cl.c)
	}
}

// pause stops reading the client, and its idle timeout with it: while the
// proxy does not read, the client's silence is the proxy's doing (it waits
// for its response, or its upload is held back for a slow upstream). The
// idle clock starts again when reading resumes.
func (cl *client) pause() {
	cl.paused = true
	cl.c.SetIdleTimeout(0)
	frame.PauseRead(cl.c)
}

// OnView decodes the client's requests, one exchange at a time: a head
// starts an exchange, its body is forwarded as it arrives, and the next
// request waits until the response is complete.
func (p *proxy) OnView(c *percore.Conn, in []byte) (int, error) {
	cl := c.Value().(*client)
	cl.inView = true
	off, err := cl.view(in)
	cl.inView = false
	if cl.hold != 0 && !cl.paused && !cl.closed {
		cl.pause()
	}
	return off, err
}

func (cl *client) view(in []byte) (int, error) {
	ex := &cl.ex
	off := 0
	for cl.hold == 0 && !cl.closed {
		n, ev, _, err := cl.d.Next(in[off:])
		raw := in[off : off+n]
		off += n
		if err != nil {
			if ex.active {
				// Mid-exchange the stream is lost: nothing can be
				// answered in order.
				ex.fail(0, "")
				cl.c.Abort()
				return off, nil
			}
			return off, err // OnFrameError answers it
		}
		switch ev {
		case http1.Head:
			if err := refuse(cl.d.Request()); err != nil {
				return off, err // OnFrameError answers it, and the connection closes
			}
			ex.start()
		case http1.Body:
			ex.forwardRequest(raw)
		case http1.End:
			ex.forwardRequest(raw)
			ex.requestSent()
		case http1.NeedMore:
			if cl.d.InBody() {
				ex.forwardRequest(raw)
			}
			return off, nil
		}
	}
	return off, nil
}

// errConnect is the answer to CONNECT.
var errConnect = &http1.Error{Status: 501, Reason: "CONNECT: the proxy opens no tunnels"}

// refuse returns the error a request gets instead of being forwarded, or
// nil: one whose Connection names a framing field (fieldTable), and
// CONNECT (a reverse proxy forwards to origin servers; a tunnel through it
// would be a connection the proxy can neither frame nor pool).
func refuse(req *http1.Request) error {
	if f := namedFraming(&req.Header); f != "" {
		return &http1.Error{Status: 400, Reason: "Connection names " + f + ", which frames the message"}
	}
	if string(req.Method) == "CONNECT" {
		return errConnect
	}
	return nil
}

// OnFrameError answers a request the codec rejected before any exchange
// began for it.
func (p *proxy) OnFrameError(c *percore.Conn, err error) {
	status, reason := 431, "request too large"
	var he *http1.Error
	if errors.As(err, &he) {
		status, reason = he.Status, he.Reason
	}
	ls := p.loops.Get(c.Loop())
	c.Write(http1.AppendError(nil, status, reason, ls.date.Get(c.Loop().Now())))
}
