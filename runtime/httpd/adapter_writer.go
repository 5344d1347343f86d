//go:build linux

package httpd

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// responseWriter is the http.ResponseWriter: it gathers the handler's
// writes and hands them to the loop at a flush, waiting until the loop
// took them (and the outbound queue is under its cap).
type responseWriter struct {
	ar      *adaptedRequest
	hdr     http.Header
	status  int
	wrote   bool // WriteHeader (or the first Write) happened
	sent    bool // the head went to the loop
	buf     []byte
	writeDL time.Time
}

var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
	_ http.Hijacker       = (*responseWriter)(nil)
)

func (rw *responseWriter) Header() http.Header { return rw.hdr }

func (rw *responseWriter) WriteHeader(code int) {
	if rw.wrote {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code < 200 && code != 101 {
		return // informational answers are not forwarded
	}
	rw.wrote, rw.status = true, code
}

func (rw *responseWriter) Write(p []byte) (int, error) {
	if !rw.wrote {
		rw.WriteHeader(200)
	}
	if rw.ar.gone_.Load() {
		return 0, rw.goneErr()
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), flushAt-len(rw.buf))
		rw.buf = append(rw.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(rw.buf) >= flushAt {
			if err := rw.flush(false, nil); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (rw *responseWriter) goneErr() error {
	if err := context.Cause(rw.ar.req.Context()); err != nil {
		return err
	}
	return net.ErrClosed
}

// Flush sends what was written.
func (rw *responseWriter) Flush() {
	if !rw.wrote {
		rw.WriteHeader(200)
	}
	rw.flush(false, nil)
}

// FlushError is Flush with its error (http.ResponseController).
func (rw *responseWriter) FlushError() error {
	if !rw.wrote {
		rw.WriteHeader(200)
	}
	return rw.flush(false, nil)
}

// Hijack returns ErrHijack.
func (rw *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) { return nil, nil, ErrHijack }

// SetReadDeadline bounds the body's reads (http.ResponseController).
func (rw *responseWriter) SetReadDeadline(t time.Time) error {
	rw.ar.setReadDeadline(t)
	return nil
}

// SetWriteDeadline bounds how long a write waits for the loop to take it
// (http.ResponseController); past it the write fails with
// os.ErrDeadlineExceeded and the connection closes.
func (rw *responseWriter) SetWriteDeadline(t time.Time) error {
	rw.writeDL = t
	return nil
}

// EnableFullDuplex does nothing: the body can always be read while the
// response is written.
func (rw *responseWriter) EnableFullDuplex() error { return nil }

// finish is the handler's return (or panic): the rest goes to the loop,
// which ends the response.
func (rw *responseWriter) finish(p any) {
	if p == nil && !rw.wrote {
		rw.WriteHeader(200)
	}
	rw.flush(true, p)
	rw.ar.job.cancel(nil)
}

// flush hands the gathered bytes to the loop and waits until it took them.
func (rw *responseWriter) flush(final bool, p any) error {
	ar := rw.ar
	if ar.gone_.Load() {
		return rw.goneErr()
	}
	buf := rw.buf
	if final {
		// The loop no longer needs the worker: its end goes through the
		// loop's doneBox, without a closure of its own.
		ar.finalBuf, ar.finalP = buf, p
		if d := &ar.cn.ls.done; d.push(ar) {
			ar.job.post(d.drain)
		}
		return nil
	}
	if ar.ack == nil {
		ar.ack = make(chan struct{}, 1) // before the post: the loop signals on it
	}
	ar.job.post(func() { ar.onLoop(buf, final, p) })
	var timeout <-chan time.Time
	if !rw.writeDL.IsZero() {
		t := time.NewTimer(time.Until(rw.writeDL))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ar.ack:
	case <-timeout:
		rw.buf = nil // the loop may still copy it
		ar.job.post(func() {
			if ar.cn.aw == ar {
				ar.cn.c.Abort()
			}
		})
		return os.ErrDeadlineExceeded
	}
	if ar.gone_.Load() {
		return rw.goneErr()
	}
	rw.buf = rw.buf[:0]
	return nil
}

// onLoop takes a flush of the handler's on the loop: the head once, the
// bytes, and at the end the response's end.
func (ar *adaptedRequest) onLoop(buf []byte, final bool, p any) {
	cn := ar.cn
	rw := ar.rw
	if cn.aw != ar || cn.gone || cn.c.Closed() {
		ar.signal()
		return
	}
	if p != nil {
		cn.aw = nil
		cn.job = nil
		cn.held = false
		if p == http.ErrAbortHandler {
			cn.c.Abort()
			return
		}
		cn.s.nPanic.Add(1)
		cn.panicked = true
		cn.fail(500, "the handler panicked")
		return
	}
	w := &cn.w
	cn.active = true
	if !rw.sent {
		rw.sent = true
		rw.writeHead(w, buf)
	}
	w.Write(buf)
	if final {
		cn.aw = nil
		cn.job = nil
		w.end()
		cn.active = false
		if cn.bodyPaused {
			cn.resumeBody() // a body the handler did not read: drop the rest
		}
		if cn.held && cn.inRequest && !cn.c.Closed() {
			cn.finish()
		}
		return
	}
	w.Flush()
	cn.active = false
	if cn.c.Backpressured() {
		ar.waiting = true // ack on OnDrain
		return
	}
	ar.signal()
}

// writeHead writes the handler's status and header fields into w.
func (rw *responseWriter) writeHead(w *Response, buf []byte) {
	w.WriteHeader(rw.status)
	h := rw.hdr
	if _, ok := h["Content-Type"]; !ok && len(buf) > 0 && w.bodyAllowed() {
		w.AddHeader("Content-Type", http.DetectContentType(buf[:min(len(buf), 512)]))
	}
	for k, vs := range h {
		switch k {
		case "Content-Length":
			if n, err := strconv.ParseInt(vs[0], 10, 64); err == nil && n >= 0 {
				w.ContentLength(n)
			}
			continue
		case "Transfer-Encoding", "Trailer":
			continue
		case "Connection":
			for _, v := range vs {
				if v == "close" {
					w.CloseAfter()
				}
			}
			if rw.status != 101 {
				continue
			}
		}
		for _, v := range vs {
			w.AddHeader(k, v)
		}
	}
}
