//go:build linux

package main

import (
	"encoding/binary"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/ws"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// The upstream link (-upstream ADDR). Each loop keeps one persistent
// connection to the upstream service, leased from the runtime's pool
// (runtime/pool, upstream.Manager: the dial, its timeout and the closing
// of broken connections are the pool's), and multiplexes its clients'
// binary messages over it, each framed as
//
//	length uint32 (big endian, of what follows) | client id uint64 | payload
//
// The upstream answers in the same framing; a reply goes to the client of
// its id on that loop as one binary message (a client gone since is
// skipped). While the link is down, a client's message fails at once with
// the text frame "ERR upstream unavailable", as do the messages in flight
// when it dies; the loop reconnects with a back-off of 50 ms doubling to
// 2 s. An idle client costs the link nothing: it is entered in the loop's
// routing table with its first message.

// upHeader is the length and the client id.
const upHeader = 4 + 8

// maxUpReply bounds a reply from the upstream; a longer one breaks the link.
const maxUpReply = 16 << 20

var errUpstream = []byte("ERR upstream unavailable")

// upLink is one loop's link. It belongs to the loop.
type upLink struct {
	local    *pool.Local[*upstream.Conn]
	lease    pool.Lease[*upstream.Conn]
	up       bool // lease holds a live connection
	dialing  bool // a Get is in progress
	backoff  time.Duration
	in       []byte              // a reply not yet whole
	routes   map[uint64]*client  // clients that sent a message, by id
	sent     map[*client]upRoute // the same clients: their ids and messages in flight
	stopping bool                // the runtime is shutting down: no reconnect
	onData   func([]byte)        // bound once
	onClose  func(error)         // bound once
	next     uint32              // the next client id's low half
	loopID   uint64
	loop     *percore.Loop
	timer    *percore.Timer
}

// upRoute is a client's on the link, from its first message on: its id
// (the low half; the loop's id is the high one) and how many of its
// messages wait for a reply. The link keeps it, not the client: most
// clients of a gateway never send upstream.
type upRoute struct {
	id       uint32
	inflight int32
}

func newUpLink(p *pool.Pool[*upstream.Conn], l *percore.Loop) *upLink {
	u := &upLink{local: p.Local(l), routes: map[uint64]*client{}, sent: map[*client]upRoute{}, loopID: uint64(l.ID()), loop: l}
	u.onData, u.onClose = u.data, u.closed
	u.dial()
	return u
}

// dial leases a connection; on failure it tries again after the back-off.
func (u *upLink) dial() {
	if u.dialing || u.up || u.stopping {
		return
	}
	u.dialing = true
	u.local.Get(func(lease pool.Lease[*upstream.Conn], err error) {
		u.dialing = false
		if err != nil || u.stopping {
			u.local.Put(lease)
			u.retry()
			return
		}
		u.lease, u.up, u.backoff, u.in = lease, true, 0, u.in[:0]
		lease.Conn().Receive(u.onData, u.onClose)
	})
}

func (u *upLink) retry() {
	if u.stopping {
		return
	}
	u.backoff = min(max(2*u.backoff, 50*time.Millisecond), 2*time.Second)
	if u.timer == nil {
		u.timer = u.loop.AfterFunc(u.backoff, u.dial)
	} else {
		u.timer.Reset(u.backoff)
	}
}

// forward sends a client's binary message upstream, or fails it at once.
func (u *upLink) forward(cl *client, p []byte) {
	if !u.up {
		cl.send(ws.OpText, errUpstream)
		u.dial()
		return
	}
	r, ok := u.sent[cl]
	if !ok {
		r.id = u.newID()
		u.routes[u.loopID<<32|uint64(r.id)] = cl
	}
	r.inflight++
	u.sent[cl] = r
	id := u.loopID<<32 | uint64(r.id)
	var h [upHeader]byte
	binary.BigEndian.PutUint32(h[:4], uint32(8+len(p)))
	binary.BigEndian.PutUint64(h[4:], id)
	if _, err := u.lease.Conn().Raw().Writev(h[:], p); err != nil {
		u.broken()
	}
}

// newID returns the next client id's low half that no client of the link
// holds: past 2^32 clients that sent upstream the count wraps, and a
// client that has held its id since must keep its replies. The ids in
// use are at most the loop's clients, so the skip is short.
func (u *upLink) newID() uint32 {
	for {
		u.next++
		if _, used := u.routes[u.loopID<<32|uint64(u.next)]; !used {
			return u.next
		}
	}
}

// data takes the upstream's bytes: whole replies go to their clients.
func (u *upLink) data(b []byte) {
	if len(u.in) > 0 {
		u.in = append(u.in, b...)
		b = u.in
	}
	off := 0
	for len(b)-off >= 4 {
		n := int(binary.BigEndian.Uint32(b[off:]))
		if n < 8 || n > maxUpReply {
			u.broken()
			return
		}
		if len(b)-off < 4+n {
			break
		}
		id := binary.BigEndian.Uint64(b[off+4:])
		u.reply(id, b[off+upHeader:off+4+n])
		off += 4 + n
	}
	rest := b[off:]
	if len(u.in) > 0 {
		u.in = u.in[:copy(u.in, rest)]
	} else {
		u.in = append(u.in[:0], rest...)
	}
}

func (u *upLink) reply(id uint64, p []byte) {
	cl := u.routes[id]
	if cl == nil {
		return // its client went away
	}
	if r := u.sent[cl]; r.inflight > 0 {
		r.inflight--
		u.sent[cl] = r
	}
	cl.send(ws.OpBinary, p)
}

// closed is the upstream connection's end.
func (u *upLink) closed(error) { u.broken() }

// broken drops the link: the messages in flight fail, the lease goes back
// broken (the pool closes it) and the loop dials again.
func (u *upLink) broken() {
	if !u.up {
		return
	}
	u.up = false
	if uc := u.lease.Conn(); uc != nil {
		uc.Receive(nil, nil)
		uc.MarkBroken()
	}
	u.local.Put(u.lease)
	u.lease = pool.Lease[*upstream.Conn]{}
	for cl, r := range u.sent {
		for range r.inflight {
			cl.send(ws.OpText, errUpstream)
		}
		if r.inflight > 0 {
			r.inflight = 0
			u.sent[cl] = r
		}
	}
	u.in = u.in[:0]
	u.retry()
}

// gone forgets a client that closed.
func (u *upLink) gone(cl *client) {
	if r, ok := u.sent[cl]; ok {
		delete(u.routes, u.loopID<<32|uint64(r.id))
		delete(u.sent, cl)
	}
}

// stop drops the link for good (the runtime is shutting down), so that the
// shutdown does not wait on it.
func (u *upLink) stop() {
	if u.stopping {
		return
	}
	u.stopping = true
	if u.timer != nil {
		u.timer.Stop()
	}
	if u.up {
		u.up = false
		uc := u.lease.Conn()
		uc.Receive(nil, nil)
		u.local.Put(u.lease)
	}
}
