package runtime

import (
	"bytes"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The connection model's zero-copy sends (UringZeroCopySend, uring_zc.go):
// the stand-in kernel's SEND_ZC, which completes twice (the bytes sent,
// with More when a notification follows, then the notification at a
// later step of its own), and the oracle of the buffers such sends read.
// From the moment a zero-copy send is submitted until its notification
// (or its first completion, when none follows) its bytes must stay as
// they were, and no buffer of the loop's pool that they lie in may be in
// the pool's free lists; every notification must come before the loop
// exits, and the driver then holds no send and no buffer.

const (
	cqeNotif        = 1 << 3  // IORING_CQE_F_NOTIF
	notifUsageCopy  = 1 << 31 // IORING_NOTIF_USAGE_ZC_COPIED (res, read as a u32)
	zcModelFallback = 60      // one first completion in this many refuses zero copy
)

// zcPin is a zero-copy send's buffer as the oracle sees it.
type zcPin struct {
	ud   uint64
	p    []byte
	snap []byte
	done bool // the kernel is done with p
}

// PrepareSendZC queues a zero-copy send, as the ring does.
func (r *simRing) PrepareSendZC(fd int, p []byte, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd, p: p, zc: true})
}

// PrepareSendmsgZC is here for the interface: the model has no datagram
// sockets.
func (r *simRing) PrepareSendmsgZC(fd int, _ *unix.Msghdr, ud uint64) error {
	r.k.fault("a zero-copy sendmsg in the connection model")
	return r.prep(&simOp{ud: ud, fd: fd, zc: true})
}

// zcConn returns the connection whose zero-copy send has user data ud
// (the driver's record names it), while its first completion is to come.
func (m *connModel) zcConn(ud uint64) *mconn {
	i, gen := uint32(ud), uint32(ud>>32)&genMask
	z := &m.d.zc
	if int(i) >= len(z.sends) || !z.sends[i].live || z.sends[i].gen != gen {
		return nil
	}
	s := z.sends[i]
	for _, mc := range m.conns {
		if mc.c != nil && mc.slot == s.slot && mc.gen == s.cgen {
			return mc
		}
	}
	return nil
}

// zcSubmitted sees a zero-copy send handed to the kernel (under k.mu).
func (m *connModel) zcSubmitted(op *simOp) {
	mc := m.zcConn(op.ud)
	switch {
	case mc == nil:
		m.k.fault("a zero-copy send of no connection's")
	case mc.freed:
		m.k.fault("a zero-copy send for connection %d after its slot was freed", mc.id)
	case m.direct && !op.fixed:
		m.k.fault("a zero-copy send of connection %d on a slot names a descriptor", mc.id)
	case !m.direct && op.fixed:
		m.k.fault("a zero-copy send names a slot without direct descriptors")
	}
	m.pins = append(m.pins, &zcPin{ud: op.ud, p: op.p, snap: bytes.Clone(op.p)})
}

// zcPinOf returns the pin of the send with user data ud not yet done.
func (m *connModel) zcPinOf(ud uint64) *zcPin {
	for _, p := range m.pins {
		if p.ud == ud && !p.done {
			return p
		}
	}
	return nil
}

// zcStep completes zero-copy send op (taken from those in flight): its
// first completion, or its notification.
func (m *connModel) zcStep(op *simOp, settling bool) {
	r, in := m.r, m.in
	if op.notif {
		pin := m.zcPinOf(op.ud)
		m.checkPins() // unchanged and not in the pool, up to this moment
		pin.done = true
		res := int32(0)
		if in.chance(1, 2) {
			res = int32(-1 << 31) // notifUsageCopy as the kernel writes it in the u32 res
		}
		r.post(op.ud, res, cqeNotif)
		m.seen["zero-copy notification"]++
		m.log("notification of a zero-copy send")
		return
	}
	mc := m.zcConn(op.ud)
	if mc == nil {
		m.k.fault("the first completion of a zero-copy send of no connection's")
		return
	}
	more := true
	n := len(op.p)
	switch x := in.intn(zcModelFallback); {
	case !settling && x == 0:
		r.post(op.ud, -int32(unix.EOPNOTSUPP), cqeMore)
		m.seen["zero-copy fallback"]++
		m.log("zero-copy send of connection %d refused (EOPNOTSUPP)", mc.id)
		m.zcNotifLater(op)
		return
	case !settling && x == 1:
		more = in.chance(1, 2) // a failure may or may not have a notification
		flags := uint32(0)
		if more {
			flags = cqeMore
		}
		r.post(op.ud, -int32(unix.EPIPE), flags)
		mc.failed = true
		m.log("zero-copy send of connection %d fails (more %v)", mc.id, more)
		if more {
			m.zcNotifLater(op)
		} else {
			m.checkPins()
			m.zcPinOf(op.ud).done = true
		}
		return
	case !settling && n > 1 && in.chance(1, 2):
		n = 1 + in.intn(n-1)
		m.seen["zero-copy partial"]++
	}
	mc.received = append(mc.received, op.p[:n]...)
	if !bytes.HasPrefix(mc.written, mc.received) {
		m.k.fault("connection %d: the peer received bytes the handler did not write in that order (at %d)",
			mc.id, len(mc.received)-n)
	}
	r.post(op.ud, int32(n), cqeMore)
	m.seen["zero-copy send"]++
	m.log("zero-copy send of connection %d completes %d of %d", mc.id, n, len(op.p))
	m.zcNotifLater(op)
}

// zcNotifLater puts op's notification in flight: a later step posts it.
func (m *connModel) zcNotifLater(op *simOp) {
	m.r.inflight = append(m.r.inflight, &simOp{kind: kindSendZC, ud: op.ud, p: op.p, zc: true, notif: true})
}

// checkPins checks every zero-copy send's bytes the kernel may still read:
// unchanged, and in no buffer of the loop's free lists.
func (m *connModel) checkPins() {
	for _, pin := range m.pins {
		if pin.done {
			continue
		}
		if !bytes.Equal(pin.p, pin.snap) {
			m.k.fault("the bytes of a zero-copy send were written before its notification")
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(pin.p)))
		hi := lo + uintptr(len(pin.p))
		for _, free := range m.l.bufs.free {
			for _, b := range free {
				blo := uintptr(unsafe.Pointer(unsafe.SliceData(b[:cap(b)])))
				if blo < hi && lo < blo+uintptr(cap(b)) {
					m.k.fault("the buffer of a zero-copy send is in the loop's pool before its notification")
				}
			}
		}
	}
	// Done pins are dropped, so that the list stays short.
	keep := m.pins[:0]
	for _, pin := range m.pins {
		if !pin.done {
			keep = append(keep, pin)
		}
	}
	clear(m.pins[len(keep):])
	m.pins = keep
}

// checkZCEnd checks, once the loop exited, that the kernel finished every
// zero-copy send before it did and that the driver holds nothing of them.
func (m *connModel) checkZCEnd() {
	for _, op := range m.r.inflight {
		if op.zc {
			m.faultf("the loop exited with a zero-copy send's %s to come", map[bool]string{false: "completion", true: "notification"}[op.notif])
		}
	}
	m.checkPins() // and drops the done ones
	if len(m.pins) != 0 {
		m.faultf("the loop exited with %d zero-copy sends' buffers still the kernel's", len(m.pins))
	}
	z := &m.d.zc
	if n := len(z.sends) - len(z.free); n != 0 || z.pinned != 0 || len(z.conns) != 0 {
		m.faultf("at the end the driver holds %d zero-copy sends, %d bytes of buffers, %d connections' state", n, z.pinned, len(z.conns))
	}
}

// checkZCAbandoned checks, once a forced stop let the loop exit with
// zero-copy notifications to come, that only notifications were left
// (every first completion came), and that the buffer of each send the
// kernel may still read is kept (zcAbandoned), unchanged and in no free
// list; the model's entries are taken out of zcAbandoned again.
func (m *connModel) checkZCAbandoned() {
	for _, op := range m.r.inflight {
		if op.zc && !op.notif {
			m.faultf("a forced stop let the loop exit with a zero-copy send's first completion to come")
		}
	}
	m.checkPins()
	zcAbandoned.Lock()
	defer zcAbandoned.Unlock()
	kept := make([]bool, len(zcAbandoned.bufs))
	for _, pin := range m.pins {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(pin.p)))
		found := false
		for i, b := range zcAbandoned.bufs {
			blo := uintptr(unsafe.Pointer(unsafe.SliceData(b[:cap(b)])))
			if blo <= lo && lo+uintptr(len(pin.p)) <= blo+uintptr(cap(b)) {
				found, kept[i] = true, true
				break
			}
		}
		if !found {
			m.faultf("the loop exited with a zero-copy send's buffer still the kernel's and not kept")
		}
	}
	bufs := zcAbandoned.bufs[:0]
	for i, b := range zcAbandoned.bufs {
		if kept[i] {
			zcAbandoned.bytes -= cap(b) // the model's own: taken out again
		} else {
			bufs = append(bufs, b)
		}
	}
	clear(zcAbandoned.bufs[len(bufs):])
	zcAbandoned.bufs = bufs
}
