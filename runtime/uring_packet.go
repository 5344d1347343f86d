//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// Datagrams on io_uring: each UDP socket has one multishot recvmsg armed
// that fills buffers from a provided-buffer ring of its own size
// (Config.PacketBufferSize, group packetBufGroup), the kernel writing a
// header, the source address, the control messages and the payload into
// the buffer it picks; replies are sendmsg operations from a slab of send
// slots, prepared by WriteTo and submitted with the turn's one enter.

// packetBufGroup is the buffer group of the datagram receive buffers (the
// stream receives use group 0).
const packetBufGroup = 1

// uringPacket is the io_uring driver's state of one datagram socket.
type uringPacket struct {
	// msg is what the multishot recvmsg reads (only Namelen and
	// Controllen), referenced while it is armed.
	msg       unix.Msghdr
	armed     bool
	cancelled bool // stopping: its cancel is queued, do not re-arm
	zcOff     bool // the socket refused a zero-copy send (uring_zc_packet.go)
}

// uringPackets is the io_uring driver's state of the loop's datagram
// sockets.
type uringPackets struct {
	br    *ring.BufRing // nil until the first datagram socket
	socks []*PacketConn // by listener index
	rearm []*PacketConn // to arm again after this turn's completions
	// sends are the send slots, free the unused ones; inFlight counts
	// those the kernel holds.
	sends    []*uringSend
	free     []uint32
	inFlight int
}

// uringSend is one datagram handed to the kernel: the message, its one
// iovec, the destination and a copy of the payload, all referenced here
// until the send completes.
type uringSend struct {
	msg unix.Msghdr
	iov unix.Iovec
	sa  unix.RawSockaddrInet6
	buf []byte
	// With UDP_SEGMENT (Config.UDPGSO): the socket, the segment size,
	// the control message; count is the datagrams buf carries.
	p     *PacketConn
	seg   int
	count int
	ctrl  [gsoControlLen / 8]uint64
	// zc says it went with zero copy, held that the slot waits for the
	// notification (uring_zc_packet.go).
	zc, held bool
}

// packetHeadroom is what precedes the payload in a datagram's buffer: the
// recvmsg_out header, room for an IPv6 source address, the control
// message.
const packetHeadroom = ring.SizeofRecvmsgOut + unix.SizeofSockaddrInet6 + packetControlLen

func (d *uringDriver) listenPacket(p *PacketConn) error {
	support, err := ring.Probe()
	if err == nil {
		err = support.Require(ring.OpRecvmsg, ring.OpSendmsg)
	}
	if err != nil {
		return err
	}
	pk := &d.pk
	if pk.br == nil {
		r, ok := d.r.(*ring.Ring)
		if !ok {
			return errors.New("datagram sockets need a kernel ring")
		}
		cfg := d.cfg
		br, err := r.NewBufRing(packetBufGroup, cfg.PacketBufferCount, cfg.PacketBufferSize+packetHeadroom)
		if err != nil {
			return fmt.Errorf("datagram buffers: %w", err)
		}
		pk.br = br
	}
	if err := setPacketOptions(p.fd, d.cfg.UDPGRO); err != nil {
		return err
	}
	p.ur.msg.Namelen = unix.SizeofSockaddrInet6
	p.ur.msg.Controllen = packetControlLen
	for len(pk.socks) <= p.idx {
		pk.socks = append(pk.socks, nil)
	}
	pk.socks[p.idx] = p
	return d.armPacket(p)
}

// armPacket arms p's multishot recvmsg.
func (d *uringDriver) armPacket(p *PacketConn) error {
	if p.ur.armed || p.ur.cancelled || p.fd < 0 {
		return nil
	}
	if err := d.r.PrepareRecvmsgMultishot(p.fd, &p.ur.msg, unix.MSG_TRUNC, d.pk.br, userData(kindPacketRecv, uint32(p.idx), 0)); err != nil {
		return fmt.Errorf("arm recvmsg: %w", err)
	}
	p.ur.armed = true
	d.loopOps++
	return nil
}

// packetReceived handles a completion of socket i's multishot recvmsg.
func (d *uringDriver) packetReceived(i int, e *ring.Completion) {
	p := d.pk.socks[i]
	if !e.More() {
		p.ur.armed = false
		d.loopOps--
		if !p.ur.cancelled {
			d.pk.rearm = append(d.pk.rearm, p)
		}
	}
	id, ok := e.Buffer()
	switch {
	case e.Res >= 0 && ok:
		d.deliverPacket(p, id, int(e.Res))
	case e.Res >= 0:
		// No buffer: nothing to deliver (the kernel always selects one).
	case e.Res == -int32(unix.ENOBUFS), e.Res == -int32(unix.ECANCELED):
		// Out of buffers (armed again once this turn's are back), or
		// stopped.
	default:
		// An error the socket reports (an ICMP error for an earlier
		// send, on a connected socket): the socket goes on.
		d.l.packetRecvFailed()
	}
}

// deliverPacket parses the datagram in buffer id (n bytes written) and
// hands it to the loop, then gives the buffer back.
func (d *uringDriver) deliverPacket(p *PacketConn, id uint16, n int) {
	br := d.pk.br
	defer br.Recycle(id)
	buf := br.Bytes(id, br.Size())
	if n < ring.SizeofRecvmsgOut {
		d.l.packetRecvFailed()
		return
	}
	out := (*ring.RecvmsgOut)(unsafe.Pointer(&buf[0]))
	name := buf[ring.SizeofRecvmsgOut : ring.SizeofRecvmsgOut+unix.SizeofSockaddrInet6]
	ctrlAt := ring.SizeofRecvmsgOut + unix.SizeofSockaddrInet6
	control := buf[ctrlAt : ctrlAt+min(int(out.Controllen), packetControlLen)]
	payload := buf[packetHeadroom:]
	size := int(out.Payloadlen)
	truncated := out.Flags&unix.MSG_TRUNC != 0
	payload = payload[:min(size, len(payload))]
	d.l.packetIn(p, payload, size, truncated, sys.AddrPortFrom(name), control)
}

// packetTurn runs after a turn's completions: the buffers are back with
// the kernel, so the receives that ran out of them are armed again.
func (d *uringDriver) packetTurn() {
	pk := &d.pk
	if pk.br == nil {
		return
	}
	pk.br.Publish()
	for i, p := range pk.rearm {
		pk.rearm[i] = nil
		if err := d.armPacket(p); err != nil {
			d.log.Error("percore: re-arm datagram receive", "loop", d.id, "listener", p.ln.String(), "err", err)
		}
	}
	pk.rearm = pk.rearm[:0]
}

// packetRoom counts the loop's datagrams in flight and pending in GSO
// batches: the io_uring bound is per loop.
func (d *uringDriver) packetRoom(p *PacketConn) int {
	return d.cfg.MaxPacketQueue - d.pk.inFlight - d.l.gsoPending()
}

func (d *uringDriver) writeTo(p *PacketConn, b []byte, sa *unix.RawSockaddrInet6, salen uint32, seg, count int) error {
	pk := &d.pk
	if pk.inFlight+count > d.cfg.MaxPacketQueue {
		return errPacketQueueFull
	}
	var slot uint32
	if n := len(pk.free); n > 0 {
		slot = pk.free[n-1]
		pk.free = pk.free[:n-1]
	} else {
		slot = uint32(len(pk.sends))
		pk.sends = append(pk.sends, &uringSend{})
	}
	s := pk.sends[slot]
	s.buf = append(s.buf[:0], b...)
	s.sa = *sa
	setMsghdr(&s.msg, &s.iov, s.buf, &s.sa, salen, seg, &s.ctrl)
	s.p, s.seg, s.count = p, seg, count
	if err := d.prepareSendmsg(p, s, slot); err != nil { // uring_zc_packet.go
		pk.free = append(pk.free, slot)
		return err
	}
	pk.inFlight += count
	d.loopOps++
	return nil
}

// packetSent handles a sendmsg's completion.
func (d *uringDriver) packetSent(slot uint32, res int32) {
	d.packetDone(slot, res)
	d.pk.free = append(d.pk.free, slot)
}

// packetDone reports a sendmsg's result; the caller frees the slot (a
// zero-copy send's once its notification came).
func (d *uringDriver) packetDone(slot uint32, res int32) {
	pk := &d.pk
	s := pk.sends[slot]
	pk.inFlight -= s.count
	d.loopOps--
	if res < 0 && gsoRefusal(s.seg, unix.Errno(-res)) && s.p.fd >= 0 && !d.l.listenersClosed() {
		// The kernel refused UDP_SEGMENT: the slot's buffer is ours
		// again, so its datagrams go out one by one (copied into
		// other slots before this one is freed), and GSO may go off
		// for the socket.
		d.l.gsoRefused(s.p, unix.Errno(-res))
		sa := s.sa
		for off := 0; off < len(s.buf); {
			var b []byte
			b, off = gsoSplit(s.buf, off, s.seg)
			if err := d.writeTo(s.p, b, &sa, s.msg.Namelen, 0, 1); err != nil {
				d.l.packetSent(0, 1, err)
			}
		}
		s.p = nil
		return
	}
	count := s.count
	s.p = nil
	if res < 0 {
		d.l.packetSent(0, count, errnoErr("sendmsg", unix.Errno(-res)))
		return
	}
	d.l.packetSent(int(res), count, nil)
}

// stopPackets cancels every datagram socket's receive; sends in flight
// complete on their own.
func (d *uringDriver) stopPackets() {
	for _, p := range d.pk.socks {
		if p == nil || p.ur.cancelled {
			continue
		}
		p.ur.cancelled = true
		if p.ur.armed {
			if d.r.PrepareCancel(userData(kindPacketRecv, uint32(p.idx), 0), userData(kindPacketCancel, 0, 0)) == nil {
				d.loopOps++
			}
		}
	}
}

func (pk *uringPackets) close() error {
	if pk.br == nil {
		return nil
	}
	err := pk.br.Close()
	pk.br = nil
	return err
}
