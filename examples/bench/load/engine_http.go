//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/http1"
)

// httpMode is the HTTP/1.1 workload the -http flags ask for: GET Path on
// keep-alive connections, Workload.Pipeline requests in flight on each,
// every response checked for status 200 and, when Body is set, for that
// body byte for byte (Workload.Bytes does not apply).
type httpMode struct {
	Path   string // "" means the echo workload, not HTTP
	Body   string
	IsSet  bool // -http-body was given
	Method string
}

// httpEngine runs an httpMode on percore's client side, as percoreEngine
// runs the echo workload: one pinned loop per CPU the generator may use,
// each driving its share of the connections from handlers on its thread,
// parsing responses in place with runtime/frame/http1 (frame.View), with
// no allocation per request.
type httpEngine struct {
	mode    httpMode
	backend percore.Backend
}

// Run implements Engine.
func (e httpEngine) Run(ctx context.Context, wl Workload, rec *Recorder) error {
	addr, err := resolve(wl.Addr)
	if err != nil {
		return fmt.Errorf("http engine: %w", err)
	}
	rt, err := percore.New(wl.loopConfig(e.backend), nil)
	if err != nil {
		return fmt.Errorf("http engine: %w", err)
	}
	defer rt.Close()
	method := e.mode.Method
	if method == "" {
		method = "GET"
	}
	req := []byte(method + " " + e.mode.Path + " HTTP/1.1\r\nHost: " + wl.Addr + "\r\n\r\n")
	n := wl.depth()
	reqs := bytes.Repeat(req, n)
	loops := rt.Loops()
	clients := make([]*httpLoop, len(loops))
	sched := newSchedule(wl, time.Now())
	for i, l := range loops {
		hl := &httpLoop{loop: l, addr: addr, mode: e.mode, w: rec.NewWorker(), done: make(chan struct{})}
		hl.pace = newLoopPacer(l, sched, hl.w, wl)
		clients[i] = hl
	}
	for id := range wl.Conns {
		hl := clients[id%len(clients)]
		hc := &httpConn{hl: hl, n: n, req: req, reqs: reqs, sent: make([]time.Time, n), bl: backlog{id: id}}
		hl.conns = append(hl.conns, hc)
		if hl.pace != nil {
			hl.pace.p.add(id, hc)
		}
	}
	for _, hl := range clients {
		if err := hl.loop.Post(hl.start); err != nil {
			return fmt.Errorf("http engine: %w", err)
		}
	}
	<-ctx.Done()
	for _, hl := range clients {
		if err := hl.loop.Post(hl.stop); err != nil {
			close(hl.done)
		}
	}
	for _, hl := range clients {
		<-hl.done
	}
	return nil
}

// httpLoop is one loop's share of the connections, touched only on its
// thread.
type httpLoop struct {
	loop     *percore.Loop
	addr     netip.AddrPort
	mode     httpMode
	w        *Worker
	conns    []*httpConn
	pace     *loopPacer // open loop only
	stopping bool
	open     int
	done     chan struct{}
}

func (hl *httpLoop) start() {
	for _, hc := range hl.conns {
		hc.dial()
	}
	hl.pace.start()
}

func (hl *httpLoop) stop() {
	hl.stopping = true
	hl.pace.stop()
	for _, hc := range hl.conns {
		if hc.c != nil {
			hc.c.Abort()
		}
	}
	hl.maybeDone()
}

func (hl *httpLoop) maybeDone() {
	if hl.stopping && hl.open == 0 {
		select {
		case <-hl.done:
		default:
			close(hl.done)
		}
	}
}

// httpConn drives one keep-alive connection.
type httpConn struct {
	hl      *httpLoop
	n       int
	req     []byte
	reqs    []byte
	c       *percore.Conn
	d       http1.ResponseDecoder
	bl      backlog     // open loop: the requests fallen due and sent
	sent    []time.Time // start time of request seq (send, or due in open loop), at seq%n
	nextSeq uint64
	ackSeq  uint64
	body    int  // bytes of the current body compared so far
	bad     bool // the current response differs
	dialing bool
	failed  bool
}

var (
	_ frame.ViewHandler    = (*httpConn)(nil)
	_ percore.CloseHandler = (*httpConn)(nil)
)

func (hc *httpConn) dial() {
	hl := hc.hl
	if hl.stopping || hc.dialing {
		return
	}
	hc.dialing = true
	hl.open++
	err := hl.loop.DialAddrPort(hl.addr, frame.View(hc, frame.SplitConfig{MaxBuffered: 1 << 20}), func(c *percore.Conn, err error) {
		hc.dialing = false
		if err != nil {
			hl.open--
			if !hl.stopping {
				hl.w.Error()
				hl.loop.AfterFunc(retryDelay, hc.dial)
			}
			hl.maybeDone()
			return
		}
		hc.c = c
		if hl.stopping {
			c.Abort()
			return
		}
		hc.d.Reset()
		hc.failed, hc.body, hc.bad = false, 0, false
		hc.ackSeq = hc.nextSeq
		if hl.pace != nil {
			hc.flush()
		} else {
			hc.send(hc.n)
		}
	})
	if err != nil {
		hc.dialing = false
		hl.open--
		hl.w.Error()
		hl.loop.AfterFunc(retryDelay, hc.dial)
	}
}

// release implements releaser: the connection's next request fell due.
func (hc *httpConn) release() {
	hc.bl.due++
	hc.flush()
}

// flush sends, in open loop, the requests that fell due and wait, as many
// as the connection may have in flight.
func (hc *httpConn) flush() {
	if hc.c == nil || hc.c.Closed() {
		return
	}
	inFlight := int(hc.nextSeq - hc.ackSeq)
	hc.send(min(hc.bl.waiting(), hc.n-inFlight))
}

// send sends k requests in one write.
func (hc *httpConn) send(k int) {
	if hc.hl.stopping || k <= 0 {
		return
	}
	var now time.Time // closed loop: the send; open loop: each request's due time
	if hc.hl.pace == nil {
		now = time.Now()
	}
	for i := range k {
		start := now
		if hc.hl.pace != nil {
			start = hc.bl.take(hc.hl.pace.p.s)
		}
		hc.sent[(hc.nextSeq+uint64(i))%uint64(hc.n)] = start
	}
	hc.nextSeq += uint64(k)
	hc.c.Write(hc.reqs[:k*len(hc.req)])
}

// OnView checks the responses in the input and answers each complete one
// with a new request.
func (hc *httpConn) OnView(c *percore.Conn, in []byte) (int, error) {
	hl := hc.hl
	off, done := 0, 0
	want := hl.mode.Body
	for {
		n, ev, piece, err := hc.d.Next(in[off:])
		off += n
		if err != nil {
			hl.w.Mismatch()
			hc.failed = true
			c.Abort()
			return off, nil
		}
		switch ev {
		case http1.Head:
			hc.body = 0
			hc.bad = hc.d.Response().Status != 200
		case http1.Body:
			if hl.mode.IsSet {
				if hc.body+len(piece) > len(want) || want[hc.body:hc.body+len(piece)] != string(piece) {
					hc.bad = true
				}
			}
			hc.body += len(piece)
		case http1.End:
			if hc.bad || (hl.mode.IsSet && hc.body != len(want)) {
				hl.w.Mismatch()
				hc.failed = true
				c.Abort()
				return off, nil
			}
			seq := hc.ackSeq
			hc.ackSeq++
			hl.w.Done(time.Since(hc.sent[seq%uint64(hc.n)]))
			done++
			if hc.d.Response().Close {
				// The server will close: reconnect for the next ones.
				hc.failed = true
				c.Close()
				return off, nil
			}
		case http1.NeedMore:
			if hl.pace != nil {
				hc.flush()
				hl.pace.poke()
			} else {
				hc.send(done)
			}
			return off, nil
		}
	}
}

// OnClose counts an unexpected close and reconnects.
func (hc *httpConn) OnClose(c *percore.Conn, err error) {
	hl := hc.hl
	hc.c = nil
	hl.open--
	if hl.stopping {
		hl.maybeDone()
		return
	}
	if !hc.failed && (err != nil || hc.ackSeq != hc.nextSeq) {
		hl.w.Error()
	}
	hc.nextSeq = hc.ackSeq
	hc.dial()
}

// httpEngineFor returns the HTTP engine for the -engine flag's name.
func httpEngineFor(engine string, mode httpMode) (Engine, error) {
	switch engine {
	case "percore", "":
		return httpEngine{mode: mode}, nil
	case "percore-epoll":
		return httpEngine{mode: mode, backend: percore.Epoll}, nil
	}
	return nil, fmt.Errorf("-http runs on the percore engines only, not %q", engine)
}
