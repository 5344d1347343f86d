//go:build linux

package httpd

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	percore "github.com/percore/percore/runtime"
)

// Go answers the request of w off the loop: work runs on the server's
// worker pool (Config.Workers goroutines at most, started as needed, not
// one per call) with a context that is cancelled when the client goes
// away, the request passes Config.HandlerTimeout or the server closes,
// and the function it returns runs back on the connection's loop to
// write the answer into w. That is the one way to do blocking work (a
// database call, a file read through a library, an outbound net/http
// call) from a handler:
//
//	mux.HandleFunc("GET /users/{id}", func(w *httpd.Response, r *httpd.Request) {
//		id := string(r.PathValue("id")) // copied: r is the loop's
//		srv.Go(w, func(ctx context.Context) func(*httpd.Response) {
//			v, err := db.Get(ctx, id) // blocks this worker, not the loop
//			return func(w *httpd.Response) {
//				if err != nil {
//					w.WriteHeader(404)
//					return
//				}
//				w.Write(v)
//			}
//		})
//	})
//
// A graceful shutdown (Runtime.Shutdown) cancels the context too, as it
// begins, with ErrShuttingDown as its cause (context.Cause): the work
// returns early and its answer, written as usual, goes out with
// Connection: close; the shutdown waits for that answer, not for the
// work's natural end or HandlerTimeout.
//
// Meanwhile the loop serves its other connections; this connection's
// later requests (pipelined ones) wait and are answered after this one,
// in order; a graceful shutdown waits for it (Conn.BeginRequest and
// EndRequest are done for you). When every worker is busy and
// Config.MaxQueue jobs wait, the request is answered 503 at once and
// counted (Stats.Rejected). A panic in work or in its answer is answered
// 500 and logged. work must not touch w or the Request; copy what it
// needs first. The answer is not run when the connection closed or the
// request timed out meanwhile.
//
// Go must be called from a handler's call, on the loop, once per request.
//
// A TCP backend does not need Go: the loop's own pool
// (runtime/pool/upstream) sends and receives on the loop without a
// goroutine, which is several times cheaper per request. Hold the
// response, do the exchange, and End it from the exchange's callback:
//
//	w.Hold()
//	x.Do(lease, req, func(reply []byte, err error) {
//		w.Write(reply)
//		w.End()
//	})
func (s *Server) Go(w *Response, work func(ctx context.Context) func(w *Response)) {
	cn := w.cn
	if !cn.inRequest || cn.job != nil || cn.c.Closed() {
		return
	}
	ctx, cancel := jobContext()
	j := &job{cn: cn, l: cn.c.Loop(), ctx: ctx, cancel: cancel, work: work}
	if !s.pool.submit(j) {
		cancel(nil)
		s.nReject.Add(1)
		busy(w)
		return
	}
	s.nOffload.Add(1)
	cn.hold(true)
	cn.job = j
	if cn.shutdown {
		j.cancel(ErrShuttingDown) // work begun during a shutdown is told at once
	}
}

// busy answers 503 for a job the pool refused.
func busy(w *Response) {
	if w.started {
		w.cn.fail(503, "the server's workers are busy")
		return
	}
	w.WriteHeader(503)
	w.AddHeader("Content-Type", "text/plain")
	w.AddHeader("Retry-After", "1")
	w.WriteString("503 Service Unavailable: the server's workers are busy\n")
}

// jobContext returns the context of a job. It is no child of a context
// of the server's: Close cancels the running jobs itself (workers.close),
// so that making and cancelling one takes no lock that every job shares
// (a parent's list of children).
func jobContext() (context.Context, context.CancelCauseFunc) {
	return context.WithCancelCause(context.Background())
}

// job is one piece of offloaded work and its way back to the loop.
type job struct {
	cn     *conn
	l      *percore.Loop
	ctx    context.Context
	cancel context.CancelCauseFunc
	work   func(ctx context.Context) func(w *Response)
	answer func(w *Response)
	panic  any
	ar     *adaptedRequest // the adapter's request, or nil: a Go job
}

// run is the job on its worker.
func (j *job) run() {
	if j.ar != nil {
		j.ar.run()
		return
	}
	j.runGo()
}

// runGo is a Go job on its worker.
func (j *job) runGo() {
	func() {
		defer func() {
			if p := recover(); p != nil {
				j.panic = p
			}
		}()
		j.answer = j.work(j.ctx)
	}()
	j.post(j.answerGo)
}

// post runs f on the job's loop, waiting while the loop's queue is full
// (the job was admitted: its answer must not be lost to a busy loop).
func (j *job) post(f func()) {
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		err := j.l.Post(f)
		if err == nil || !errors.Is(err, percore.ErrLoopBusy) {
			if err != nil {
				j.cancel(nil)
			}
			return
		}
		time.Sleep(wait)
	}
}

// answerGo runs a Go job's answer on the loop and ends the response.
func (j *job) answerGo() {
	j.cancel(nil)
	cn := j.cn
	if cn.job != j || cn.gone || cn.c.Closed() {
		return // the request timed out, or its client went away
	}
	cn.job = nil
	if j.panic != nil {
		cn.panicked = true
		cn.s.nPanic.Add(1)
		cn.s.log.Error("httpd: offloaded work panicked", "panic", j.panic)
		cn.held = false
		cn.fail(500, "the handler panicked")
		return
	}
	cn.runHeld(j.answer)
}

// runHeld runs f (may be nil) to write a held response, then ends it.
func (cn *conn) runHeld(f func(w *Response)) {
	cn.ending = true
	func() {
		cn.active = true
		defer cn.recovered()
		if f != nil {
			f(&cn.w)
		}
		cn.w.end()
	}()
	if cn.held && cn.inRequest && !cn.c.Closed() {
		cn.finish()
	}
}

// cancelJob cancels the context of the work answering the connection's
// request and forgets it: its answer will not run.
func (cn *conn) cancelJob() {
	if cn.job != nil {
		cn.job.cancel(nil)
		cn.job = nil
	}
}

// workers is the server's bounded pool of goroutines for offloaded work:
// at most max run, started as jobs come and kept until Close; at most
// max+queue jobs are admitted at once.
type workers struct {
	jobs    chan *job
	max     int32
	limit   int64
	started atomic.Int32
	pending atomic.Int64
	running []atomic.Pointer[job] // each worker's job, for close to cancel
	closing atomic.Bool
	mu      sync.Mutex
	closed  bool
	wg      sync.WaitGroup
}

func (p *workers) init(n, queue int) {
	switch {
	case queue == 0:
		queue = DefaultMaxQueue
	case queue < 0:
		queue = 0
	}
	p.max = int32(n)
	p.limit = int64(n + queue)
	p.jobs = make(chan *job, n+queue)
	p.running = make([]atomic.Pointer[job], n)
}

// submit admits j, or reports that the pool is full (or closed).
func (p *workers) submit(j *job) bool {
	n := p.pending.Add(1)
	if n > p.limit {
		p.pending.Add(-1)
		return false
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.pending.Add(-1)
		return false
	}
	if st := p.started.Load(); st < p.max && int64(st) < n {
		// Fewer workers than admitted jobs: one more.
		i := p.started.Add(1) - 1
		p.wg.Add(1)
		go p.worker(&p.running[i])
	}
	p.jobs <- j // room for every admitted job: never blocks
	p.mu.Unlock()
	return true
}

// worker runs jobs until close closes the channel: one receive per job,
// the job in slot while it runs (close cancels it there); once closing,
// the jobs still queued are cancelled, not run.
func (p *workers) worker(slot *atomic.Pointer[job]) {
	defer p.wg.Done()
	for j := range p.jobs {
		slot.Store(j)
		if p.closing.Load() {
			j.cancel(nil) // close may have looked at slot before j was in it
		} else {
			j.run()
		}
		slot.Store(nil)
		p.pending.Add(-1)
	}
}

// close cancels the running jobs' contexts, drops the queued ones and
// stops the workers once their jobs return.
func (p *workers) close() {
	p.mu.Lock()
	p.closed = true
	p.closing.Store(true)
	close(p.jobs) // submit sends under mu, never after this
	p.mu.Unlock()
	for i := range p.running {
		if j := p.running[i].Load(); j != nil {
			j.cancel(nil)
		}
	}
	p.wg.Wait()
	for j := range p.jobs { // queued with no worker to drop them
		j.cancel(nil)
	}
}
