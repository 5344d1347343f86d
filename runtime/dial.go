//go:build linux

package runtime

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"unsafe"

	"github.com/percore/percore/internal/sys"
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
	family := sys.InetFamily(ap)
	salen, err := sys.PutInet((*unix.RawSockaddrInet6)(unsafe.Pointer(&d.sa)), family, ap)
	if err != nil {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: err}
	}
	d.salen = salen
	fd, err := sys.StreamSocket(family)
	if err != nil {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: os.NewSyscallError("socket", err)}
	}
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
	salen, err := sys.PutUnix(&d.sa, path)
	if err != nil {
		return &net.OpError{Op: "dial", Net: "unix", Addr: addr, Err: err}
	}
	d.salen = salen
	fd, err := sys.StreamSocket(unix.AF_UNIX)
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
	c.setDial(d)
	c.state |= stConnecting
	l.tlsDialing(c)
	c.more().raddr = raddr
	if err := l.d.connect(c, d); err != nil {
		l.closeConn(c, c.opError("dial", err))
	}
}

// connected is called by drivers when a connect finished; err is nil on
// success.
func (l *Loop) connected(c *Conn, err error) {
	d := c.dialing()
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
	if c.tlsState() != nil {
		l.tlsConnected(c) // OnOpen and done once the handshake succeeded
		return
	}
	c.setDial(nil)
	l.cnt[sDials]++
	l.opened(c)
	if d != nil && d.done != nil {
		l.safely("dial done function", func() { d.done(c, nil) })
	}
	l.sweepLate(c)
}
