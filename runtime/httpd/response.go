//go:build linux

package httpd

import (
	"errors"
	"strconv"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/http1"
)

// ErrBodyLength is the error of a Write past the Content-Length the
// response declared.
var ErrBodyLength = errors.New("httpd: wrote more than the declared Content-Length")

// bufferedBody is how much of a body whose length was not declared a
// Response holds before it sends what it has, chunked: below it, the
// response gets a Content-Length.
const bufferedBody = 64 << 10

// Response writes the answer to a request, in place in the connection's
// outbound queue (Conn.Reserve and Commit): the status line, the header
// fields and the body are appended where they will be sent from, with no
// buffer of their own. Call WriteHeader first (without it the status is
// 200), then AddHeader, then Write: the bytes are written in that order.
//
// A body whose length is declared (ContentLength) goes out as written; one
// that is not is held until the response ends, which then gives it a
// Content-Length, unless it grows past 64 KiB or Flush is called first: then
// it is sent chunked (HTTP/1.1) or until the connection closes (HTTP/1.0).
// What a handler wrote is sent when it returns (the answers of one read
// in one write, at the end of the loop's turn). HEAD requests get the
// head of the response alone, its Content-Length the body's that was
// written.
//
// A Response belongs to its connection's loop, and to one request: it is
// valid during the handler's call, and, for a response answered later
// (Hold), until End.
type Response struct {
	cn      *conn
	buf     []byte // bytes not handed to the connection: room it reserved (inPlace), or spill
	spill   []byte // the buffer of writes made outside a handler's call
	inPlace bool
	// kept is how much of buf (a prefix, in place) is the answers that
	// ended earlier in this read, not committed yet: the answers of one
	// read go to the connection in one Commit, when OnView returns
	// (commitKept), or before anything else is written or closed.
	kept int

	status int
	minor  int
	noBody bool  // HEAD: the body is counted, not sent
	bodyAt int   // where the held body starts in buf (0: none yet)
	length int64 // declared Content-Length, -1 if none
	count  int64 // body bytes written
	// started: the status line is written; framed: the head is whole;
	// committed: some of the response was handed to the connection.
	started, framed, committed, ended bool
	chunked, untilClose               bool
	broken                            bool // the framing was not honoured: close after
}

// start readies w for the request whose head is hr.
func (w *Response) start(hr *http1.Request) {
	if w.kept == 0 {
		w.buf, w.inPlace = nil, false
	}
	w.status, w.minor = 200, hr.Minor
	w.noBody = string(hr.Method) == "HEAD"
	w.bodyAt, w.length, w.count = 0, -1, 0
	w.started, w.framed, w.committed, w.ended = false, false, false, false
	w.chunked, w.untilClose, w.broken = false, false, false
}

// Conn returns the connection the response goes to. The answers that
// ended before this one are handed to it first, so that what is written
// to it directly follows them.
func (w *Response) Conn() *percore.Conn {
	w.commitKept()
	return w.cn.c
}

// Started reports whether the status line is written (WriteHeader,
// AddHeader or Write was called).
func (w *Response) Started() bool { return w.started }

// Gone reports whether the connection closed: what is written then is
// dropped.
func (w *Response) Gone() bool { return w.cn.gone || w.cn.c.Closed() }

// WriteHeader sets the status code. Call it before AddHeader and Write;
// later calls, and calls after them, do nothing.
func (w *Response) WriteHeader(code int) {
	if !w.started && code >= 100 && code <= 999 {
		w.status = code
	}
}

// AddHeader appends a header field. A name or value with a CR or LF in it
// is dropped (it would split the head), as are fields added after the
// body began.
func (w *Response) AddHeader(name, value string) {
	if w.ended || w.framed || w.bodyAt > 0 || !validField(name) || !validField(value) {
		return
	}
	if !w.startHead() || !w.grow(len(name)+len(value)+4) {
		return
	}
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, ": "...)
	w.buf = append(w.buf, value...)
	w.buf = append(w.buf, "\r\n"...)
}

// AddHeaderBytes is AddHeader with a value in bytes.
func (w *Response) AddHeaderBytes(name string, value []byte) {
	if w.ended || w.framed || w.bodyAt > 0 || !validField(name) || !validField(value) {
		return
	}
	if !w.startHead() || !w.grow(len(name)+len(value)+4) {
		return
	}
	w.buf = http1.AppendHeader(w.buf, name, value)
}

func validField[T string | []byte](v T) bool {
	for i := 0; i < len(v); i++ {
		// One comparison per byte: CR and LF are under '\r'+1, and so
		// are the few other bytes that need the exact test.
		if c := v[i]; c <= '\r' && (c == '\r' || c == '\n') {
			return false
		}
	}
	return true
}

// ContentLength declares the body's length: the head goes out with it,
// and the body as it is written. Call it before Write.
func (w *Response) ContentLength(n int64) {
	if !w.framed && w.bodyAt == 0 && n >= 0 {
		w.length = n
	}
}

// CloseAfter makes the response say Connection: close, and the
// connection close once it is sent. Call it before the head is sent.
func (w *Response) CloseAfter() { w.cn.closeAfter = true }

// Write appends p to the body. It never blocks: what the client does not
// read waits in the connection's outbound queue, whose cap
// (Config.MaxOutbound) pauses reading from the connection.
func (w *Response) Write(p []byte) (int, error) { return write(w, p) }

// WriteString is Write with a string.
func (w *Response) WriteString(s string) (int, error) { return write(w, s) }

func write[T string | []byte](w *Response, p T) (int, error) {
	if w.ended {
		return 0, errors.New("httpd: write after the response ended")
	}
	if !w.startHead() {
		return 0, w.closedErr()
	}
	if !w.framed {
		if w.length >= 0 {
			w.frame()
		} else {
			if w.noBody || !w.bodyAllowed() {
				w.count += int64(len(p))
				return len(p), nil
			}
			if w.bodyAt == 0 {
				w.bodyAt = len(w.buf)
			}
			if !w.grow(len(p)) {
				return 0, w.closedErr()
			}
			w.buf = append(w.buf, p...)
			w.count += int64(len(p))
			if len(w.buf)-w.bodyAt > bufferedBody {
				w.Flush()
			}
			return len(p), nil
		}
	}
	var err error
	if w.length >= 0 && w.count+int64(len(p)) > w.length {
		p = p[:w.length-w.count]
		err = ErrBodyLength
	}
	w.count += int64(len(p))
	if w.noBody || !w.bodyAllowed() || len(p) == 0 {
		return len(p), err
	}
	if !w.grow(len(p) + 20) {
		return 0, w.closedErr()
	}
	if w.chunked {
		w.buf = strconv.AppendInt(w.buf, int64(len(p)), 16)
		w.buf = append(w.buf, "\r\n"...)
		w.buf = append(w.buf, p...)
		w.buf = append(w.buf, "\r\n"...)
	} else {
		w.buf = append(w.buf, p...)
	}
	return len(p), err
}

func (w *Response) closedErr() error {
	return errors.New("httpd: the connection is closed")
}

// Flush sends what was written: the head, with Content-Length if it was
// declared, else chunked (HTTP/1.1) or until the connection closes
// (HTTP/1.0), and the body so far. A handler's writes are flushed when it
// returns anyway: call Flush from a callback of your own (a timer, an
// upstream's reply) that writes to a held response, or to send part of a
// body now.
func (w *Response) Flush() {
	if w.ended || !w.startHead() {
		return
	}
	if !w.framed {
		w.frame()
	}
	w.send()
}

// frame completes the head: the Connection field and the framing are
// inserted where the held body starts (or appended), the held body made
// the first chunk of a chunked one.
func (w *Response) frame() {
	w.framed = true
	body := 0
	at := len(w.buf)
	if w.bodyAt > 0 {
		at = w.bodyAt
		body = len(w.buf) - at
	}
	switch {
	case w.length >= 0 || !w.bodyAllowed():
	case w.ended:
		w.length = w.count // the body is all here (or counted, for HEAD)
	case w.minor >= 1:
		w.chunked = true
	default:
		w.untilClose = true
	}
	var tb [96]byte
	tail := w.appendTail(tb[:0])
	if w.chunked && body > 0 {
		tail = strconv.AppendInt(tail, int64(body), 16)
		tail = append(tail, "\r\n"...)
	}
	extra := 0
	if w.chunked && body > 0 {
		extra = 2
	}
	if !w.grow(len(tail) + extra) {
		return
	}
	k := len(tail)
	w.buf = w.buf[:len(w.buf)+k]
	copy(w.buf[at+k:], w.buf[at:len(w.buf)-k])
	copy(w.buf[at:], tail)
	if extra > 0 {
		w.buf = append(w.buf, "\r\n"...)
	}
	w.bodyAt = 0
}

// bodyAllowed reports whether the status may have a body (and framing).
func (w *Response) bodyAllowed() bool {
	return w.status >= 200 && w.status != 204 && w.status != 304
}

// appendTail appends the end of the head: Connection, the framing, the
// empty line.
func (w *Response) appendTail(dst []byte) []byte {
	cn := w.cn
	switch {
	case w.status == 101:
	case cn.closeAfter || cn.shutdown || cn.eof || w.untilClose:
		cn.closeAfter = true
		dst = append(dst, "Connection: close\r\n"...)
	case w.minor == 0:
		dst = append(dst, "Connection: keep-alive\r\n"...)
	}
	switch {
	case !w.bodyAllowed():
	case w.chunked:
		dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
	case w.length >= 0:
		dst = http1.AppendContentLength(dst, w.length)
	}
	return append(dst, "\r\n"...)
}

// startHead writes the status line and the fields every response has. It
// returns false when the connection can no longer be written to.
func (w *Response) startHead() bool {
	if w.started {
		return true
	}
	if w.Gone() {
		return false
	}
	cn := w.cn
	ls := cn.ls
	common := ls.common(cn.s, cn.c.Loop().Now())
	if !w.grow(startRoom) {
		return false
	}
	w.started = true
	if w.status == 200 {
		w.buf = append(w.buf, common...) // the status line and the fields in one copy
	} else {
		w.buf = http1.AppendStatusLine(w.buf, w.status)
		w.buf = append(w.buf, common[len(status200):]...)
	}
	return true
}

// end completes the response: the head if it is not sent (with the held
// body's Content-Length), the last chunk, and sends it.
func (w *Response) end() {
	if w.ended {
		return
	}
	if !w.started && !w.startHead() {
		w.ended = true
		return
	}
	w.ended = true
	switch {
	case !w.framed:
		w.frame()
	case w.chunked:
		if w.grow(5) {
			w.buf = http1.AppendLastChunk(w.buf)
		}
	case w.length >= 0 && w.count < w.length && w.bodyAllowed() && !w.noBody:
		w.broken = true // fewer bytes than declared: only a close tells the client
	}
	if !w.keep() {
		w.send()
	}
}

// releaseSpill gives the spill buffer back to the loop.
func (w *Response) releaseSpill() {
	if w.spill != nil {
		w.cn.ls.putBuf(w.spill)
		w.spill = nil
	}
}

// Hold makes the response answered later: the handler returns without
// ending it, and End, called later on the connection's loop (from a
// timer, an upstream's reply, a function posted to the loop), ends it.
// Meanwhile the connection's later requests wait (pipelined ones are
// answered after it, in order), a graceful shutdown waits for it, and
// Config.HandlerTimeout bounds it (503 past it). The Request stays valid
// until End. Writes from a callback of your own must be followed by
// Flush or End in that callback.
func (w *Response) Hold() { w.cn.hold(true) }

// End ends a response that Hold held: what was written and the rest of
// the head are sent, and the connection's next request is read. It does
// nothing for a response not held, or once the connection closed.
func (w *Response) End() {
	cn := w.cn
	if !cn.held || !cn.inRequest {
		return
	}
	if cn.gone || cn.c.Closed() {
		cn.held = false
		return
	}
	if cn.job != nil {
		cn.job = nil
	}
	w.end()
	if cn.c.Closed() {
		return
	}
	cn.finish() // it resumes the input held behind this request

}
