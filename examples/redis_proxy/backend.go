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

// send forwards req (one or more whole commands, as many replies as
// entries in ps) to the backend, on the least loaded link, leasing
// another while every link is deep in requests and the pool allows.
func (b *backend) send(req []byte, p pending) {
	var best *link
	for _, lk := range b.links {
		if best == nil || lk.inFlight() < best.inFlight() {
			best = lk
		}
	}
	more := (best == nil || best.inFlight() >= b.p.depth) && len(b.links)+b.getting < b.p.maxConns
	if best == nil {
		b.waiting = append(b.waiting, p)
		b.waitBuf = append(b.waitBuf, req...)
	} else {
		best.send(req, p)
	}
	if more {
		// After the request is placed: Get may lend an idle
		// connection at once, before it returns.
		b.getting++
		b.local.Get(b.gotFn)
	}
}

// got receives a lease: the requests that waited go on it.
func (b *backend) got(ls pool.Lease[*upstream.Conn], err error) {
	b.getting--
	if err != nil {
		if len(b.links) == 0 && b.getting == 0 {
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
		ls.Conn().Write(b.waitBuf)
		lk.fifo = append(lk.fifo, b.waiting...)
		clear(b.waiting)
		b.waiting, b.waitBuf = b.waiting[:0], b.waitBuf[:0]
		lk.arm()
		return
	}
	if lk.inFlight() == 0 {
		lk.release(false)
	}
}

// failWaiting answers every waiting request with msg.
func (b *backend) failWaiting(msg string) {
	ws := b.waiting
	b.waiting, b.waitBuf = nil, b.waitBuf[:0]
	for _, p := range ws {
		p.cl.part(p.r, p.part, []byte(msg))
	}
}

func (lk *link) inFlight() int { return len(lk.fifo) - lk.head }

func (lk *link) send(req []byte, p pending) {
	if _, err := lk.lease.Conn().Write(req); err != nil {
		p.cl.part(p.r, p.part, []byte("-ERR upstream "+lk.b.addr+": "+oneLine(err.Error())+"\r\n"))
		lk.fail("-ERR upstream " + lk.b.addr + ": " + oneLine(err.Error()) + "\r\n")
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
	// requests may lease this very link again.
	fifo := append([]pending(nil), lk.fifo[lk.head:]...)
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
