package runtime

import (
	"bytes"
	"testing"

	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// zcStubRing records the zero-copy sends prepared (a stand-in for the
// kernel ring in the kernel-free tests).
type zcStubRing struct{ sends, sendmsgs []uint64 }

func (r *zcStubRing) PrepareSendZC(_ int, _ []byte, ud uint64) error {
	r.sends = append(r.sends, ud)
	return nil
}

func (r *zcStubRing) PrepareSendmsgZC(_ int, _ *unix.Msghdr, ud uint64) error {
	r.sendmsgs = append(r.sendmsgs, ud)
	return nil
}

const (
	stubCQEMore  = 1 << 1 // IORING_CQE_F_MORE
	stubCQENotif = 1 << 3 // IORING_CQE_F_NOTIF
)

// TestZeroCopyDatagramSlotHeld drives the datagram path's zero-copy sends
// without a kernel (on loopback the kernel copies at once, so a slot
// reused too early would not show): a send slot stays the kernel's from
// its first completion to its notification, so the next datagram takes
// another slot, the loop counts it among its operations and its datagram
// against MaxPacketQueue until then; a datagram under the threshold goes
// plainly; a refusal (-EOPNOTSUPP) sends the datagram again plainly from
// another slot, and the socket's later datagrams too.
func TestZeroCopyDatagramSlotHeld(t *testing.T) {
	l, d, fr, _, _, _ := uringTestLoop(t)
	zr := &zcStubRing{}
	d.feats |= UringZeroCopySend
	d.setupZeroCopy(zr)
	d.cfg.ZeroCopySendMin = 32
	p := &PacketConn{loop: l, fd: fakeFd}
	var sa unix.RawSockaddrInet6
	write := func(n int) {
		t.Helper()
		if err := d.writeTo(p, bytes.Repeat([]byte{byte(n)}, n), &sa, unix.SizeofSockaddrInet4, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	ops := d.loopOps
	write(64)
	if len(zr.sendmsgs) != 1 || fr.count(kindPacketSend) != 0 {
		t.Fatalf("a datagram of 64 bytes: %d zero-copy sendmsgs, %d plain; want 1 and 0", len(zr.sendmsgs), fr.count(kindPacketSend))
	}
	first := zr.sendmsgs[0]
	d.complete(&ring.Completion{UserData: first, Res: 64, Flags: stubCQEMore})
	if l.cnt[sPacketsOut] != 1 {
		t.Fatalf("the first completion did not report the datagram sent (%d out)", l.cnt[sPacketsOut])
	}
	if d.loopOps != ops+1 || d.pk.inFlight != 1 || len(d.pk.free) != 0 {
		t.Fatalf("after the first completion: %d operations (want %d), %d datagrams in flight (want 1), %d free slots (want 0)",
			d.loopOps, ops+1, d.pk.inFlight, len(d.pk.free))
	}
	write(16) // under the threshold: plain, and not in the held slot
	if fr.count(kindPacketSend) != 1 || uint32(fr.prepared[len(fr.prepared)-1]) == uint32(first) {
		t.Fatalf("the datagram under the threshold: %d plain sendmsgs, slot %d (the held one is %d)",
			fr.count(kindPacketSend), uint32(fr.prepared[len(fr.prepared)-1]), uint32(first))
	}
	d.complete(&ring.Completion{UserData: fr.prepared[len(fr.prepared)-1], Res: 16})
	d.complete(&ring.Completion{UserData: first, Res: int32(-1 << 31), Flags: stubCQENotif})
	if d.loopOps != ops || d.pk.inFlight != 0 || len(d.pk.free) != 2 || l.cnt[sZeroCopyCopied] != 1 {
		t.Fatalf("after the notification: %d operations (want %d), %d in flight, %d free slots (want 2), %d copied (want 1)",
			d.loopOps, ops, d.pk.inFlight, len(d.pk.free), l.cnt[sZeroCopyCopied])
	}

	// A refusal: the same datagram again, plainly, from another slot;
	// the refused slot waits for its notification.
	write(48)
	refused := zr.sendmsgs[len(zr.sendmsgs)-1]
	plain := fr.count(kindPacketSend)
	d.complete(&ring.Completion{UserData: refused, Res: -int32(unix.EOPNOTSUPP), Flags: stubCQEMore})
	if fr.count(kindPacketSend) != plain+1 || uint32(fr.prepared[len(fr.prepared)-1]) == uint32(refused) ||
		l.cnt[sZeroCopyFallbacks] != 1 || !p.ur.zcOff {
		t.Fatalf("after a refusal: %d plain sendmsgs (want %d) in slot %d (the refused one %d), %d fallbacks, off %v",
			fr.count(kindPacketSend), plain+1, uint32(fr.prepared[len(fr.prepared)-1]), uint32(refused),
			l.cnt[sZeroCopyFallbacks], p.ur.zcOff)
	}
	write(64)
	if len(zr.sendmsgs) != 2 {
		t.Fatalf("the socket went on with zero copy after a refusal (%d zero-copy sendmsgs)", len(zr.sendmsgs))
	}
	if d.pk.sends[uint32(refused)].held != true {
		t.Fatal("the refused slot was freed before its notification")
	}
	d.complete(&ring.Completion{UserData: refused, Flags: stubCQENotif})
	if d.pk.sends[uint32(refused)].held || d.pk.sends[uint32(refused)].zc {
		t.Fatal("the refused slot is still held after its notification")
	}
}
