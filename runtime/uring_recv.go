//go:build linux

package runtime

import (
	"errors"
	"math"

	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver's receives: multishot into the provided-buffer
// ring, the turn budget that holds a connection's receives back for later
// turns (in order, with the receives parked while reading is paused), and
// the throttle that keeps one connection from taking every buffer.

// recvWaits are a connection's receives that wait for a later turn, from
// head on, in the order they arrived: deferred by the turn budget or by a
// pause. One queue per connection, whatever deferred them, is what keeps
// its bytes in order; once a receive waits here every later one queues
// behind it. A connection holds one only while a receive waits: taken
// from the driver's spares with the first (waitFor), given back once the
// last is delivered or dropped (putWaits).
type recvWaits struct {
	waiting []deferredRecv
	head    int
}

// hasWaiting reports whether receives of the connection wait in waits.
func (u *uringConn) hasWaiting() bool { return u.waits != nil && u.waits.head < len(u.waits.waiting) }

// held returns the connection's waiting receives, oldest first.
func (u *uringConn) held() []deferredRecv {
	if u.waits == nil {
		return nil
	}
	return u.waits.waiting[u.waits.head:]
}

// waitFor returns c's queue of waiting receives, taking one from the
// driver's spares (or allocating it) if c holds none.
func (d *uringDriver) waitFor(c *Conn) *recvWaits {
	u := &c.ur
	if u.waits == nil {
		if u.waits = popSpare(&d.spareWaits); u.waits == nil {
			u.waits = new(recvWaits)
		}
	}
	return u.waits
}

// putWaits gives c's queue of waiting receives back to the driver's
// spares, emptied (its entries already zeroed), with its array, if it is
// small: a connection that once held thousands does not keep them for
// the next one.
func (d *uringDriver) putWaits(c *Conn) {
	w := c.ur.waits
	if w == nil {
		return
	}
	c.ur.waits = nil
	if len(d.spareWaits) >= maxSpareWaitLists {
		return
	}
	w.waiting, w.head = w.waiting[:0], 0
	if cap(w.waiting) > maxSpareWaits {
		w.waiting = nil
	}
	d.spareWaits = append(d.spareWaits, w)
}

// maxSpareWaits is the largest array of waiting receives a spare queue
// keeps (32 bytes each), and maxSpareWaitLists how many spare queues the
// driver keeps: at most 34 KiB a loop. Receives wait only under a turn
// budget or a pause, for a few connections at a time; nothing trims the
// spares, so they stay few.
const (
	maxSpareWaits     = 16
	maxSpareWaitLists = 64
)

// deferredRecv is a receive completion whose delivery waits for a later
// turn; its part of provided buffer id stays the loop's until then
// (uring_incbuf.go). n == 0 is the end of the stream, n < 0 a receive's
// error (-errno).
type deferredRecv struct {
	id     uint16
	copied bool // data is a pooled copy, made when provided buffers ran short, and id is back with the kernel
	n      int32
	data   []byte // the n bytes received: in provided buffer id, or the copy
}

// errRecvNoBuffer is a receive completion with data but no provided buffer,
// which the kernel never posts for a buffer-select receive.
var errRecvNoBuffer = errors.New("io_uring receive completed without a provided buffer")

func (d *uringDriver) pauseRead(c *Conn) { d.cancelRecv(c) }

// cancelRecv cancels c's armed receive, if any, and reports false when the
// cancel could not be queued.
func (d *uringDriver) cancelRecv(c *Conn) bool {
	return d.cancelOnce(c, c.ur.flags&ufRecvArmed != 0, ufRecvCancel, kindRecv)
}

func (d *uringDriver) resumeRead(c *Conn) {
	// What arrived while c was paused is delivered first, in order, from
	// the next turn on.
	if c.ur.hasWaiting() {
		d.list(c)
	}
	// The receive re-arms once the cancelled one has completed, if it
	// has not yet.
	if c.ur.flags&ufRecvArmed == 0 {
		d.rearm = append(d.rearm, c)
	}
}

func (d *uringDriver) start(c *Conn) error {
	d.takeSlot(c)
	var err error
	if c.ur.flags&ufThrottled != 0 {
		// A connection that recently went over its turn budget receives
		// one buffer at a time, so that it cannot take every provided
		// buffer from the others.
		err = d.r.PrepareRecvSelect(d.sock(c), d.br, userData(kindRecv, c.slot, c.gen))
	} else if d.bundles != nil {
		err = d.r.PrepareRecvMultishotBundle(d.sock(c), d.br, userData(kindRecv, c.slot, c.gen))
	} else {
		err = d.r.PrepareRecvMultishot(d.sock(c), d.br, userData(kindRecv, c.slot, c.gen))
	}
	if err != nil {
		return err
	}
	d.onSlot(c)
	c.ur.ops++
	c.ur.flags |= ufRecvArmed
	return nil
}

// dropWaiting gives back what a closed connection's waiting receives hold.
func (d *uringDriver) dropWaiting(c *Conn) {
	w := c.ur.waits
	if w == nil {
		return
	}
	for i := w.head; i < len(w.waiting); i++ {
		d.giveBack(w.waiting[i])
		w.waiting[i] = deferredRecv{}
	}
	d.putWaits(c)
}

// giveBack returns what a waiting receive holds: its provided buffer, or the
// copy of its data.
func (d *uringDriver) giveBack(r deferredRecv) {
	switch {
	case r.copied:
		d.l.putBuf(r.data)
	case r.n > 0:
		d.waitingBufs--
		d.releasePart(r.id)
	}
}

func (d *uringDriver) received(c *Conn, e *ring.Completion) {
	u := &c.ur
	more := e.More()
	if !more {
		u.flags &^= ufRecvArmed | ufRecvCancel
		u.ops--
	}
	switch {
	case e.Res > 0:
		d.bufsTouched = true
		id, ok := e.Buffer()
		switch {
		case !ok:
			// The kernel always selects a buffer for these receives;
			// a completion without one is not ours to recycle.
			d.l.fail(c, "read", errRecvNoBuffer)
		case c.closed():
			// On its way when the connection closed: nobody reads it.
			d.dropPart(id, e)
		case d.bundles != nil:
			d.receivedBundle(c, e) // uring_bundle.go
		default:
			p, room := d.takePart(id, e)
			if u.flags&ufThrottled != 0 && room {
				u.flags &^= ufThrottled // it drained its socket: multishot again
			}
			d.deliverOrDefer(c, id, p)
		}
	case e.Res == -int32(unix.ENOBUFS), e.Res == -int32(unix.ECANCELED):
		// Out of buffers (re-armed once this batch's buffers are back
		// with the kernel), or cancelled to pause or close.
	case c.closed():
	default:
		// The end of the stream (0) or an error: after what waits,
		// and not while paused (no OnEOF then either).
		if e.Res == 0 {
			u.flags |= ufRecvEOF
		}
		if u.hasWaiting() || c.readPaused() {
			d.deferRecv(c, 0, nil, e.Res)
		} else {
			d.l.readResult(c, nil, int(e.Res), "recv")
		}
	}
	if !more {
		d.rearm = append(d.rearm, c)
	}
}

// overBudget reports whether c has had its turn's budget of bytes.
func (d *uringDriver) overBudget(c *Conn) bool {
	budget := d.cfg.TurnBudget
	if budget == 0 {
		return false
	}
	d.stampTurn(c)
	return int(c.ur.turnBytes) >= budget
}

// stampTurn starts c's count of bytes delivered at a new turn.
func (d *uringDriver) stampTurn(c *Conn) {
	if turn := uint32(d.cnt[sTurns]); c.ur.turnStamp != turn {
		c.ur.turnStamp = turn
		c.ur.turnBytes = 0
	}
}

// countTurn adds n bytes to the connection's turn count, saturating.
func (u *uringConn) countTurn(n int) {
	u.turnBytes = uint32(min(uint64(u.turnBytes)+uint64(n), math.MaxUint32))
}

// deliverBuf hands the loop p, a part of provided buffer id, then gives
// the part back (and the buffer to the kernel with its last part).
func (d *uringDriver) deliverBuf(c *Conn, id uint16, p []byte) {
	d.stampTurn(c)
	c.ur.countTurn(len(p))
	d.l.readResult(c, p, len(p), "recv")
	d.releasePart(id)
}

// deferRecv makes a receive of c (p, its part of buffer id, or nil for
// the end of the stream or an error n) wait for a later turn, behind those
// already waiting.
func (d *uringDriver) deferRecv(c *Conn, id uint16, p []byte, n int32) {
	u := &c.ur
	d.cnt[sDeferrals]++
	r := deferredRecv{id: id, n: n, data: p}
	if n > 0 {
		if d.waitingBufs < d.maxWaitingBufs() && !d.copiesHeld() {
			d.waitingBufs++
		} else {
			// Held data would starve other connections of buffers:
			// copy it out (into a pooled buffer) and give the
			// part back now.
			r.data, r.copied = append(d.l.getBuf(len(p)), p...), true
			d.releasePart(id)
		}
	}
	first := !u.hasWaiting()
	w := d.waitFor(c)
	w.waiting = append(w.waiting, r)
	if !c.readPaused() {
		d.list(c)
	}
	if first && u.flags&ufRecvStopped == 0 {
		// Stop receiving until the waiting data is delivered, and then
		// receive one buffer at a time: otherwise the kernel keeps
		// filling provided buffers for this connection, and once it
		// holds them all, the others get none.
		u.flags |= ufRecvStopped | ufThrottled
		d.cancelRecv(c)
	}
}

// list puts c on the list of connections whose waiting receives the next
// turn delivers, once.
func (d *uringDriver) list(c *Conn) {
	if c.ur.flags&ufListed == 0 {
		c.ur.flags |= ufListed
		d.deferred = append(d.deferred, c)
	}
}

// maxWaitingBufs is how many parts of provided buffers deferred receives
// may hold (each keeps at most one buffer out of the kernel's ring): a
// quarter of the buffers.
func (d *uringDriver) maxWaitingBufs() int { return d.recvBufCount() / 4 }

// deliverDeferred hands over, in order, the receives earlier turns held
// back, as far as each connection's budget for this turn allows.
func (d *uringDriver) deliverDeferred() {
	listed := d.deferred
	d.deferred = d.spare[:0]
	for i, c := range listed {
		listed[i] = nil
		c.ur.flags &^= ufListed
		d.deliverWaiting(c)
	}
	d.spare = listed[:0]
}

// deliverWaiting delivers c's waiting receives from the oldest on, until none is
// left, c is paused (it is listed again when it resumes) or over this
// turn's budget (listed again for the next turn). A callback may pause,
// resume or close c in between: each receive is taken off the queue before
// it is delivered, and the queue is looked at afresh for the next one.
func (d *uringDriver) deliverWaiting(c *Conn) {
	u := &c.ur
	for u.hasWaiting() {
		if c.closed() {
			d.dropWaiting(c)
			return
		}
		if c.readPaused() {
			return
		}
		if d.overBudget(c) {
			d.list(c)
			return
		}
		w := u.waits
		r := w.waiting[w.head]
		w.waiting[w.head] = deferredRecv{}
		w.head++
		if w.head == len(w.waiting) {
			d.putWaits(c) // before the callback, which may defer again
		}
		switch {
		case r.copied:
			u.countTurn(len(r.data))
			d.l.readResult(c, r.data, len(r.data), "recv")
			d.l.putBuf(r.data)
		case r.n > 0:
			d.waitingBufs--
			d.deliverBuf(c, r.id, r.data)
		default:
			d.l.readResult(c, nil, int(r.n), "recv")
		}
	}
	if u.flags&ufRecvStopped != 0 {
		u.flags &^= ufRecvStopped
		d.rearm = append(d.rearm, c)
	}
}
