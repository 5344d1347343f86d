//go:build linux

package runtime

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// PacketHandler receives datagrams. Its methods run on the loop that owns
// the socket, one at a time, and must not block (as Handler's).
type PacketHandler interface {
	// OnPacket is called with one datagram and its source. data is valid
	// only during the call (it is the loop's receive buffer); WriteTo
	// copies what it sends, so a handler may reply with data itself.
	OnPacket(p *PacketConn, data []byte, from netip.AddrPort)
}

// TruncatedHandler is implemented by packet handlers that want the
// datagrams too large for Config.PacketBufferSize: OnTruncated gets the
// part that fitted and the datagram's full size. Without it a truncated
// datagram is dropped. Either way it is counted (Stats.PacketsTruncated):
// a datagram is never cut silently.
type TruncatedHandler interface {
	OnTruncated(p *PacketConn, data []byte, size int, from netip.AddrPort)
}

// PacketHandlerFunc adapts a function to PacketHandler.
type PacketHandlerFunc func(p *PacketConn, data []byte, from netip.AddrPort)

// OnPacket calls f(p, data, from).
func (f PacketHandlerFunc) OnPacket(p *PacketConn, data []byte, from netip.AddrPort) {
	f(p, data, from)
}

// PacketConn is one loop's datagram socket of a UDP listener: with
// SO_REUSEPORT each loop has its own, and the kernel spreads the sources
// over them. Its methods must be called on its loop's thread.
type PacketConn struct {
	loop   *Loop
	fd     int
	ln     *Listener
	idx    int // its index in the loop's listeners (user data, epoll tag)
	h      PacketHandler
	family int // AF_INET or AF_INET6

	// The drop counter the kernel last reported (SO_RXQ_OVFL).
	ovfl uint32

	ur uringPacket
	ep epollPacket

	gso gsoBatch // the pending batch (Config.UDPGSO)
}

// gsoBatch is a socket's datagrams of this turn to one destination, of
// one size (the last may be shorter), waiting to go out as one send with
// UDP_SEGMENT at the end of the turn. buf is the loop's, reused.
type gsoBatch struct {
	sa    unix.RawSockaddrInet6
	salen uint32
	seg   int // the common size; 0: nothing pending
	n     int // datagrams in buf
	buf   []byte
	short bool // the last is shorter: the batch takes no more
	dirty bool // on the loop's list
	off   bool // the kernel refused GSO on this socket
}

// GSO limits: below the kernel's UDP_MAX_SEGMENTS and its 64 KiB.
const (
	gsoMaxSegments = 64
	gsoMaxBytes    = 65000
)

// Loop returns the loop that owns the socket.
func (p *PacketConn) Loop() *Loop { return p.loop }

// Listener returns the listener the socket belongs to.
func (p *PacketConn) Listener() *Listener { return p.ln }

// LocalAddr returns the bound address (a *net.UDPAddr).
func (p *PacketConn) LocalAddr() net.Addr { return p.ln.Addr }

// ErrPacketQueueFull is what PacketConn.WriteTo returns when the datagram
// was dropped because Config.MaxPacketQueue datagrams already wait for
// room in the socket's send buffer (Stats.PacketDrops counts them).
var ErrPacketQueueFull = errors.New("percore: datagram send queue full: datagram dropped")

// errPacketQueueFull is the driver's report of it.
var errPacketQueueFull = ErrPacketQueueFull

// maxDatagram is the largest UDP payload (over IPv6; 65507 over IPv4,
// which the kernel checks).
const maxDatagram = 65527

// WriteTo sends the datagram b to the address to, inline on the loop: on
// io_uring a sendmsg prepared now and submitted with the turn's enter, on
// epoll one sendmmsg for the turn's datagrams at its end. b may be reused
// once WriteTo returns. When the socket's send buffer is full the datagram
// waits (on io_uring in the kernel, on epoll in the loop) behind at most
// Config.MaxPacketQueue others; beyond that it is dropped, counted, and
// WriteTo returns ErrPacketQueueFull. A failure the kernel reports later
// (an ICMP error, a send refused) is counted in Stats.PacketErrors and
// does not stop the socket. IPv4 addresses work on a dual-stack socket.
// With Config.UDPGSO the datagram may wait in the socket's batch until the
// end of the turn and go out with others to the same destination in one
// send with UDP_SEGMENT.
func (p *PacketConn) WriteTo(b []byte, to netip.AddrPort) error {
	l := p.loop
	if p.fd < 0 || l.lnClosed {
		return p.opError(to, net.ErrClosed)
	}
	if len(b) > maxDatagram {
		return p.opError(to, os.NewSyscallError("sendmsg", unix.EMSGSIZE))
	}
	sa := &l.pk.sa
	salen, err := sys.PutInet(sa, p.family, to)
	if err != nil {
		return p.opError(to, err)
	}
	if l.cfg.UDPGSO && !p.gso.off && len(b) > 0 {
		return p.batch(b, sa, salen, to)
	}
	if err := l.d.writeTo(p, b, sa, salen, 0, 1); err != nil {
		if err == errPacketQueueFull {
			l.cnt[sPacketDrops]++
			return err
		}
		return p.opError(to, err)
	}
	return nil
}

// batch adds b to p's pending GSO batch, flushing the batch first when b
// cannot join it.
func (p *PacketConn) batch(b []byte, sa *unix.RawSockaddrInet6, salen uint32, to netip.AddrPort) error {
	l := p.loop
	if l.d.packetRoom(p) <= 0 {
		l.cnt[sPacketDrops]++
		return ErrPacketQueueFull
	}
	g := &p.gso
	if g.seg > 0 && (g.short || len(b) > g.seg || g.n >= gsoMaxSegments || len(g.buf)+len(b) > gsoMaxBytes ||
		g.salen != salen || g.sa != *sa) {
		l.flushGSOBatch(p)
	}
	if g.seg == 0 {
		g.sa, g.salen, g.seg, g.n, g.short = *sa, salen, len(b), 0, false
		g.buf = g.buf[:0]
	}
	g.buf = append(g.buf, b...)
	g.n++
	g.short = len(b) < g.seg
	l.pk.gsoPending++
	if !g.dirty {
		g.dirty = true
		l.pk.gso = append(l.pk.gso, p)
	}
	return nil
}

// flushGSOBatch hands p's pending batch to the driver: one datagram as an
// ordinary one, several as one send with UDP_SEGMENT.
func (l *Loop) flushGSOBatch(p *PacketConn) {
	g := &p.gso
	if g.seg == 0 {
		return
	}
	n := g.n
	l.pk.gsoPending -= n
	seg := g.seg
	g.seg, g.n, g.short = 0, 0, false
	if p.fd < 0 || l.lnClosed {
		return
	}
	if n == 1 {
		seg = 0
	}
	if err := l.d.writeTo(p, g.buf, &g.sa, g.salen, seg, n); err != nil {
		if err == errPacketQueueFull {
			l.cnt[sPacketDrops] += uint64(n)
		} else {
			l.cnt[sPacketErrors] += uint64(n)
		}
	}
}

// flushGSO hands the turn's pending GSO batches to the driver, before
// the loop polls.
func (l *Loop) flushGSO() {
	for i, p := range l.pk.gso {
		l.pk.gso[i] = nil
		p.gso.dirty = false
		l.flushGSOBatch(p)
	}
	l.pk.gso = l.pk.gso[:0]
}

// gsoRefused is the driver's report that the kernel refused a send with
// UDP_SEGMENT on p with errno (the driver sends its datagrams again one by
// one): counted in PacketErrors. GSO goes off for p only when errno says
// the socket cannot segment for any destination (gsoUnsupported); an error
// of one destination's (a path MTU below the segment size) would otherwise
// turn it off for all the others, for good.
func (l *Loop) gsoRefused(p *PacketConn, errno unix.Errno) {
	l.cnt[sPacketErrors]++
	if gsoUnsupported(errno) {
		p.gso.off = true
	}
}

// isGSOError reports whether errno may be the kernel refusing UDP_SEGMENT
// for one send: its datagrams are then sent again one by one.
func isGSOError(errno unix.Errno) bool {
	return errno == unix.EIO || errno == unix.EINVAL || errno == unix.EMSGSIZE || errno == unix.ENOPROTOOPT
}

// gsoUnsupported reports whether errno, refusing a send with UDP_SEGMENT,
// says that the socket cannot segment at all: EIO (the device has no
// checksum offload, which segmentation needs: udp(7)), ENOPROTOOPT (a
// kernel without UDP_SEGMENT). EINVAL (a segment that does not fit the
// path's MTU, a link-local destination without its zone) and EMSGSIZE are
// the destination's, and cost that destination one refused send per batch.
func gsoUnsupported(errno unix.Errno) bool {
	return errno == unix.EIO || errno == unix.ENOPROTOOPT
}

// gsoControlLen is CMSG_SPACE(2): a UDP_SEGMENT control message.
const gsoControlLen = unix.SizeofCmsghdr + 8

// setMsghdr points msg at one send of b to the address sa (salen bytes of
// it), through iov; with seg > 0 it carries a UDP_SEGMENT control message
// for segments of seg bytes, written into ctrl. Both backends build their
// sendmsg and sendmmsg headers with it; iov, sa and ctrl must stay put
// until the kernel has read them.
func setMsghdr(msg *unix.Msghdr, iov *unix.Iovec, b []byte, sa *unix.RawSockaddrInet6, salen uint32, seg int, ctrl *[gsoControlLen / 8]uint64) {
	iov.Base = unsafe.SliceData(b)
	iov.SetLen(len(b))
	*msg = unix.Msghdr{Name: (*byte)(unsafe.Pointer(sa)), Namelen: salen, Iov: iov, Iovlen: 1}
	if seg > 0 {
		c := putGSOControl(ctrl, seg)
		msg.Control = &c[0]
		msg.SetControllen(len(c))
	}
}

// gsoRefusal reports whether a send of segments of seg bytes failed with
// errno because the kernel refused UDP_SEGMENT (isGSOError): its
// datagrams are then sent again one by one (gsoSplit), and the loop
// counts it (gsoRefused), on both backends.
func gsoRefusal(seg int, errno unix.Errno) bool { return seg > 0 && isGSOError(errno) }

// gsoSplit returns the datagram of a refused GSO send's buffer b that
// starts at off (segments of seg bytes, the last maybe shorter) and the
// offset of the next; next == len(b) after the last.
func gsoSplit(b []byte, off, seg int) (datagram []byte, next int) {
	end := min(off+seg, len(b))
	return b[off:end], end
}

// putGSOControl writes a UDP_SEGMENT control message for seg into c.
func putGSOControl(c *[gsoControlLen / 8]uint64, seg int) []byte {
	b := unsafe.Slice((*byte)(unsafe.Pointer(c)), gsoControlLen)
	clear(b)
	binary.NativeEndian.PutUint64(b[0:8], uint64(unix.SizeofCmsghdr+2))
	binary.NativeEndian.PutUint32(b[8:12], unix.SOL_UDP)
	binary.NativeEndian.PutUint32(b[12:16], unix.UDP_SEGMENT)
	binary.NativeEndian.PutUint16(b[16:18], uint16(seg))
	return b
}

func (p *PacketConn) opError(to netip.AddrPort, err error) error {
	return &net.OpError{Op: "write", Net: p.ln.Network, Source: p.ln.Addr, Addr: net.UDPAddrFromAddrPort(to), Err: err}
}

// packetState is a loop's scratch for datagrams.
type packetState struct {
	sa unix.RawSockaddrInet6 // WriteTo's destination, before the driver copies it
	// The sockets with a pending GSO batch this turn, and how many
	// datagrams those batches hold.
	gso        []*PacketConn
	gsoPending int
}

// packetControlLen is the room for the control messages a datagram
// carries: SO_RXQ_OVFL's 32-bit drop counter and, with Config.UDPGRO,
// UDP_GRO's segment size (CMSG_SPACE(4) each).
const packetControlLen = 2 * (unix.SizeofCmsghdr + 8)

// packetControl is what a datagram's control messages say.
type packetControl struct {
	ovfl   uint32 // the socket's drop counter (SO_RXQ_OVFL)
	hasOvf bool
	seg    int // the size of each coalesced datagram (UDP_GRO); 0: one datagram
}

// parsePacketControl reads the control messages the kernel wrote. It reads
// them as bytes: on io_uring they follow the source address in the
// buffer, not aligned.
func parsePacketControl(control []byte) packetControl {
	var c packetControl
	for len(control) >= unix.SizeofCmsghdr {
		n := binary.NativeEndian.Uint64(control[0:8])
		level := int32(binary.NativeEndian.Uint32(control[8:12]))
		typ := int32(binary.NativeEndian.Uint32(control[12:16]))
		if n < unix.SizeofCmsghdr || n > uint64(len(control)) {
			break
		}
		data := control[unix.SizeofCmsghdr:n]
		switch {
		case level == unix.SOL_SOCKET && typ == unix.SO_RXQ_OVFL && len(data) >= 4:
			c.ovfl, c.hasOvf = binary.NativeEndian.Uint32(data), true
		case level == unix.SOL_UDP && typ == unix.UDP_GRO && len(data) >= 4:
			c.seg = int(int32(binary.NativeEndian.Uint32(data)))
		}
		next := (n + 7) &^ 7
		if next >= uint64(len(control)) {
			break
		}
		control = control[next:]
	}
	return c
}

// packetIn is the driver's report of one receive on p: data is the part
// that fitted in the buffer, size the receive's full length, truncated
// whether the kernel cut it (MSG_TRUNC), control its control messages.
// With UDP_GRO one receive may carry several datagrams of one sender,
// each of the size the control message gives (the last may be shorter):
// the handler is called once for each.
func (l *Loop) packetIn(p *PacketConn, data []byte, size int, truncated bool, from netip.AddrPort, control []byte) {
	c := parsePacketControl(control)
	if c.hasOvf && c.ovfl != p.ovfl {
		l.cnt[sPacketsLost] += uint64(c.ovfl - p.ovfl)
		p.ovfl = c.ovfl
	}
	if l.lnClosed {
		return
	}
	if c.seg <= 0 || size <= c.seg {
		l.datagramIn(p, data, size, truncated, from)
		return
	}
	l.cnt[sPacketsCoalesced]++
	for off := 0; off < size && !l.lnClosed && p.fd >= 0; off += c.seg {
		full := min(c.seg, size-off)
		if off >= len(data) {
			// Cut by the kernel before this datagram began (Config
			// requires buffers that take what it coalesces, so only
			// a socket configured elsewhere gets here).
			l.datagramIn(p, nil, full, true, from)
			continue
		}
		seg := data[off:min(off+full, len(data))]
		l.datagramIn(p, seg, full, len(seg) < full, from)
	}
}

// datagramIn counts one datagram and hands it to the handler.
func (l *Loop) datagramIn(p *PacketConn, data []byte, size int, truncated bool, from netip.AddrPort) {
	l.cnt[sPacketsIn]++
	l.cnt[sBytesIn] += uint64(len(data))
	if truncated {
		l.cnt[sPacketsTruncated]++
		if th, ok := p.h.(TruncatedHandler); ok {
			l.callOnPacket(p, th, data, size, from)
		}
		return
	}
	l.callOnPacket(p, nil, data, size, from)
}

// callOnPacket runs the packet handler (OnTruncated when th is set),
// containing a panic: it is logged and counted, and the socket goes on.
func (l *Loop) callOnPacket(p *PacketConn, th TruncatedHandler, data []byte, size int, from netip.AddrPort) {
	l.depth++
	defer l.endPacketCall()
	if th != nil {
		th.OnTruncated(p, data, size, from)
		return
	}
	p.h.OnPacket(p, data, from)
}

func (l *Loop) endPacketCall() {
	if r := recover(); r != nil {
		l.cnt[sPanics]++
		l.log.Error("percore: packet handler panicked", "loop", l.id, "panic", r, "stack", string(debug.Stack()))
	}
	l.depth--
	if l.depth == 0 && len(l.notes) > 0 {
		l.runNotes()
	}
}

// packetSent is the driver's report of a datagram sent (err nil) or
// refused by the kernel: an ICMP error reported on the socket, a full
// buffer of a send that could not wait, an unreachable destination. A
// failure is counted; the socket goes on.
func (l *Loop) packetSent(n, count int, err error) {
	if err != nil {
		l.cnt[sPacketErrors] += uint64(count)
		return
	}
	if count > 1 {
		l.cnt[sPacketsSegmented]++
	}
	l.cnt[sPacketsOut] += uint64(count)
	l.cnt[sBytesOut] += uint64(n)
}

// packetRecvFailed is the driver's report of a receive error on a datagram
// socket (ECONNREFUSED for an earlier send, among others): counted, and
// the socket goes on receiving.
func (l *Loop) packetRecvFailed() { l.cnt[sPacketErrors]++ }

// setPacketOptions sets a loop's UDP socket's options, for either
// backend: SO_RXQ_OVFL, so that every datagram reports the socket's drop
// count (Stats.PacketsLost), and UDP_GRO when gro is set
// (Config.UDPGRO).
func setPacketOptions(fd int, gro bool) error {
	if err := sys.SetInt(fd, unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1); err != nil {
		return os.NewSyscallError("setsockopt SO_RXQ_OVFL", err)
	}
	if gro {
		if err := sys.SetInt(fd, unix.SOL_UDP, unix.UDP_GRO, 1); err != nil {
			return os.NewSyscallError("setsockopt UDP_GRO", err)
		}
	}
	return nil
}
