//go:build linux

package runtime

import (
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// Zero-copy datagram sends (UringZeroCopySend, docs/decisions/0068): a
// datagram (or a GSO batch) of at least Config.ZeroCopySendMin bytes goes
// out with IORING_OP_SENDMSG_ZC from its send slot (uring_packet.go). Its
// first completion reports the send as any sendmsg's does; the slot, with
// its message, address and payload, stays the kernel's until the
// notification, so that no later WriteTo reuses it: it counts among the
// loop's operations in the kernel (the loop waits for it before it exits)
// and its datagrams against MaxPacketQueue until then. A socket that
// refuses zero copy (-EOPNOTSUPP) sends the datagram again, copied into a
// slot of its own, as a plain sendmsg, and sends plainly from then on
// (Stats.ZeroCopyFallbacks).

// prepareSendmsg prepares the sendmsg of slot s for p, with zero copy when
// the loop uses it and s is large enough.
func (d *uringDriver) prepareSendmsg(p *PacketConn, s *uringSend, slot uint32) error {
	ud := userData(kindPacketSend, slot, 0)
	s.zc, s.held = false, false
	if d.feats&UringZeroCopySend == 0 || len(s.buf) < d.cfg.ZeroCopySendMin || p.ur.zcOff {
		return d.r.PrepareSendmsg(p.fd, &s.msg, ud)
	}
	if err := d.zc.r.PrepareSendmsgZC(p.fd, &s.msg, ud); err != nil {
		return err
	}
	s.zc = true
	d.cnt[sZeroCopySends]++
	return nil
}

// packetCompleted handles a completion of a datagram send: a plain one's,
// or a zero-copy one's first completion or notification.
func (d *uringDriver) packetCompleted(slot uint32, e *ring.Completion) {
	pk := &d.pk
	s := pk.sends[slot]
	if !s.zc {
		d.packetSent(slot, e.Res)
		return
	}
	if e.Notif() {
		if e.ZCCopied() {
			d.cnt[sZeroCopyCopied]++
		}
		d.packetReleased(slot)
		return
	}
	if e.Res == -int32(unix.EOPNOTSUPP) && s.p != nil && s.p.fd >= 0 && !d.l.listenersClosed() {
		// The socket cannot send with zero copy: the same datagrams go
		// plainly, from a slot of their own (this one is the kernel's
		// until its notification).
		p, sa, count := s.p, s.sa, s.count
		p.ur.zcOff = true
		d.cnt[sZeroCopyFallbacks]++
		pk.inFlight -= count
		d.loopOps--
		s.p = nil
		if err := d.writeTo(p, s.buf, &sa, s.msg.Namelen, s.seg, count); err != nil {
			d.l.packetSent(0, count, err)
		}
	} else {
		d.packetDone(slot, e.Res)
	}
	if !e.More() {
		pk.free = append(pk.free, slot) // no notification follows
		return
	}
	// The slot stays the kernel's until the notification: counted as in
	// flight again, as its datagrams.
	s.held = true
	pk.inFlight += s.count
	d.loopOps++
}

// packetReleased frees slot once its zero-copy send's notification came.
func (d *uringDriver) packetReleased(slot uint32) {
	pk := &d.pk
	s := pk.sends[slot]
	if !s.held {
		d.log.Error("percore: notification of a datagram send not waiting for one", "loop", d.id, "slot", slot)
		return
	}
	pk.inFlight -= s.count
	d.loopOps--
	s.zc, s.held = false, false
	pk.free = append(pk.free, slot)
}
