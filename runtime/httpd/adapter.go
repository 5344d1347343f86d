//go:build linux

package httpd

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/runtime/frame"
)

// ErrHijack is what the adapter's Hijack returns: a percore loop owns the
// connection's socket and does its reads and writes, so there is no
// net.Conn to hand over.
var ErrHijack = errors.New("httpd: Hijack is not supported: the connection's socket belongs to a percore loop, not a net.Conn " +
	"(answer the upgrade with an inline handler and Response.Upgrade instead)")

// Adapt runs a net/http handler (an http.ServeMux with its patterns,
// net/http/pprof, middleware) on the server's worker pool, with the loop
// doing every socket operation: the handler starts once the head has
// arrived, with an http.Request whose Body is fed from the loop as the
// body arrives and whose context is cancelled when the client goes away,
// the request passes Config.HandlerTimeout, a graceful shutdown begins
// (its cause ErrShuttingDown, as for Server.Go) or the server closes; its
// ResponseWriter sends through the loop, its writes waiting while the
// connection's outbound queue is over its cap (Config.MaxOutbound). It
// implements http.Flusher, and http.ResponseController's SetReadDeadline
// (the body's reads), SetWriteDeadline (the writes' waits) and
// EnableFullDuplex (always on); Hijack returns ErrHijack. A panic is
// answered 500 and logged (http.ErrAbortHandler closes the connection
// without a log), and the loop goes on. The connection's pipelined
// requests wait behind the one being served, as in net/http.
//
// The adapter is a StreamHandler: route it with a Mux, or give it to New.
func Adapt(h http.Handler) Handler { return &adapted{h: h} }

type adapted struct{ h http.Handler }

// bodyWindow is how much of a request's body the adapter holds for the
// handler before it stops reading from the connection.
const bodyWindow = 256 << 10

// flushAt is how much a ResponseWriter gathers before it sends.
const flushAt = 32 << 10

// ServeHTTP starts the net/http handler for the request whose head
// arrived.
func (a *adapted) ServeHTTP(w *Response, r *Request) {
	cn := w.cn
	s := cn.s
	ctx, cancel := jobContext()
	ar := newAdaptedRequest(cn, r.hr, a.h, ctx)
	if ar == nil {
		cancel(nil)
		w.WriteHeader(400)
		w.CloseAfter()
		w.WriteString("400 Bad Request: malformed request target\n")
		return
	}
	if ls := cn.ls; ls.done.drain == nil {
		ls.done.drain = ls.done.drainAll
	}
	j := &ar.jobv
	*j = job{cn: cn, l: cn.c.Loop(), ctx: ctx, cancel: cancel, ar: ar}
	ar.job = j // before the worker can start
	if !s.pool.submit(j) {
		cancel(nil)
		s.nReject.Add(1)
		busy(w)
		return
	}
	s.nOffload.Add(1)
	cn.hold(false)
	cn.job = j
	cn.aw = ar
	if cn.shutdown {
		cancel(ErrShuttingDown)
	}
}

// OnBody hands a piece of the body to the handler's reads; past the
// window, reading from the connection pauses until the handler reads.
func (a *adapted) OnBody(w *Response, r *Request, piece []byte) {
	ar, ok := w.cn.aw.(*adaptedRequest)
	if !ok {
		return // refused (503): the body is dropped
	}
	ar.mu.Lock()
	ar.body = append(ar.body, piece...)
	full := len(ar.body) >= bodyWindow && !ar.dead
	if full {
		ar.paused = true
	}
	ar.cond.Broadcast()
	ar.mu.Unlock()
	if full {
		w.cn.pauseBody()
	}
}

// OnEnd ends the body the handler reads.
func (a *adapted) OnEnd(w *Response, r *Request) {
	if ar, ok := w.cn.aw.(*adaptedRequest); ok {
		ar.mu.Lock()
		ar.bodyDone = true
		ar.cond.Broadcast()
		ar.mu.Unlock()
	}
}

// adaptedRequest is one request served by a net/http handler: what the
// loop and the handler's goroutine share. mu guards the body's fields and
// dead; the response's are the worker's until it posts them, and the
// loop's until it acks.
type adaptedRequest struct {
	cn  *conn // the loop's only
	h   http.Handler
	job *job
	req *http.Request
	rw  *responseWriter

	// What the request is built of (newAdaptedRequest): one allocation.
	url      url.URL
	bodyv    adaptedBody
	rwv      responseWriter
	jobv     job
	out      [512]byte // the ResponseWriter's first buffer
	finalBuf []byte    // the last flush, for doneBox
	finalP   any

	mu       sync.Mutex
	cond     sync.Cond
	body     []byte
	bodyDone bool
	paused   bool // reading from the connection paused for the window
	dead     bool // the connection went away, or the request timed out
	readDL   time.Time
	dlTimer  *time.Timer

	ack     chan struct{} // the loop took a flush (or the request died); made by the first flush that waits
	waiting bool          // the loop waits for OnDrain before it acks (loop's)
	gone_   atomic.Bool
}

// gone is the connection's end, or the request's timeout (on the loop).
func (ar *adaptedRequest) gone() {
	ar.gone_.Store(true)
	ar.mu.Lock()
	ar.dead = true
	ar.cond.Broadcast()
	ar.mu.Unlock()
	if ar.waiting {
		ar.waiting = false
		ar.signal()
	}
	ar.job.cancel(nil)
}

// eof is the end of the client's stream (on the loop): the body's reads
// end (io.ErrUnexpectedEOF when it was not whole) and the context is
// cancelled, but the answer still goes out.
func (ar *adaptedRequest) eof() {
	ar.mu.Lock()
	if !ar.bodyDone {
		ar.dead = true
	}
	ar.cond.Broadcast()
	ar.mu.Unlock()
	ar.job.cancel(nil)
}

// drained is OnDrain: a write waiting for the queue goes on.
func (ar *adaptedRequest) drained() {
	if ar.waiting {
		ar.waiting = false
		ar.signal()
	}
}

func (ar *adaptedRequest) signal() {
	select {
	case ar.ack <- struct{}{}:
	default:
	}
}

// pauseBody stops taking the body until the handler has read some.
func (cn *conn) pauseBody() {
	cn.bodyPaused = true
	frame.PauseRead(cn.c)
}

// resumeBody undoes pauseBody (on the loop).
func (cn *conn) resumeBody() {
	if cn.bodyPaused && !cn.gone {
		cn.bodyPaused = false
		frame.ResumeRead(cn.c)
	}
}

// run is the handler's goroutine.
func (ar *adaptedRequest) run() {
	h := ar.h
	rw := ar.rw
	defer func() {
		p := recover()
		if p != nil && p != http.ErrAbortHandler {
			ar.cn.s.log.Error("httpd: net/http handler panic", "panic", p, "method", ar.req.Method, "uri", ar.req.RequestURI)
		}
		rw.finish(p)
	}()
	h.ServeHTTP(rw, ar.req)
}

// adaptedBody is the request's Body: reads wait for the loop's pieces.
type adaptedBody struct {
	ar     *adaptedRequest
	closed bool
}

func (b *adaptedBody) Read(p []byte) (int, error) {
	ar := b.ar
	ar.mu.Lock()
	defer ar.mu.Unlock()
	for len(ar.body) == 0 && !ar.bodyDone {
		switch {
		case b.closed:
			return 0, http.ErrBodyReadAfterClose
		case ar.dead:
			return 0, io.ErrUnexpectedEOF
		case !ar.readDL.IsZero() && !time.Now().Before(ar.readDL):
			return 0, os.ErrDeadlineExceeded
		}
		ar.cond.Wait()
	}
	if len(ar.body) == 0 {
		return 0, io.EOF
	}
	n := copy(p, ar.body)
	ar.body = ar.body[n:]
	if len(ar.body) == 0 {
		ar.body = ar.body[:0:0] // let the loop start a new buffer
	}
	if ar.paused && len(ar.body) < bodyWindow/2 {
		ar.paused = false
		ar.job.post(ar.cn.resumeBody)
	}
	return n, nil
}

func (b *adaptedBody) Close() error {
	b.ar.mu.Lock()
	b.closed = true
	b.ar.mu.Unlock()
	return nil
}

// setReadDeadline bounds the body's reads.
func (ar *adaptedRequest) setReadDeadline(t time.Time) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	ar.readDL = t
	if ar.dlTimer != nil {
		ar.dlTimer.Stop()
	}
	if !t.IsZero() {
		ar.dlTimer = time.AfterFunc(time.Until(t), func() {
			ar.mu.Lock()
			ar.cond.Broadcast()
			ar.mu.Unlock()
		})
	}
}
