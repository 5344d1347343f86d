//go:build linux

package runtime

import (
	"sync"
	"unsafe"

	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver's zero-copy sends (UringZeroCopySend,
// docs/decisions/0068): a send of at least Config.ZeroCopySendMin bytes
// of a connection's queue goes out as IORING_OP_SEND_ZC, which completes
// twice: first with the bytes sent (the queue moves on as after any
// send), then, once the kernel no longer reads the memory, with a
// notification (IORING_CQE_F_NOTIF), which may come after later sends,
// after the connection closed and its slot went to another one.
//
// So the memory of a zero-copy send belongs to the send, not to the
// connection. Each send is a record of the driver's (zcSend), named by
// the user data of both its completions (kindSendZC, the record's index
// and generation, never the connection's slot: the notification must
// find its send whatever became of the connection). The buffer it reads
// is held by a zcHold, which counts the sends of it whose notification
// has not come (a short send's rest goes out from the same buffer). While
// a buffer of the loop's pool is held, the queue treats it as a caller's
// slice (sharedSending): advancing past it or freeing the slot lets it
// go without giving it to the pool, and nothing writes to the bytes a
// queue is sending. When the last notification comes the hold gives the
// buffer to the pool, or, if the queue is still sending from it, hands it
// back to the queue (the bit cleared), which gives it to the pool when it
// is done. Every record counts among the loop's operations in the kernel
// (loopOps) until its notification, or its first completion when no
// notification follows (no More): the loop does not exit, and its
// runtime does not stop, before the kernel is done with every buffer.
//
// A zero-copy send is never a skipped send (the kernel refuses
// IOSQE_CQE_SKIP_SUCCESS on SEND_ZC, and its notification posts anyway);
// below the threshold a connection's sends are skipped or not as before,
// except that the rest of a queue a zero-copy send began goes as
// ordinary sends until it drains (ufSendFull).
// A socket that does not support it (-EOPNOTSUPP: a Unix socket) sends
// the same bytes with a plain send, and every later send of that
// connection is plain (ufZCOff); Stats.ZeroCopyFallbacks counts them.

// DefaultZeroCopySendMin is the smallest zero-copy send when
// Config.ZeroCopySendMin is zero: 64 KiB, above the loopback crossover of
// the ring's own benchmark (between 16 and 64 KiB, docs/decisions/0044)
// and of the echo A/B (docs/performance.md, "io_uring features, part 5").
// On a NIC with scatter-gather the crossover is lower (a few KiB, 0044):
// set it from a measurement there.
const DefaultZeroCopySendMin = 64 << 10

// uringZCRing is what zero-copy sends need of the ring: *ring.Ring, or the
// model's stand-in.
type uringZCRing interface {
	PrepareSendZC(fd int, p []byte, userData uint64) error
	PrepareSendmsgZC(fd int, msg *unix.Msghdr, userData uint64) error
}

// uringZC is the driver's zero-copy sends.
type uringZC struct {
	r     uringZCRing
	sends []zcSend
	free  []uint32
	spare []*zcHold
	// conns are the connections (by slot) with a zero-copy send in
	// flight or a held buffer: the send (index, valid with inFlight) and
	// the hold of the buffer their latest zero-copy send read, so that a
	// send of the rest of that buffer counts in the same hold.
	conns map[uint32]zcConn
	// pinned is the bytes of the buffers held now (a test's view).
	pinned int
	// notifs counts the sends whose first completion came and whose
	// notification has not: the kernel still reads their buffers.
	notifs int
}

// zcSend is one zero-copy send: its connection, the buffer it reads and
// where it is in its two completions.
type zcSend struct {
	gen        uint32 // of its user data; a free record's next one
	slot, cgen uint32 // its connection
	hold       *zcHold
	live       bool // its first completion or its notification is still to come
	first      bool // its first completion is still to come
}

// zcHold holds a buffer that zero-copy sends read until the last of their
// notifications.
type zcHold struct {
	buf        []byte
	refs       int  // sends of it whose notification has not come
	pooled     bool // a buffer of the loop's pool (else a caller's shared slice)
	slot, cgen uint32
}

// zcConn is a connection's state in uringZC.conns.
type zcConn struct {
	gen      uint32
	send     uint32
	inFlight bool
	hold     *zcHold
}

// setupZeroCopy gives the driver the ring's zero-copy send.
func (d *uringDriver) setupZeroCopy(r uringZCRing) { d.zc.r = r }

// zeroCopy reports whether c's next send, of n bytes, goes out with zero
// copy.
func (d *uringDriver) zeroCopy(c *Conn, n int) bool {
	return d.feats&UringZeroCopySend != 0 && n >= d.cfg.ZeroCopySendMin && c.ur.flags&ufZCOff == 0
}

// sendZC prepares the zero-copy send of p, the head of c's queue (of the
// buffer c.out.sending), and holds that buffer until its notification.
func (d *uringDriver) sendZC(c *Conn, p []byte) error {
	z := &d.zc
	i := z.newSend()
	s := &z.sends[i]
	if err := z.r.PrepareSendZC(d.sock(c), p, userData(kindSendZC, i, s.gen)); err != nil {
		z.freeSend(i)
		return err
	}
	d.onSlot(c)
	h := z.holdFor(c)
	h.refs++
	*s = zcSend{gen: s.gen, slot: c.slot, cgen: c.gen, hold: h, live: true, first: true}
	z.conns[c.slot] = zcConn{gen: c.gen, send: i, inFlight: true, hold: h}
	// The rest of this queue goes as ordinary (or zero-copy) sends, not
	// skipped ones, until it drains, as after a skipped send that found
	// the socket full: a skipped send is prepared only where dispatch
	// lists and accounts for it before any handler (uring_skip.go), and
	// this send's completions come in the middle of a dispatch.
	c.ur.flags |= ufSendZC | ufSendFull
	d.loopOps++
	d.cnt[sZeroCopySends]++
	return nil
}

// holdFor returns the hold of the buffer c is sending from: the one its
// last zero-copy send took, if that was this buffer, else a new one, which
// takes the buffer from the pool's side of the queue.
func (z *uringZC) holdFor(c *Conn) *zcHold {
	q := c.out // sending from it: not nil
	base := unsafe.SliceData(q.sending)
	if zc, ok := z.conns[c.slot]; ok && zc.gen == c.gen && zc.hold != nil && unsafe.SliceData(zc.hold.buf) == base {
		return zc.hold
	}
	var h *zcHold
	if n := len(z.spare); n > 0 {
		h, z.spare = z.spare[n-1], z.spare[:n-1]
	} else {
		h = new(zcHold)
	}
	*h = zcHold{buf: q.sending, pooled: q.shared&sharedSending == 0, slot: c.slot, cgen: c.gen}
	q.shared |= sharedSending // the hold gives it to the pool, not the queue
	z.pinned += cap(h.buf)
	return h
}

// newSend returns the index of a free send record.
func (z *uringZC) newSend() uint32 {
	if z.conns == nil {
		z.conns = make(map[uint32]zcConn)
	}
	if n := len(z.free); n > 0 {
		i := z.free[n-1]
		z.free = z.free[:n-1]
		return i
	}
	z.sends = append(z.sends, zcSend{})
	return uint32(len(z.sends) - 1)
}

// freeSend frees record i; its next user data has the next generation.
func (z *uringZC) freeSend(i uint32) {
	s := &z.sends[i]
	*s = zcSend{gen: (s.gen + 1) & genMask}
	z.free = append(z.free, i)
}

// inFlightUD returns the user data of c's zero-copy send in flight (for
// release's cancel).
func (z *uringZC) inFlightUD(c *Conn) uint64 {
	zc := z.conns[c.slot]
	return userData(kindSendZC, zc.send, z.sends[zc.send].gen)
}

// cancelSend queues the cancel of c's send in flight, zero-copy or not,
// once (release, uring_release.go).
func (d *uringDriver) cancelSend(c *Conn) bool {
	if c.ur.flags&ufSendZC == 0 {
		return d.cancelOnce(c, c.out.inFlight(), ufSendCancel, kindSend)
	}
	if c.ur.flags&ufSendCancel != 0 {
		return true
	}
	if d.r.PrepareCancel(d.zc.inFlightUD(c), userData(kindCancel, c.slot, c.gen)) != nil {
		return false
	}
	c.ur.ops++
	c.ur.flags |= ufSendCancel
	return true
}

// zcCompleted handles a zero-copy send's completion: the first (the bytes
// sent, as any send's) or its notification (the buffer is free).
func (d *uringDriver) zcCompleted(e *ring.Completion) {
	z := &d.zc
	i, gen := uint32(e.UserData), uint32(e.UserData>>32)&genMask
	if int(i) >= len(z.sends) || !z.sends[i].live || z.sends[i].gen != gen {
		d.log.Error("percore: completion of an unknown zero-copy send", "loop", d.id, "user_data", e.UserData)
		return
	}
	s := &z.sends[i]
	// The kernel posts a send's notification after its first completion
	// (io_uring/notif: "order notif vs send CQEs", 6.0, and its fix
	// 108893d for unlocked issue), so a notification finds s.first
	// false. One that came first would free the record here, and the
	// first completion would then be logged above as unknown: the
	// connection would keep one operation counted (it never closes its
	// slot) rather than have its buffer reused early.
	if e.Notif() {
		if e.ZCCopied() {
			d.cnt[sZeroCopyCopied]++
		}
		if !s.first {
			z.notifs--
		}
		d.zcDone(i)
		return
	}
	if !s.first {
		d.log.Error("percore: second result of a zero-copy send", "loop", d.id, "user_data", e.UserData)
		return
	}
	s.first = false
	if e.More() {
		z.notifs++
	}
	slot, cgen := s.slot, s.cgen
	if zc, ok := z.conns[slot]; ok && zc.gen == cgen && zc.inFlight && zc.send == i {
		zc.inFlight = false
		z.conns[slot] = zc
	}
	if !e.More() {
		d.zcDone(i) // no notification follows
	}
	c := d.l.conn(slot, cgen)
	if c == nil {
		return // cannot be: the send counted among its operations
	}
	c.ur.ops--
	c.ur.flags &^= ufSendCancel | ufSendZC
	if e.Res == -int32(unix.EOPNOTSUPP) && !c.closed() {
		// The socket cannot send with zero copy (a Unix socket): the same
		// bytes go as a plain send, and so does the rest of c's sends.
		c.ur.flags |= ufZCOff
		d.cnt[sZeroCopyFallbacks]++
		d.sendOut(c, false)
	} else {
		d.sent(c, e.Res)
	}
	if c.closed() && c.ur.ops == 0 && !holdsSocket(c) {
		d.l.freeSlot(c)
	}
}

// zcDone ends send i: its hold lets its buffer go with the last of its
// sends, and the loop has one operation fewer in the kernel.
func (d *uringDriver) zcDone(i uint32) {
	z := &d.zc
	h := z.sends[i].hold
	z.freeSend(i)
	d.loopOps--
	if h.refs--; h.refs > 0 {
		return
	}
	c := d.l.conn(h.slot, h.cgen)
	if zc, ok := z.conns[h.slot]; ok && zc.hold == h {
		if zc.hold = nil; !zc.inFlight {
			delete(z.conns, h.slot)
		} else {
			z.conns[h.slot] = zc
		}
	}
	z.pinned -= cap(h.buf)
	if h.pooled {
		if c != nil && c.out.inFlight() && unsafe.SliceData(c.out.sending) == unsafe.SliceData(h.buf) {
			// The queue still sends from it: it gives it to the pool
			// when it is done, as with any buffer it sends.
			c.out.shared &^= sharedSending
		} else {
			d.l.putBuf(h.buf)
		}
	}
	*h = zcHold{}
	z.spare = append(z.spare, h)
}

// zcAbandoned keeps the buffers of the zero-copy sends whose loops exited
// before the kernel was done with them (abandon): never reused, never
// collected, for the life of the process.
var zcAbandoned struct {
	sync.Mutex
	bufs  [][]byte
	bytes int
}

// notifsOnly reports whether everything the loop still has in the kernel
// is the notifications of zero-copy sends whose connections are gone
// from the kernel's view of the loop (their first completions came).
// A forced stop (Close, or Shutdown past its context) does not wait for
// them: the kernel may keep a closed socket's unacknowledged bytes, and
// their pages, for as long as its peer answers the window probes without
// reading (an orphan in FIN-WAIT-1), and the loop has no descriptor left
// to reset it by. The loop exits and abandons their buffers.
func (d *uringDriver) notifsOnly() bool {
	return d.zc.notifs > 0 && d.loopOps == d.zc.notifs
}

// abandon gives the buffers of the zero-copy sends still waiting for
// their notifications to zcAbandoned, as the loop exits: the kernel may
// still read them, so they may be neither given to the pool, unmapped,
// nor left to the collector. A leak bounded by what was in flight,
// logged.
func (z *uringZC) abandon(d *uringDriver) {
	var n, bytes int
	zcAbandoned.Lock()
	defer zcAbandoned.Unlock()
	for i := range z.sends {
		h := z.sends[i].hold
		if !z.sends[i].live || h == nil || h.refs == 0 {
			continue
		}
		h.refs = 0 // each hold once
		zcAbandoned.bufs = append(zcAbandoned.bufs, h.buf)
		n++
		bytes += cap(h.buf)
	}
	zcAbandoned.bytes += bytes
	if n > 0 {
		d.log.Warn("percore: loop exits with zero-copy sends the kernel still reads (their peers have not acknowledged the bytes): their buffers are kept, never reused",
			"loop", d.id, "buffers", n, "bytes", bytes)
	}
}
