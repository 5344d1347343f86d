//go:build linux

package runtime

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dialState is what a connect in progress needs; the socket address stays
// referenced here until the kernel completes the connect.
type dialState struct {
	done  func(*Conn, error)
	sa    unix.RawSockaddrAny
	salen uint32
}

// Dial starts a non-blocking connect from this loop to address: a literal
// "ip:port" or "tcp://ip:port" (the loop never resolves names: that would
// block it), or a Unix stream socket, "unix:///path" or "unix://@name".
// The connection is handled by h like an accepted one. done runs on the
// loop exactly once: with the open connection (after h's OnOpen), or with
// a nil Conn and the error (a refused connect is *net.OpError wrapping
// ECONNREFUSED). Dial returns an error at once, and done does not run, for
// an address it cannot use, a nil h or done, a stopping loop, or a socket
// it cannot create. It must be called on the loop's thread.
func (l *Loop) Dial(address string, h Handler, done func(*Conn, error)) error {
	if network, rest, ok := strings.Cut(address, "://"); ok {
		switch network {
		case "unix":
			return l.dialUnix(rest, h, done)
		case "tcp", "tcp4", "tcp6":
			address = rest
		default:
			return &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
		}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("address %q: %w", address, err)}
	}
	return l.DialAddrPort(ap, h, done)
}

// DialAddrPort is Dial for an already parsed address.
func (l *Loop) DialAddrPort(ap netip.AddrPort, h Handler, done func(*Conn, error)) error {
	if h == nil || done == nil {
		return &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("nil handler or done function")}
	}
	if l.stopping {
		return &net.OpError{Op: "dial", Net: "tcp", Err: net.ErrClosed}
	}
	d := &dialState{done: done}
	family := unix.AF_INET
	addr := ap.Addr().Unmap()
	if addr.Is4() {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&d.sa))
		sa.Family = unix.AF_INET
		sa.Addr = addr.As4()
		putPort(&sa.Port, ap.Port())
		d.salen = unix.SizeofSockaddrInet4
	} else {
		family = unix.AF_INET6
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&d.sa))
		sa.Family = unix.AF_INET6
		sa.Addr = ap.Addr().As16()
		putPort(&sa.Port, ap.Port())
		d.salen = unix.SizeofSockaddrInet6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: os.NewSyscallError("socket", err)}
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	l.startDial(fd, h, d, net.TCPAddrFromAddrPort(ap))
	return nil
}

// dialUnix starts a connect to the Unix stream socket at path ("@name" for
// an abstract name).
func (l *Loop) dialUnix(path string, h Handler, done func(*Conn, error)) error {
	addr := &net.UnixAddr{Name: path, Net: "unix"}
	if h == nil || done == nil {
		return &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: fmt.Errorf("nil handler or done function")}
	}
	if l.stopping {
		return &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: net.ErrClosed}
	}
	d := &dialState{done: done}
	sa := (*unix.RawSockaddrUnix)(unsafe.Pointer(&d.sa))
	onDisk := path != "" && path[0] != '@'
	if path == "" || len(path)+boolToInt(onDisk) > len(sa.Path) {
		return &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: fmt.Errorf("a unix socket address holds %d bytes: %w", len(sa.Path), unix.EINVAL)}
	}
	sa.Family = unix.AF_UNIX
	for i := range len(path) {
		sa.Path[i] = int8(path[i])
	}
	d.salen = uint32(unsafe.Offsetof(sa.Path)) + uint32(len(path))
	if onDisk {
		d.salen++ // the terminating NUL
	} else {
		sa.Path[0] = 0 // the abstract namespace
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: os.NewSyscallError("socket", err)}
	}
	l.startDial(fd, h, d, addr)
	return nil
}

// startDial opens a connection slot for the socket fd and starts its
// connect to the address in d.
func (l *Loop) startDial(fd int, h Handler, d *dialState, raddr net.Addr) {
	c := l.newConn(fd, h)
	c.dial = d
	c.state |= stConnecting
	c.raddr = raddr
	if err := l.d.connect(c, d); err != nil {
		l.closeConn(c, c.opError("dial", err))
	}
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// connected is called by drivers when a connect finished; err is nil on
// success.
func (l *Loop) connected(c *Conn, err error) {
	d := c.dial
	c.state &^= stConnecting
	if c.closed() {
		return
	}
	if err != nil {
		l.closeConn(c, c.opError("dial", err))
		return
	}
	if err := l.d.start(c); err != nil {
		l.closeConn(c, c.opError("dial", err))
		return
	}
	c.dial = nil
	l.cnt[sDials]++
	l.opened(c)
	if d != nil && d.done != nil {
		l.safely("dial done function", func() { d.done(c, nil) })
	}
	l.sweepLate(c)
}

func putPort(p *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0] = byte(port >> 8)
	b[1] = byte(port)
}
