//go:build linux

package sys

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The one socket address converter: unix.Sockaddr (what getsockname and
// getpeername return) to net.Addr, and netip.AddrPort or a Unix path to
// the raw socket address that connect(2), sendmsg(2) and their io_uring
// operations read, and back from the raw address the kernel wrote.

// Addr converts a socket address to the net.Addr of its kind: *net.TCPAddr
// (or *net.UDPAddr when datagram), *net.UnixAddr, or nil for another
// family. An IPv6 zone is the interface's name, or its index when no
// interface has it any more.
func Addr(sa unix.Sockaddr, datagram bool) net.Addr {
	var ip net.IP
	var port int
	var zone string
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		ip, port = net.IP(append([]byte(nil), sa.Addr[:]...)), sa.Port
	case *unix.SockaddrInet6:
		ip, port, zone = net.IP(append([]byte(nil), sa.Addr[:]...)), sa.Port, ZoneName(sa.ZoneId)
	case *unix.SockaddrUnix:
		return &net.UnixAddr{Name: sa.Name, Net: "unix"}
	default:
		return nil
	}
	if datagram {
		return &net.UDPAddr{IP: ip, Port: port, Zone: zone}
	}
	return &net.TCPAddr{IP: ip, Port: port, Zone: zone}
}

// Family returns the address family of sa.
func Family(sa unix.Sockaddr) int {
	switch sa.(type) {
	case *unix.SockaddrInet4:
		return unix.AF_INET
	case *unix.SockaddrInet6:
		return unix.AF_INET6
	}
	return unix.AF_UNIX
}

// LocalAddr returns the address fd is bound to (getsockname(2)).
func LocalAddr(fd int, datagram bool) (net.Addr, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, err
	}
	return Addr(sa, datagram), nil
}

// PeerAddr returns the address of the stream socket's peer
// (getpeername(2)).
func PeerAddr(fd int) (net.Addr, error) {
	sa, err := unix.Getpeername(fd)
	if err != nil {
		return nil, err
	}
	return Addr(sa, false), nil
}

// Sockname returns the address fd is bound to, as the kernel reports it.
func Sockname(fd int) (unix.Sockaddr, error) { return unix.Getsockname(fd) }

// ZoneName returns the name of the interface of index id ("" for 0), or
// the number when there is none.
func ZoneName(id uint32) string {
	if id == 0 {
		return ""
	}
	if ifi, err := net.InterfaceByIndex(int(id)); err == nil {
		return ifi.Name
	}
	return strconv.FormatUint(uint64(id), 10)
}

// PutInet writes to as a raw socket address of family (unix.AF_INET or
// AF_INET6) into sa and returns its length. An IPv4 address for an IPv6
// socket becomes IPv4-mapped; an IPv6 one for an IPv4 socket is
// EAFNOSUPPORT.
func PutInet(sa *unix.RawSockaddrInet6, family int, to netip.AddrPort) (uint32, error) {
	addr := to.Addr()
	if !addr.IsValid() {
		return 0, errors.New("invalid address")
	}
	*sa = unix.RawSockaddrInet6{}
	if family == unix.AF_INET {
		addr = addr.Unmap()
		if !addr.Is4() {
			return 0, fmt.Errorf("an IPv6 destination on an IPv4 socket: %w", unix.EAFNOSUPPORT)
		}
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		s4.Family = unix.AF_INET
		s4.Addr = addr.As4()
		putPort(&s4.Port, to.Port())
		return unix.SizeofSockaddrInet4, nil
	}
	sa.Family = unix.AF_INET6
	sa.Addr = addr.As16()
	putPort(&sa.Port, to.Port())
	return unix.SizeofSockaddrInet6, nil
}

// InetFamily is the family of the socket that reaches ap: unix.AF_INET for
// an IPv4 (or IPv4-mapped) address, else AF_INET6.
func InetFamily(ap netip.AddrPort) int {
	if ap.Addr().Unmap().Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// PutUnix writes the address of the Unix socket at path ("@name" for an
// abstract name) into sa and returns its length, or EINVAL when it does
// not fit.
func PutUnix(sa *unix.RawSockaddrAny, path string) (uint32, error) {
	su := (*unix.RawSockaddrUnix)(unsafe.Pointer(sa))
	onDisk := path != "" && path[0] != '@'
	n := len(path)
	if onDisk {
		n++ // the terminating NUL
	}
	if path == "" || n > len(su.Path) {
		return 0, fmt.Errorf("a unix socket address holds %d bytes: %w", len(su.Path), unix.EINVAL)
	}
	*su = unix.RawSockaddrUnix{Family: unix.AF_UNIX}
	for i := range len(path) {
		su.Path[i] = int8(path[i])
	}
	if !onDisk {
		su.Path[0] = 0 // the abstract namespace
	}
	return uint32(unsafe.Offsetof(su.Path)) + uint32(n), nil
}

// AddrPortFrom reads a source address the kernel wrote (a sockaddr_in or
// sockaddr_in6 at the start of name). An IPv4-mapped source is returned as
// IPv4; the zone of a link-local source is not kept.
func AddrPortFrom(name []byte) netip.AddrPort {
	if len(name) < 4 {
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(name[2:4])
	switch binary.NativeEndian.Uint16(name[0:2]) {
	case unix.AF_INET:
		if len(name) >= unix.SizeofSockaddrInet4 {
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte(name[4:8])), port)
		}
	case unix.AF_INET6:
		if len(name) >= unix.SizeofSockaddrInet6 {
			return netip.AddrPortFrom(netip.AddrFrom16([16]byte(name[8:24])).Unmap(), port)
		}
	}
	return netip.AddrPort{}
}

// putPort stores port in network byte order.
func putPort(p *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0] = byte(port >> 8)
	b[1] = byte(port)
}
