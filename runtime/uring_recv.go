//go:build linux

package runtime

import (
	"errors"

	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver's receives: multishot into the provided-buffer
// ring, the turn budget that holds a connection's receives back for later
// turns (in order, with the receives parked while reading is paused), and
// the throttle that keeps one connection from taking every buffer.

// hasWaiting reports whether receives of the connection wait in waiting.
func (u *uringConn) hasWaiting() bool { return u.waitHead < len(u.waiting) }

// deferredRecv is a receive completion whose delivery waits for a later
// turn; its buffer stays out of the kernel's ring until then. n == 0 is the
// end of the stream, n < 0 a receive's error (-errno).
type deferredRecv struct {
	id   uint16
	n    int32
	copy []byte // the data, copied out of the provided buffer when they run short
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
	u := &c.ur
	for i := u.waitHead; i < len(u.waiting); i++ {
		d.giveBack(u.waiting[i])
		u.waiting[i] = deferredRecv{}
	}
	u.waiting, u.waitHead = nil, 0
}

// giveBack returns what a waiting receive holds: its provided buffer, or the
// copy of its data.
func (d *uringDriver) giveBack(r deferredRecv) {
	switch {
	case r.copy != nil:
		d.l.putBuf(r.copy)
	case r.n > 0:
		d.waitingBufs--
		d.bufs.Recycle(r.id)
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
			d.bufs.Recycle(id)
		default:
			if u.flags&ufThrottled != 0 && int(e.Res) < d.bufs.Size() {
				u.flags &^= ufThrottled // it drained its socket: multishot again
			}
			if u.hasWaiting() || c.readPaused() || d.overBudget(c) {
				d.deferRecv(c, id, e.Res)
			} else {
				d.deliverBuf(c, id, e.Res)
			}
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
			d.deferRecv(c, 0, e.Res)
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
	return c.ur.turnBytes >= budget
}

// stampTurn starts c's count of bytes delivered at a new turn.
func (d *uringDriver) stampTurn(c *Conn) {
	if turn := d.cnt[sTurns]; c.ur.turnStamp != turn {
		c.ur.turnStamp = turn
		c.ur.turnBytes = 0
	}
}

// deliverBuf hands the loop n bytes of provided buffer id, then gives the
// buffer back to the kernel.
func (d *uringDriver) deliverBuf(c *Conn, id uint16, n int32) {
	d.stampTurn(c)
	c.ur.turnBytes += int(n)
	d.l.readResult(c, d.bufs.Bytes(id, int(n)), int(n), "recv")
	d.bufs.Recycle(id)
}

// deferRecv makes a receive of c wait for a later turn, behind those
// already waiting.
func (d *uringDriver) deferRecv(c *Conn, id uint16, n int32) {
	u := &c.ur
	d.cnt[sDeferrals]++
	r := deferredRecv{id: id, n: n}
	if n > 0 {
		if d.waitingBufs < d.maxWaitingBufs() {
			d.waitingBufs++
		} else {
			// Held data would starve other connections of buffers:
			// copy it out (into a pooled buffer) and give the
			// provided buffer back to the kernel now.
			r.copy = append(d.l.getBuf(int(n)), d.bufs.Bytes(id, int(n))...)
			d.bufs.Recycle(id)
		}
	}
	first := !u.hasWaiting()
	u.waiting = append(u.waiting, r)
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

// maxHeld is how many provided buffers deferred receives may keep out of
// the kernel's ring: a quarter of them.
func (d *uringDriver) maxWaitingBufs() int { return d.cfg.BufferCount / 4 }

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
		r := u.waiting[u.waitHead]
		u.waiting[u.waitHead] = deferredRecv{}
		u.waitHead++
		if u.waitHead == len(u.waiting) {
			u.waiting, u.waitHead = u.waiting[:0], 0
		}
		switch {
		case r.copy != nil:
			u.turnBytes += len(r.copy)
			d.l.readResult(c, r.copy, len(r.copy), "recv")
			d.l.putBuf(r.copy)
		case r.n > 0:
			d.waitingBufs--
			d.deliverBuf(c, r.id, r.n)
		default:
			d.l.readResult(c, nil, int(r.n), "recv")
		}
	}
	if u.flags&ufRecvStopped != 0 {
		u.flags &^= ufRecvStopped
		d.rearm = append(d.rearm, c)
	}
}
