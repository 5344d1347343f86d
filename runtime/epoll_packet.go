//go:build linux

package runtime

import (
	"os"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/poller"
	"golang.org/x/sys/unix"
)

// Datagrams on epoll: a readable UDP socket is read with one recvmmsg of up
// to packetBatch datagrams per turn, into the loop's batch of buffers
// (anonymous memory: pages no datagram reached cost nothing); the
// datagrams handlers send during a turn wait in their socket's queue and go
// out with one sendmmsg per packetBatch at the end of the turn. What the
// socket's send buffer does not take waits for writability, up to
// Config.MaxPacketQueue datagrams per socket.

// packetBatch is the most datagrams one recvmmsg or sendmmsg moves.
const packetBatch = 32

// epollPacket is the epoll driver's state of one datagram socket.
type epollPacket struct {
	// queue[head:n] are the datagrams waiting to be sent; the entries
	// keep their buffers for reuse.
	queue   []epollDatagram
	head, n int
	queued  int  // datagrams in queue[head:n] (an entry may carry several)
	pollOut bool // registered for writability: the send buffer was full
	dirty   bool // on the end-of-turn list
}

// epollDatagram is one queued datagram.
type epollDatagram struct {
	sa    unix.RawSockaddrInet6
	salen uint32
	buf   []byte
	seg   int // UDP_SEGMENT's size when it carries count datagrams; 0: one
	count int
	ctrl  [gsoControlLen / 8]uint64
}

// epollPackets is the epoll driver's state of the loop's datagram sockets.
type epollPackets struct {
	socks []*PacketConn // by listener index
	dirty []*PacketConn // with datagrams queued this turn
	// The receive batch: messages, their iovecs, source addresses,
	// control messages, and the buffers (mem, mapped).
	msgs  []poller.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6
	ctrl  []byte
	mem   []byte
	size  int // each buffer's size
	// The send batch.
	smsgs []poller.Mmsghdr
	siovs []unix.Iovec
}

func (d *epollDriver) listenPacket(p *PacketConn) error {
	pk := &d.pk
	if pk.mem == nil {
		size := d.cfg.PacketBufferSize
		mem, err := sys.Map(packetBatch * size)
		if err != nil {
			return os.NewSyscallError("mmap", err)
		}
		pk.mem, pk.size = mem, size
		pk.msgs = make([]poller.Mmsghdr, packetBatch)
		pk.iovs = make([]unix.Iovec, packetBatch)
		pk.names = make([]unix.RawSockaddrInet6, packetBatch)
		pk.ctrl = make([]byte, packetBatch*packetControlLen)
		pk.smsgs = make([]poller.Mmsghdr, packetBatch)
		pk.siovs = make([]unix.Iovec, packetBatch)
		for i := range packetBatch {
			poller.SetIovec(&pk.iovs[i], mem[i*size:(i+1)*size])
			h := &pk.msgs[i].Hdr
			h.Name = (*byte)(unsafe.Pointer(&pk.names[i]))
			h.Iov = &pk.iovs[i]
			h.Iovlen = 1
			h.Control = &pk.ctrl[i*packetControlLen]
		}
	}
	if err := setPacketOptions(p.fd, d.cfg.UDPGRO); err != nil {
		return err
	}
	for len(pk.socks) <= p.idx {
		pk.socks = append(pk.socks, nil)
	}
	pk.socks[p.idx] = p
	d.calls++
	return d.p.Add(p.fd, poller.In, epollPacketTag|uint64(p.idx))
}

// packetReady handles socket i's readiness: one batch in, and the queue
// out when it is writable again.
func (d *epollDriver) packetReady(i int, events uint32) {
	if i >= len(d.pk.socks) || d.pk.socks[i] == nil {
		return
	}
	p := d.pk.socks[i]
	if p.fd < 0 {
		return
	}
	if events&(poller.In|poller.Err|poller.Hup) != 0 {
		d.receivePackets(p)
	}
	if events&poller.Out != 0 && p.fd >= 0 {
		d.sendPackets(p)
	}
}

// receivePackets reads one batch of datagrams from p and hands each to the
// loop.
func (d *epollDriver) receivePackets(p *PacketConn) {
	pk := &d.pk
	for i := range pk.msgs {
		h := &pk.msgs[i].Hdr
		h.Namelen = unix.SizeofSockaddrInet6
		h.SetControllen(packetControlLen)
		h.Flags = 0
	}
	d.calls++
	// MSG_TRUNC makes the kernel report a datagram's full length even when
	// it did not fit.
	n, errno := poller.Recvmmsg(p.fd, pk.msgs, unix.MSG_DONTWAIT|unix.MSG_TRUNC)
	switch {
	case errno == unix.EAGAIN:
		return
	case errno != 0:
		d.l.packetRecvFailed() // an ICMP error for an earlier send: go on
		return
	}
	for i := range n {
		m := &pk.msgs[i]
		size := int(m.Len)
		buf := pk.mem[i*pk.size : (i+1)*pk.size]
		name := unsafe.Slice((*byte)(unsafe.Pointer(&pk.names[i])), unix.SizeofSockaddrInet6)
		ctrl := pk.ctrl[i*packetControlLen : i*packetControlLen+min(int(m.Hdr.Controllen), packetControlLen)]
		d.l.packetIn(p, buf[:min(size, pk.size)], size, m.Hdr.Flags&unix.MSG_TRUNC != 0, sys.AddrPortFrom(name), ctrl)
		if p.fd < 0 {
			return // the handler's loop began to stop
		}
	}
}

func (d *epollDriver) packetRoom(p *PacketConn) int {
	e := &p.ep
	if e.head == e.n {
		e.queued = 0
	}
	return d.cfg.MaxPacketQueue - e.queued - p.gso.n
}

func (d *epollDriver) writeTo(p *PacketConn, b []byte, sa *unix.RawSockaddrInet6, salen uint32, seg, count int) error {
	e := &p.ep
	if e.head == e.n {
		e.head, e.n, e.queued = 0, 0, 0
	}
	if e.queued+count > d.cfg.MaxPacketQueue {
		return errPacketQueueFull
	}
	if e.n == len(e.queue) {
		if e.head > 0 {
			// Move the waiting datagrams down, swapping so that every
			// entry keeps a buffer.
			for i := e.head; i < e.n; i++ {
				e.queue[i-e.head], e.queue[i] = e.queue[i], e.queue[i-e.head]
			}
			e.n -= e.head
			e.head = 0
		} else {
			e.queue = append(e.queue, epollDatagram{})
		}
	}
	q := &e.queue[e.n]
	q.sa, q.salen = *sa, salen
	q.buf = append(q.buf[:0], b...)
	q.seg, q.count = seg, count
	e.n++
	e.queued += count
	if !e.dirty && !e.pollOut {
		e.dirty = true
		d.pk.dirty = append(d.pk.dirty, p)
	}
	return nil
}

// flushPackets sends what the turn's handlers queued.
func (d *epollDriver) flushPackets() {
	for i, p := range d.pk.dirty {
		d.pk.dirty[i] = nil
		p.ep.dirty = false
		if p.fd >= 0 && !p.ep.pollOut {
			d.sendPackets(p)
		}
	}
	d.pk.dirty = d.pk.dirty[:0]
}

// sendPackets sends p's queue while the socket takes it, in batches of
// sendmmsg; what it does not take waits for writability.
func (d *epollDriver) sendPackets(p *PacketConn) {
	e := &p.ep
	pk := &d.pk
	for e.head < e.n {
		k := min(e.n-e.head, packetBatch)
		for i := range k {
			q := &e.queue[e.head+i]
			pk.smsgs[i].Len = 0
			setMsghdr(&pk.smsgs[i].Hdr, &pk.siovs[i], q.buf, &q.sa, q.salen, q.seg, &q.ctrl)
		}
		d.calls++
		sent, errno := poller.Sendmmsg(p.fd, pk.smsgs[:k], unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		switch {
		case errno == unix.EAGAIN || errno == unix.ENOBUFS:
			d.packetPollOut(p, true)
			return
		case errno != 0:
			q := &e.queue[e.head]
			if gsoRefusal(q.seg, errno) {
				// The kernel refuses UDP_SEGMENT: the entry's
				// datagrams go out one by one from its buffer
				// (and GSO may go off for the socket).
				d.l.gsoRefused(p, errno)
				d.sendSplit(p, q)
			} else {
				// The first datagram was refused (an
				// unreachable destination, an ICMP error
				// reported on the socket): counted and
				// dropped; the rest go on.
				d.l.packetSent(0, q.count, errnoErr("sendmmsg", errno))
			}
			e.queued -= q.count
			e.head++
			continue
		}
		for i := range sent {
			q := &e.queue[e.head+i]
			d.l.packetSent(len(q.buf), q.count, nil)
			e.queued -= q.count
		}
		e.head += sent
	}
	e.head, e.n, e.queued = 0, 0, 0
	d.packetPollOut(p, false)
}

// sendSplit sends the datagrams of q, a send the kernel refused with
// UDP_SEGMENT, one by one, in sendmmsg batches. What the send buffer does
// not take now is dropped and counted in PacketErrors (this happens once
// per socket: GSO is off for it after).
func (d *epollDriver) sendSplit(p *PacketConn, q *epollDatagram) {
	pk := &d.pk
	for off := 0; off < len(q.buf); {
		k := 0
		for ; k < packetBatch && off < len(q.buf); k++ {
			var b []byte
			b, off = gsoSplit(q.buf, off, q.seg)
			pk.smsgs[k].Len = 0
			setMsghdr(&pk.smsgs[k].Hdr, &pk.siovs[k], b, &q.sa, q.salen, 0, nil)
		}
		d.calls++
		sent, errno := poller.Sendmmsg(p.fd, pk.smsgs[:k], unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		if errno != 0 {
			sent = 1
			d.l.packetSent(0, 1, errnoErr("sendmmsg", errno))
			if errno == unix.EAGAIN || errno == unix.ENOBUFS {
				// Drop the rest of the batch too.
				d.l.packetSent(0, k-1, errnoErr("sendmmsg", errno))
				sent = k
			}
		} else {
			for i := range sent {
				d.l.packetSent(int(pk.siovs[i].Len), 1, nil)
			}
		}
		// Go back to the first datagram not sent or dropped.
		for i := sent; i < k; i++ {
			off -= int(pk.siovs[i].Len)
		}
	}
}

// packetPollOut sets whether p waits for writability.
func (d *epollDriver) packetPollOut(p *PacketConn, on bool) {
	if p.ep.pollOut == on {
		return
	}
	p.ep.pollOut = on
	ev := uint32(poller.In)
	if on {
		ev |= poller.Out
	}
	d.calls++
	if err := d.p.Modify(p.fd, ev, epollPacketTag|uint64(p.idx)); err != nil {
		d.log.Error("percore: datagram socket interest", "loop", d.id, "listener", p.ln.String(), "err", err)
	}
}

// stopPackets takes the datagram sockets out of the epoll set and drops
// what they had queued; the loop closes them next.
func (d *epollDriver) stopPackets() {
	for _, p := range d.pk.socks {
		if p == nil || p.fd < 0 {
			continue
		}
		d.calls++
		_ = d.p.Delete(p.fd)
		p.ep.head, p.ep.n = 0, 0
	}
	for i, p := range d.pk.dirty {
		d.pk.dirty[i] = nil
		p.ep.dirty = false
	}
	d.pk.dirty = d.pk.dirty[:0]
}

// release unmaps the receive buffers.
func (pk *epollPackets) release() {
	if pk.mem != nil {
		_ = sys.Unmap(pk.mem)
		pk.mem = nil
	}
}
