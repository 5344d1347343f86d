//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/resp"
)

// respOptions shape the RESP workload (-engine resp): a mix of GET and SET
// over a key space, values of -bytes bytes.
type respOptions struct {
	getPercent int // GETs out of 100 commands; the rest are SETs
	keys       int // key space: keys "key:0" .. "key:N-1"
}

// addRespFlags registers the RESP workload's flags.
func addRespFlags(fs *flag.FlagSet, o *respOptions) {
	fs.IntVar(&o.getPercent, "resp-get", 50, "with -engine resp or resp-epoll: percent of commands that are GET (the rest are SET)")
	fs.IntVar(&o.keys, "resp-keys", 10000, "with -engine resp or resp-epoll: how many distinct keys the commands use")
}

// engineFor returns the engine cfg names: the RESP engines here, the
// echo engines from engineByName.
func engineFor(cfg config) (Engine, error) {
	switch cfg.engine {
	case "resp", "resp-epoll":
		if cfg.resp.getPercent < 0 || cfg.resp.getPercent > 100 || cfg.resp.keys < 1 {
			return nil, errors.New("-resp-get must be 0..100 and -resp-keys at least 1")
		}
		e := respEngine{opts: cfg.resp}
		if cfg.engine == "resp-epoll" {
			e.backend = percore.Epoll
		}
		return e, nil
	}
	return engineByName(cfg.engine)
}

// respEngine runs a Redis workload on percore loops, as percoreEngine runs
// the echo: each connection keeps -pipeline commands in flight and
// verifies every reply. A SET must answer +OK; a GET must answer null (the
// key not set yet) or exactly the key's value, which is derived from the
// key, so that a reply out of order, another key's, truncated or
// corrupted is a mismatch. Its requests/s are comparable with
// redis-benchmark's -t set,get at the same -c, -P and -d.
type respEngine struct {
	backend percore.Backend
	opts    respOptions
}

// Run implements Engine.
func (e respEngine) Run(ctx context.Context, wl Workload, rec *Recorder) error {
	addr, err := resolve(wl.Addr)
	if err != nil {
		return fmt.Errorf("resp engine: %w", err)
	}
	rt, err := percore.New(wl.loopConfig(e.backend), nil)
	if err != nil {
		return fmt.Errorf("resp engine: %w", err)
	}
	defer rt.Close()
	loops := rt.Loops()
	clients := make([]*respLoop, len(loops))
	sched := newSchedule(wl, time.Now())
	for i, l := range loops {
		rl := &respLoop{loop: l, wl: wl, opts: e.opts, addr: addr, w: rec.NewWorker(), done: make(chan struct{})}
		rl.pace = newLoopPacer(l, sched, rl.w, wl)
		clients[i] = rl
	}
	for id := range wl.Conns {
		rl := clients[id%len(clients)]
		c := newRespConn(rl, id)
		rl.conns = append(rl.conns, c)
		if rl.pace != nil {
			rl.pace.p.add(id, c)
		}
	}
	for _, rl := range clients {
		if err := rl.loop.Post(rl.start); err != nil {
			return fmt.Errorf("resp engine: %w", err)
		}
	}
	<-ctx.Done()
	for _, rl := range clients {
		if err := rl.loop.Post(rl.stop); err != nil {
			close(rl.done)
		}
	}
	for _, rl := range clients {
		<-rl.done
	}
	return nil
}

// respLoop is one loop's share of the connections; only its thread
// touches it.
type respLoop struct {
	loop     *percore.Loop
	wl       Workload
	opts     respOptions
	addr     netip.AddrPort
	w        *Worker
	conns    []*respConn
	pace     *loopPacer // open loop only
	stopping bool
	open     int
	done     chan struct{}
}

func (rl *respLoop) start() {
	for _, c := range rl.conns {
		c.dial()
	}
	rl.pace.start()
}

func (rl *respLoop) stop() {
	rl.stopping = true
	rl.pace.stop()
	for _, c := range rl.conns {
		if c.c != nil {
			c.c.Abort()
		}
	}
	rl.maybeDone()
}

func (rl *respLoop) maybeDone() {
	if rl.stopping && rl.open == 0 {
		select {
		case <-rl.done:
		default:
			close(rl.done)
		}
	}
}

// respConn drives one connection.
type respConn struct {
	rl      *respLoop
	c       *percore.Conn
	sp      frame.Splitter
	rng     uint64
	out     []byte
	inFl    []respReq // ring of the requests in flight, oldest at head
	head, n int
	bl      backlog // open loop: the requests fallen due and sent
	value   []byte  // scratch: a key's value
	want    []byte  // scratch: a GET's expected reply
	dialing bool
	failed  bool
	emitFn  func([]byte) bool
}

// respReq is one request in flight.
type respReq struct {
	key  int
	get  bool
	sent time.Time
}

func newRespConn(rl *respLoop, id int) *respConn {
	c := &respConn{rl: rl, rng: uint64(id)*0x9e3779b97f4a7c15 + 1, inFl: make([]respReq, rl.wl.depth()), bl: backlog{id: id},
		sp: frame.Splitter{Split: resp.ScanReply(resp.ReplyLimits{}), MaxBuffered: rl.wl.Bytes + 64}}
	c.emitFn = c.emit
	return c
}

// valueOf writes key k's value, rl.wl.Bytes bytes that depend on k.
func (c *respConn) valueOf(k int) []byte {
	n := c.rl.wl.Bytes
	c.value = c.value[:0]
	for i := range n {
		c.value = append(c.value, 'a'+byte((k*7+i)%26))
	}
	ks := strconv.Itoa(k)
	copy(c.value, ks) // the key's number first, when it fits
	return c.value
}

func (c *respConn) dial() {
	rl := c.rl
	if rl.stopping || c.dialing {
		return
	}
	c.dialing = true
	rl.open++
	err := rl.loop.DialAddrPort(rl.addr, c, func(pc *percore.Conn, err error) {
		c.dialing = false
		if err != nil {
			rl.open--
			if !rl.stopping {
				rl.w.Error()
				rl.loop.AfterFunc(retryDelay, c.dial)
			}
			rl.maybeDone()
			return
		}
		c.c = pc
		if rl.stopping {
			pc.Abort()
			return
		}
		c.failed = false
		c.head, c.n = 0, 0
		c.sp.Reset()
		if rl.pace != nil {
			c.flush()
		} else {
			c.send(len(c.inFl))
		}
	})
	if err != nil {
		c.dialing = false
		rl.open--
		rl.w.Error()
		rl.loop.AfterFunc(retryDelay, c.dial)
	}
}

// release implements releaser: the connection's next command fell due.
func (c *respConn) release() {
	c.bl.due++
	c.flush()
}

// flush sends, in open loop, the commands that fell due and wait, as many
// as the connection may have in flight.
func (c *respConn) flush() {
	if c.c == nil || c.c.Closed() {
		return
	}
	c.send(min(c.bl.waiting(), len(c.inFl)-c.n))
}

// send sends k new commands in one write.
func (c *respConn) send(k int) {
	if c.rl.stopping || k <= 0 {
		return
	}
	var now time.Time // closed loop: the send; open loop: each request's due time
	if c.rl.pace == nil {
		now = time.Now()
	}
	c.out = c.out[:0]
	var kb [24]byte
	for range k {
		c.rng ^= c.rng << 13
		c.rng ^= c.rng >> 7
		c.rng ^= c.rng << 17
		key := int(c.rng % uint64(c.rl.opts.keys))
		get := int((c.rng>>32)%100) < c.rl.opts.getPercent
		name := append(append(kb[:0], "key:"...), strconv.Itoa(key)...)
		if get {
			c.out = resp.AppendArray(c.out, 2)
			c.out = resp.AppendBulkString(c.out, "GET")
			c.out = resp.AppendBulk(c.out, name)
		} else {
			c.out = resp.AppendArray(c.out, 3)
			c.out = resp.AppendBulkString(c.out, "SET")
			c.out = resp.AppendBulk(c.out, name)
			c.out = resp.AppendBulk(c.out, c.valueOf(key))
		}
		start := now
		if c.rl.pace != nil {
			start = c.bl.take(c.rl.pace.p.s)
		}
		c.inFl[(c.head+c.n)%len(c.inFl)] = respReq{key: key, get: get, sent: start}
		c.n++
	}
	c.c.Write(c.out)
}

// The runtime's callbacks respConn implements, checked by the compiler.
var (
	_ percore.Handler      = (*respConn)(nil)
	_ percore.CloseHandler = (*respConn)(nil)
)

var (
	respOK   = []byte("+OK\r\n")
	respNull = []byte("$-1\r\n")
)

// OnData verifies the replies and sends one command for each.
func (c *respConn) OnData(pc *percore.Conn, data []byte) {
	before := c.n
	if _, err := c.sp.Feed(data, c.emitFn); err != nil && !c.failed {
		c.rl.w.Mismatch()
		c.failed = true
	}
	if c.failed {
		pc.Abort()
		return
	}
	if c.rl.pace != nil {
		c.flush()
		c.rl.pace.poke()
		return
	}
	c.send(before - c.n)
}

// emit checks one reply against the oldest request in flight.
func (c *respConn) emit(tok []byte) bool {
	if c.n == 0 {
		c.failed = true
		c.rl.w.Mismatch()
		return false
	}
	r := c.inFl[c.head]
	c.head = (c.head + 1) % len(c.inFl)
	c.n--
	ok := false
	switch {
	case !r.get:
		ok = bytes.Equal(tok, respOK)
	case bytes.Equal(tok, respNull):
		ok = true
	default:
		c.want = resp.AppendBulk(c.want[:0], c.valueOf(r.key))
		ok = bytes.Equal(tok, c.want)
	}
	if !ok {
		c.failed = true
		c.rl.w.Mismatch()
		return false
	}
	c.rl.w.Done(time.Since(r.sent))
	return true
}

// OnClose counts an unexpected close and reconnects.
func (c *respConn) OnClose(_ *percore.Conn, err error) {
	rl := c.rl
	c.c = nil
	rl.open--
	if rl.stopping {
		rl.maybeDone()
		return
	}
	if !c.failed && (err != nil || c.n > 0) {
		rl.w.Error()
	}
	c.dial()
}
