//go:build linux

package listener

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Config holds the socket options shared by [Listen], [ListenPacket] and
// [Group]. Its zero value works: the kernel's backlog limit, no
// SO_INCOMING_CPU, dual-stack IPv6 wildcards.
type Config struct {
	// Backlog is the listen(2) backlog of stream listeners. Zero (or a
	// negative number) uses the kernel's limit, net.core.somaxconn, read from
	// /proc/sys/net/core/somaxconn at listen time, or 4096 (the kernel's
	// default since Linux 5.4) when that file cannot be read. The kernel
	// silently caps any larger value at somaxconn.
	Backlog int

	// IncomingCPU sets SO_INCOMING_CPU to CPU (for [Group], to cpus[i]) before
	// bind. It is a hint for SO_REUSEPORT groups: Linux 6.2 and later hand a
	// new connection or datagram to the group member whose SO_INCOMING_CPU is
	// the CPU that processed the packet, when there is one; older kernels may
	// ignore it. A kernel that refuses the option does not fail the listen:
	// the listener works without it, and [Listener.IncomingCPU] returns the
	// error. False (the zero value) leaves the option unset. Ignored for
	// "unix".
	IncomingCPU bool

	// CPU is the SO_INCOMING_CPU value [Listen] and [ListenPacket] set when
	// IncomingCPU is true. Group ignores it and uses cpus[i] for listener i.
	CPU int

	// V6Only is the IPV6_V6ONLY option, set on every IPv6 socket so that the
	// result does not depend on the net.ipv6.bindv6only sysctl. False (the
	// zero value) makes an IPv6 wildcard ("[::]:port", or ":port" with
	// "tcp"/"udp") dual-stack: it also takes IPv4 traffic, seen as
	// IPv4-mapped addresses. True limits it to IPv6.
	V6Only bool

	// UnixMode, when not zero, is the permission bits a Unix socket file
	// gets (chmod between bind and listen, so that no client connects
	// before it is set): 0o660 lets the owner and the group connect.
	// Zero leaves what the umask gave. Ignored for other networks and
	// for abstract names.
	UnixMode os.FileMode
}

// Listener owns one bound socket: a listening stream socket (TCP or Unix)
// from [Listen] or [Group], or a bound datagram socket (UDP) from
// [ListenPacket] or [Group].
//
// A Listener is meant to be owned by one goroutine, the loop that uses its
// descriptor, but all its methods are safe to call from any goroutine. Close
// may race with the owner's use of [Listener.Fd]; ordering the two (stop the
// loop, then close) is the caller's job.
type Listener struct {
	fd          atomic.Int64 // -1 once closed
	mu          sync.Mutex   // orders Close and Dup
	network     string
	stream      bool
	addr        net.Addr      // the bound address, with the resolved port
	sa          unix.Sockaddr // the same, for binding the rest of a group
	unlink      string        // the Unix socket file to remove on Close, if any
	keep        atomic.Bool   // KeepPath was called: do not remove it
	incomingErr error         // why SO_INCOMING_CPU could not be set
}

// Fd returns the socket descriptor, still owned by l: do not close it, and do
// not use it after [Listener.Close]. It returns -1 once l is closed.
func (l *Listener) Fd() int {
	return int(l.fd.Load())
}

// Addr returns the bound local address with the port the kernel chose: a
// *net.TCPAddr, *net.UDPAddr or *net.UnixAddr.
func (l *Listener) Addr() net.Addr {
	return l.addr
}

// IncomingCPU returns the socket's SO_INCOMING_CPU as read back with
// getsockopt: the CPU that [Config].IncomingCPU asked for, or -1 when the
// option was never set. When the option was asked for and the kernel refused
// it, IncomingCPU returns -1 and that error instead. For UDP sockets the
// kernel also records the CPU of the latest received datagram in this
// field, so the value can change once traffic arrives.
func (l *Listener) IncomingCPU() (int, error) {
	fd := l.Fd()
	if fd < 0 {
		return -1, l.opError("getsockopt", net.ErrClosed)
	}
	if l.incomingErr != nil {
		return -1, l.incomingErr
	}
	cpu, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_INCOMING_CPU)
	if err != nil {
		return -1, l.opError("getsockopt", os.NewSyscallError("getsockopt", err))
	}
	return cpu, nil
}

// Close closes the socket and, for a Unix listener bound to a path, removes
// the socket file it created. Only the first call does anything; later calls
// return nil.
func (l *Listener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	fd := l.fd.Swap(-1)
	if fd < 0 {
		return nil
	}
	if l.unlink != "" && !l.keep.Load() {
		// Unlink first, as net.UnixListener does, so that a new listener
		// never finds a file that this one is about to leave behind.
		_ = unix.Unlink(l.unlink)
	}
	if err := unix.Close(int(fd)); err != nil {
		return l.opError("close", os.NewSyscallError("close", err))
	}
	return nil
}

// Dup returns a new close-on-exec descriptor of the socket, which the
// caller owns (to hand the socket to another process). It is ordered with
// Close: once l is closed it returns net.ErrClosed, and it never
// duplicates a descriptor number that a concurrent Close released (and
// an open elsewhere may have been given).
func (l *Listener) Dup() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fd := l.Fd()
	if fd < 0 {
		return -1, l.opError("dup", net.ErrClosed)
	}
	dupHook()
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, l.opError("dup", os.NewSyscallError("fcntl", err))
	}
	return d, nil
}

// dupHook runs in Dup between reading the descriptor and duplicating it,
// for the test of Dup against a concurrent Close.
var dupHook = func() {}

// KeepPath makes Close leave the Unix socket file in place: the socket was
// handed to another process (a restart), which serves it from the same
// path after this one closes its descriptor. It does nothing for other
// listeners.
func (l *Listener) KeepPath() { l.keep.Store(true) }

// NetListener returns a standard net.Listener (*net.TCPListener or
// *net.UnixListener) over a duplicate of l's stream socket, for code that
// wants Go's own accept loop. l keeps its descriptor: closing either one
// leaves the other open, and the socket stops listening when both are
// closed. The two share one open file description; building the net.Listener
// clears O_NONBLOCK for an instant and sets it again (os.File.Fd does), so
// call NetListener before the owner starts accepting on [Listener.Fd].
func (l *Listener) NetListener() (net.Listener, error) {
	if !l.stream {
		return nil, l.opError("file", fmt.Errorf("a datagram socket has no net.Listener, use PacketConn: %w", errors.ErrUnsupported))
	}
	f, err := l.file()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return net.FileListener(f)
}

// PacketConn returns a standard net.PacketConn (*net.UDPConn) over a
// duplicate of l's datagram socket, on the terms of [Listener.NetListener].
func (l *Listener) PacketConn() (net.PacketConn, error) {
	if l.stream {
		return nil, l.opError("file", fmt.Errorf("a stream listener has no net.PacketConn, use NetListener: %w", errors.ErrUnsupported))
	}
	f, err := l.file()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return net.FilePacketConn(f)
}

// file returns an *os.File over a close-on-exec duplicate of the socket.
func (l *Listener) file() (*os.File, error) {
	fd := l.Fd()
	if fd < 0 {
		return nil, l.opError("file", net.ErrClosed)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, l.opError("file", os.NewSyscallError("fcntl", err))
	}
	return os.NewFile(uintptr(dup), l.network+":"+l.addr.String()), nil
}

func (l *Listener) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: l.network, Addr: l.addr, Err: err}
}
