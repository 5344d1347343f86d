//go:build linux

package main

import (
	"strings"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/ordered"
	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// backend is one upstream server as one loop sees it: the loop's pool of
// connections to it, the connections leased now (links), and the
// requests waiting for a first connection. Only its loop's thread
// touches it.
type backend struct {
	p     *proxy
	idx   int // the server's index: its route in each client's routes
	addr  string
	local *pool.Local[*upstream.Conn]
	links []*link
	// getting counts the leases asked for and not yet answered.
	getting int
	// waiting are requests with no link to go on yet (the first lease
	// is on its way): their bytes in waitBuf, their replies in order.
	waiting []pending
	waitBuf []byte
	free    []*link
	gotFn   func(pool.Lease[*upstream.Conn], error)
}

// pending is a request sent (or about to be) whose reply is owed to a
// client's queue: part part of reply r.
type pending struct {
	cl   *client
	r    *ordered.Reply[join]
	part int
}

// link is one leased upstream connection carrying pipelined requests: the
// replies come back in the order the requests went, and fifo says whose
// each is. A link goes back to the pool when it has nothing in flight.
type link struct {
	b     *backend
	lease pool.Lease[*upstream.Conn]
	sp    frame.Splitter
	fifo  []pending
	head  int
	timer *percore.Timer // on the link's loop, kept across leases
	// Bound once per link.
	onTimeoutFn func()
	dataFn      func([]byte)
	closeFn     func(error)
	emitFn      func([]byte) bool
}

// route is where one client's commands to one server go. While the
// client has n of them in flight, all on the link lk (or, with lk nil,
// waiting in the backend for a lease), its next ones follow them there:
// the server then runs a client's commands in the order the client sent
// them, whichever connections the loop's clients share.
type route struct {
	lk *link
	n  int
}

// send forwards req (one whole command, whose reply is owed to p) to the
// backend: behind the client's commands in flight to this server if it
// has any, else on the least loaded link, else (no link, or every link
// -depth deep while the pool allows another) on a new lease.
func (b *backend) send(req []byte, p pending) {
	rt := &p.cl.routes[b.idx]
	if rt.n > 0 {
		rt.n++
		if rt.lk != nil {
			rt.lk.send(req, p)
		} else {
			b.wait(req, p)
		}
		return
	}
	var best *link
	for _, lk := range b.links {
		if best == nil || lk.inFlight() < best.inFlight() {
			best = lk
		}
	}
	room := len(b.links)+b.getting < b.p.maxConns
	if best != nil && (best.inFlight() < b.p.depth || !room) {
		rt.lk, rt.n = best, 1
		best.send(req, p)
		return
	}
	rt.lk, rt.n = nil, 1
	b.wait(req, p)
	if room && b.getting == 0 {
		// After the request is placed: Get may lend an idle
		// connection at once, before it returns.
		b.getting++
		b.local.Get(b.gotFn)
	}
}

// wait queues a request for the next lease.
func (b *backend) wait(req []byte, p pending) {
	b.waiting = append(b.waiting, p)
	b.waitBuf = append(b.waitBuf, req...)
}

// settle counts off a request of p's client that left a link or the
// waiting list: its reply came, or it failed.
func (b *backend) settle(p pending) {
	rt := &p.cl.routes[b.idx]
	if rt.n--; rt.n == 0 {
		rt.lk = nil
	}
}

// got receives a lease: the requests that waited go on it.
func (b *backend) got(ls pool.Lease[*upstream.Conn], err error) {
	b.getting--
	if err != nil {
		switch {
		case len(b.waiting) == 0:
		case len(b.links) > 0:
			// The links there are carry them, behind what they have.
			b.flushWaiting(b.links[0])
		case b.getting == 0:
			// Nothing else will carry them.
			b.failWaiting("-ERR upstream " + b.addr + ": " + oneLine(err.Error()) + "\r\n")
		}
		return
	}
	var lk *link
	if n := len(b.free); n > 0 {
		lk = b.free[n-1]
		b.free = b.free[:n-1]
	} else {
		lk = &link{b: b, sp: frame.Splitter{Split: resp.ScanReply(resp.ReplyLimits{MaxBulk: b.p.maxReply}), MaxBuffered: b.p.maxReply}}
		lk.dataFn, lk.closeFn, lk.emitFn, lk.onTimeoutFn = lk.onData, lk.onClose, lk.emit, lk.onTimeout
	}
	lk.lease = ls
	ls.Conn().Receive(lk.dataFn, lk.closeFn)
	b.links = append(b.links, lk)
	if len(b.waiting) > 0 {
		b.flushWaiting(lk)
		return
	}
	if lk.inFlight() == 0 {
		lk.release(false)
	}
}

// flushWaiting sends every waiting request on lk, in order, and routes
// their clients' next requests there.
func (b *backend) flushWaiting(lk *link) {
	ws := b.waiting
	for _, p := range ws {
		p.cl.routes[b.idx].lk = lk
	}
	if _, err := lk.lease.Conn().Write(b.waitBuf); err != nil {
		b.failWaiting("-ERR upstream " + b.addr + ": " + oneLine(err.Error()) + "\r\n")
		lk.fail("-ERR upstream " + b.addr + ": " + oneLine(err.Error()) + "\r\n")
		return
	}
	if lk.inFlight() == 0 {
		lk.arm()
	}
	lk.fifo = append(lk.fifo, ws...)
	clear(b.waiting)
	b.waiting, b.waitBuf = b.waiting[:0], b.waitBuf[:0]
}

// failWaiting answers every waiting request with msg.
func (b *backend) failWaiting(msg string) {
	ws := b.waiting
	b.waiting, b.waitBuf = nil, b.waitBuf[:0]
	// Every route off first: an answer may resume its client, whose next
	// requests must not follow these into the waiting list.
	for _, p := range ws {
		b.settle(p)
	}
	for _, p := range ws {
		p.cl.part(p.r, p.part, []byte(msg))
	}
}

func (lk *link) inFlight() int { return len(lk.fifo) - lk.head }

func (lk *link) send(req []byte, p pending) {
	if _, err := lk.lease.Conn().Write(req); err != nil {
		msg := "-ERR upstream " + lk.b.addr + ": " + oneLine(err.Error()) + "\r\n"
		lk.fifo = append(lk.fifo, p) // failed with the rest, in order
		lk.fail(msg)
		return
	}
	if lk.inFlight() == 0 {
		lk.arm()
	}
	lk.fifo = append(lk.fifo, p)
}

// arm starts the reply timeout: the link must make progress (a reply)
// within -timeout, else its requests fail and it is closed.
func (lk *link) arm() {
	if lk.b.p.timeout <= 0 {
		return
	}
	if lk.timer == nil {
		lk.timer = lk.lease.Conn().Raw().Loop().AfterFunc(lk.b.p.timeout, lk.onTimeoutFn)
		return
	}
	lk.timer.Reset(lk.b.p.timeout)
}

func (lk *link) onData(data []byte) {
	if _, err := lk.sp.Feed(data, lk.emitFn); err != nil {
		lk.fail("-ERR upstream " + lk.b.addr + " reply: " + oneLine(err.Error()) + "\r\n")
		return
	}
	if !lk.lease.Lent() {
		return // failed in emit
	}
	if lk.inFlight() == 0 {
		lk.release(lk.sp.Buffered() > 0) // bytes beyond the last reply: out of step
		return
	}
	lk.arm()
}

// emit hands one reply to the client that owns the oldest request.
func (lk *link) emit(tok []byte) bool {
	if lk.inFlight() == 0 {
		lk.release(true) // a reply nobody asked for: out of step
		return false
	}
	p := lk.fifo[lk.head]
	lk.fifo[lk.head] = pending{}
	lk.head++
	lk.b.settle(p)
	p.cl.part(p.r, p.part, tok)
	return lk.lease.Lent()
}

func (lk *link) onClose(err error) {
	lk.fail("-ERR upstream " + lk.b.addr + " closed: " + oneLine(err.Error()) + "\r\n")
}

func (lk *link) onTimeout() {
	if lk.lease.Lent() && lk.inFlight() > 0 {
		lk.fail("-ERR upstream " + lk.b.addr + " timeout\r\n")
	}
}

// fail answers every request in flight on lk with msg and returns the
// connection broken: its replies, if they ever come, belong to nobody.
func (lk *link) fail(msg string) {
	if !lk.lease.Lent() {
		return
	}
	// A copy: answering a client may resume its reads, and its next
	// requests may lease this very link again. Every route off first, so
	// that they do not follow these onto a link that is gone.
	fifo := append([]pending(nil), lk.fifo[lk.head:]...)
	for _, p := range fifo {
		lk.b.settle(p)
	}
	lk.release(true)
	for _, p := range fifo {
		p.cl.part(p.r, p.part, []byte(msg))
	}
}

// release puts lk's lease back (broken if asked) and drops the link.
func (lk *link) release(broken bool) {
	if lk.timer != nil {
		lk.timer.Stop()
	}
	ls := lk.lease
	lk.lease = pool.Lease[*upstream.Conn]{}
	uc := ls.Conn()
	if broken {
		uc.MarkBroken()
	}
	uc.Receive(nil, nil)
	lk.sp.Reset()
	lk.fifo, lk.head = lk.fifo[:0], 0
	b := lk.b
	for i, x := range b.links {
		if x == lk {
			b.links = append(b.links[:i], b.links[i+1:]...)
			break
		}
	}
	b.local.Put(ls)
	b.free = append(b.free, lk)
}

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
