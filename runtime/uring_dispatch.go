//go:build linux

package runtime

import (
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver's dispatch: each completion to its operation's
// handler, by the kind in its user data.

// complete hands one completion to the handler of its kind.
func (d *uringDriver) complete(e *ring.Completion) {
	kind := uint8(e.UserData >> 56)
	slot := uint32(e.UserData)
	gen := uint32(e.UserData>>32) & genMask
	l := d.l
	switch kind {
	case kindWake:
		d.waker.Woke()
		if err := d.armWake(); err != nil {
			d.log.Error("percore: re-arm wake-up read", "loop", d.id, "err", err)
		}
		l.runPosted()
		return
	case kindMsgWake:
		d.waker.Woke()
		l.runPosted()
		return
	case kindMsgSent:
		if e.Res < 0 {
			d.msgFailed(slot)
		}
		return
	case kindAccept:
		d.accepted(int(slot), e)
		return
	case kindAcceptPoll:
		d.listenerReady(int(slot), e)
		return
	case kindAcceptCancel:
		d.loopOps--
		return
	case kindFile, kindFileSync:
		d.fileCompleted(kind, slot, gen, e.Res)
		return
	case kindPacketRecv:
		d.packetReceived(int(slot), e)
		return
	case kindPacketSend:
		d.packetCompleted(slot, e) // uring_zc_packet.go
		return
	case kindPacketCancel:
		d.loopOps--
		return
	case kindSlotDrop:
		d.loopOps--
		d.slotClosed()
		return
	case kindInstall:
		d.installLate(e) // its wait gave up (uring_fixed.go)
		return
	case kindSendZC:
		d.zcCompleted(e) // uring_zc.go
		return
	case kindCloseSlot:
		d.slotClosed() // and the connection's part below
	}
	c := l.conn(slot, gen)
	if c == nil {
		if id, ok := e.Buffer(); ok {
			d.dropPart(id, e) // its connection is gone
		}
		return
	}
	switch kind {
	case kindRecv:
		d.received(c, e)
	case kindSend:
		c.ur.ops--
		c.ur.flags &^= ufSendCancel
		if c.ur.flags&ufSendSkip != 0 {
			d.skipFailed(c, e.Res)
		} else {
			d.sent(c, e.Res)
		}
	case kindConnect:
		c.ur.ops--
		var err error
		if e.Res < 0 {
			err = errnoErr("connect", unix.Errno(-e.Res))
		}
		l.connected(c, err)
	case kindShutdown:
		// A slot's shutdown (uring_fixed.go); it fails the connection as
		// the system call's failure does (uring_send.go).
		c.ur.ops--
		d.slotShutDown(c)
		if e.Res < 0 && e.Res != -int32(unix.ENOTCONN) && !c.closed() {
			l.fail(c, "shutdown", errnoErr("shutdown", unix.Errno(-e.Res)))
		}
	case kindClose, kindCancel, kindCloseSlot:
		c.ur.ops--
	case kindSplice, kindSplicePoll:
		c.ur.ops--
		d.spliced(c, kind, e.Res)
	}
	if c.closed() && c.ur.ops == 0 && !holdsSocket(c) {
		l.freeSlot(c)
	}
}
