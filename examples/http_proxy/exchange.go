//go:build linux

package main

import (
	"errors"
	"strconv"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/pool"
)

// exchange is a client's request in flight and its upstream connection.
type exchange struct {
	cl          *client
	active      bool
	local       *pool.Local[*upConn]
	lease       pool.Lease[*upConn]
	uc          *upConn
	rd          http1.ResponseDecoder
	head        []byte // the request head sent upstream (reused)
	out         []byte // the response head sent to the client (reused)
	isHead      bool   // a HEAD request
	minor       int    // the client's HTTP minor version
	closeAfter  bool   // the client connection closes after this response
	reqDone     bool   // the whole request went upstream
	respStarted bool   // the response head went to the client
	dechunk     bool   // chunked response to an HTTP/1.0 client: send the data only
	upPaused    bool   // reading the upstream is paused (client backpressure)
	replayable  bool   // idempotent and without a body: it may be sent again
	reused      bool   // the connection carried an exchange before this one
	upBytes     bool   // the upstream sent something for this exchange
	retried     bool   // sent again once already
	timer       *percore.Timer
	gotFn       func(pool.Lease[*upConn], error)
}

// start begins the exchange of the request whose head was just decoded:
// it builds the head for the upstream and asks the loop's pool for a
// connection. Reading the client waits for it (the body has nowhere to go
// yet), and after the request for the response.
func (ex *exchange) start() {
	cl := ex.cl
	req := cl.d.Request()
	ex.active, ex.reqDone, ex.respStarted, ex.dechunk, ex.upPaused = true, false, false, false, false
	ex.isHead = string(req.Method) == "HEAD"
	ex.replayable = idempotent(req.Method) && !req.HasBody()
	ex.upBytes, ex.retried = false, false
	ex.minor = req.Minor
	ex.closeAfter = req.Close || cl.shutdown
	ls := cl.p.loops.Get(cl.c.Loop())
	i := ls.next % len(ls.locals)
	ls.next++
	ex.local = ls.locals[i]
	ex.head = appendUpstreamHead(ex.head[:0], req, cl.ip, cl.p.hosts[i])
	if req.Expect100 {
		// The proxy takes the expectation on itself: the body is wanted
		// (Expect is not forwarded, so the upstream sends no 100).
		cl.c.Write(http1.Continue)
	}
	cl.c.BeginRequest()
	cl.holdRead(holdExchange)
	if !req.HasBody() {
		ex.reqDone = true
	}
	ex.local.Get(ex.gotFn)
}

// got receives the exchange's upstream connection.
func (ex *exchange) got(lease pool.Lease[*upConn], err error) {
	cl := ex.cl
	if cl.closed || !ex.active {
		if lease.Lent() {
			ex.local.Put(lease)
		}
		return
	}
	if err != nil {
		status := 502
		if errors.Is(err, pool.ErrTimeout) {
			status = 504
		}
		ex.fail(status, "upstream: "+err.Error())
		return
	}
	ex.lease, ex.uc = lease, lease.Conn()
	ex.uc.ex = ex
	ex.reused = ex.uc.served > 0
	ex.rd.Reset()
	ex.rd.Expect(ex.isHead)
	ex.uc.pc.Write(ex.head)
	if ex.reqDone {
		ex.armTimer()
	} else {
		cl.releaseRead(holdExchange) // the body may flow
	}
}

// forwardRequest sends request body bytes (with their framing) upstream,
// and holds the client back while the upstream's queue is full.
func (ex *exchange) forwardRequest(raw []byte) {
	if len(raw) == 0 || ex.uc == nil {
		return
	}
	pc := ex.uc.pc
	pc.Write(raw)
	if pc.Backpressured() {
		ex.cl.holdRead(holdUpstream)
	}
}

// upDrained: the upstream took enough of the request body.
func (ex *exchange) upDrained() { ex.cl.releaseRead(holdUpstream) }

// requestSent: the whole request is upstream; the client's next request
// waits for this one's response.
func (ex *exchange) requestSent() {
	if !ex.active {
		return
	}
	ex.reqDone = true
	ex.cl.holdRead(holdExchange)
	if ex.uc != nil {
		ex.armTimer()
	}
}

// armTimer (re)starts the wait for the upstream's next bytes.
func (ex *exchange) armTimer() {
	if ex.cl.p.timeout <= 0 {
		return
	}
	if ex.timer == nil {
		ex.timer = ex.cl.c.Loop().AfterFunc(ex.cl.p.timeout, ex.timedOut)
		return
	}
	ex.timer.Reset(ex.cl.p.timeout)
}

func (ex *exchange) stopTimer() {
	if ex.timer != nil {
		ex.timer.Stop()
	}
}

// timedOut: the upstream sent nothing for the timeout: 504 if the client
// has no response yet, else the client is cut off (its response cannot be
// completed).
func (ex *exchange) timedOut() {
	if !ex.active || ex.uc == nil {
		return
	}
	ex.fail(504, "upstream did not answer in time")
}

// upView receives the upstream's response bytes: the head is rewritten for
// the client, the body forwarded as it came, and reading the upstream stops
// while the client's queue is full.
func (ex *exchange) upView(in []byte) int {
	cl := ex.cl
	ex.upBytes = true
	if ex.reqDone {
		ex.armTimer()
	}
	off := 0
	for {
		n, ev, piece, err := ex.rd.Next(in[off:])
		raw := in[off : off+n]
		off += n
		if err != nil {
			ex.fail(502, "upstream: "+err.Error())
			return len(in)
		}
		switch ev {
		case http1.Head:
			resp := ex.rd.Response()
			if resp.Interim() {
				if resp.Status == 101 {
					ex.fail(502, "upstream switched protocols")
					return len(in)
				}
				if ex.minor == 1 {
					ex.out = appendInterimHead(ex.out[:0], resp)
					cl.c.Write(ex.out)
				}
				continue
			}
			if f := namedFraming(&resp.Header); f != "" {
				ex.fail(502, "upstream: Connection names "+f+", which frames the response")
				return len(in)
			}
			if ex.minor == 0 && !resp.NoBody && resp.Header.Has("transfer-encoding") && !onlyChunked(&resp.Header) {
				ex.fail(502, "upstream: a transfer coding an HTTP/1.0 client cannot read")
				return len(in)
			}
			if !ex.reqDone {
				ex.closeAfter = true // answered before the whole request: the rest cannot be read in step
			}
			if resp.UntilClose {
				ex.closeAfter = true
			}
			if resp.Chunked && ex.minor == 0 {
				ex.dechunk, ex.closeAfter = true, true
			}
			ex.out = appendClientHead(ex.out[:0], resp, ex.closeAfter, ex.minor)
			ex.respStarted = true
			cl.c.Write(ex.out)
		case http1.Body:
			if ex.dechunk {
				cl.c.Write(piece)
			} else {
				cl.c.Write(raw)
			}
			if cl.c.Backpressured() && !ex.upPaused {
				// The client reads slower than the upstream sends: stop
				// reading the upstream until the client drains. The
				// timeout stops too: it measures the upstream's silence,
				// and now the silence is the proxy's.
				ex.upPaused = true
				ex.stopTimer()
				frame.PauseRead(ex.uc.pc)
				return off
			}
		case http1.End:
			if ex.rd.Response().Interim() {
				continue
			}
			if !ex.dechunk {
				cl.c.Write(raw)
			}
			ex.finish(off < len(in))
			return len(in)
		case http1.NeedMore:
			if !ex.dechunk && ex.rd.InBody() {
				cl.c.Write(raw)
			}
			return off
		}
	}
}

// clientDrained: the client's queue drained below its low-water mark.
func (ex *exchange) clientDrained() {
	if ex.upPaused && ex.uc != nil {
		ex.upPaused = false
		if ex.reqDone {
			ex.armTimer()
		}
		frame.ResumeRead(ex.uc.pc)
	}
}

// upClosed: the upstream connection closed during the exchange.
func (ex *exchange) upClosed(err error) {
	if !ex.active {
		return
	}
	if ex.respStarted {
		if ex.rd.EOF() == nil && ex.rd.Response().UntilClose {
			ex.finish(false) // a body delimited by the close: complete
			return
		}
		ex.fail(0, "")
		return
	}
	if ex.reused && !ex.upBytes && ex.replayable && ex.reqDone && !ex.retried {
		// The keep-alive race: the upstream closed an idle connection
		// as the request went out on it. Nothing of the request was
		// answered and it can be sent again: once, on another
		// connection (what nginx's proxy_next_upstream does by default).
		ex.retried = true
		ex.release(true)
		ex.local.Get(ex.gotFn)
		return
	}
	reason := "upstream closed the connection"
	if err != nil {
		reason += ": " + err.Error()
	}
	ex.fail(502, reason)
}

// release gives the upstream connection back to the pool, broken if it is
// out of step.
func (ex *exchange) release(broken bool) {
	ex.stopTimer()
	uc := ex.uc
	if uc == nil {
		return
	}
	ex.uc = nil
	uc.ex = nil
	if broken {
		uc.broken = true
	}
	if ex.upPaused {
		ex.upPaused = false
		frame.ResumeRead(uc.pc)
	}
	lease := ex.lease
	ex.lease = pool.Lease[*upConn]{}
	ex.local.Put(lease)
}

// finish ends an exchange whose response reached the client whole. extra
// says the upstream sent bytes after it.
func (ex *exchange) finish(extra bool) {
	resp := ex.rd.Response()
	if ex.uc != nil {
		ex.uc.served++
	}
	ex.release(extra || resp.Close || !ex.reqDone)
	ex.active = false
	cl := ex.cl
	cl.c.EndRequest()
	if ex.closeAfter || cl.shutdown {
		cl.closed = true
		cl.c.Close()
		return
	}
	cl.releaseRead(holdExchange | holdUpstream)
}

// fail ends an exchange that went wrong: the upstream connection goes back
// broken, the client gets status (if it has no response yet and status is
// not 0) and is closed unless its request was read whole and it may go on.
func (ex *exchange) fail(status int, reason string) {
	if !ex.active {
		return
	}
	ex.release(true)
	ex.active = false
	cl := ex.cl
	cl.c.EndRequest()
	if ex.respStarted || status == 0 {
		cl.closed = true
		cl.c.Abort()
		return
	}
	keep := ex.reqDone && !ex.closeAfter && !cl.shutdown
	ls := cl.p.loops.Get(cl.c.Loop())
	if keep {
		cl.c.Write(appendStatusResponse(nil, status, reason, ls.date.Get(cl.c.Loop().Now())))
		cl.releaseRead(holdExchange | holdUpstream)
		return
	}
	cl.c.Write(http1.AppendError(nil, status, reason, ls.date.Get(cl.c.Loop().Now())))
	cl.closed = true
	cl.c.Close()
}

// abandon ends the exchange of a client that went away.
func (ex *exchange) abandon() {
	if !ex.active {
		return
	}
	ex.release(true)
	ex.active = false
	ex.cl.c.EndRequest()
}

// appendStatusResponse is an error response that keeps the connection.
func appendStatusResponse(dst []byte, status int, reason string, date []byte) []byte {
	body := strconv.Itoa(status) + " " + http1.StatusText(status) + ": " + reason + "\n"
	dst = http1.AppendStatusLine(dst, status)
	dst = http1.AppendHeader(dst, "Date", date)
	dst = append(dst, "Content-Type: text/plain; charset=utf-8\r\n"...)
	dst = http1.AppendContentLength(dst, int64(len(body)))
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

// idempotent reports whether a request with this method may be sent twice
// with the effect of once (RFC 9110 9.2.2).
func idempotent(method []byte) bool {
	switch string(method) {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}
