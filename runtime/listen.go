//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/listener"
	"golang.org/x/sys/unix"
)

// Listener describes one of a runtime's listeners: an address of
// Config.Addr or Config.Listen, or a socket of Config.Inherited. A handler
// learns which one a connection came from with Conn.Listener, and a packet
// handler with PacketConn.Listener. Its fields are set when New starts the
// runtime and never change; it is safe to read from any goroutine.
type Listener struct {
	// Index is the listener's place in Runtime.Listeners: Config.Addr
	// first (when set), then Config.Listen in order, then Config.Inherited.
	Index int
	// Network is "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6" or "unix".
	Network string
	// Addr is the bound address, with the port resolved: a
	// *net.TCPAddr, *net.UDPAddr or *net.UnixAddr.
	Addr net.Addr
	// Inherited says the socket came from Config.Inherited (systemd socket
	// activation, or a parent process).
	Inherited bool
	// Shared says every loop serves one socket (a Unix socket, which
	// SO_REUSEPORT cannot split, or an inherited one); otherwise each loop
	// has its own SO_REUSEPORT socket bound to Addr.
	Shared bool
	// TLS says the listener's connections are TLS (a tls:// address, or
	// an inherited socket whose file name says TLS, as ListenerFiles and
	// HandoverEnv name a TLS listener's: see Config.Inherited), served with
	// Config.TLS.
	TLS bool
}

// Datagram reports whether the listener receives datagrams (UDP).
func (ln *Listener) Datagram() bool { return strings.HasPrefix(ln.Network, "udp") }

// String returns the listener as a Config.Listen address: "tcp://127.0.0.1:7000".
func (ln *Listener) String() string {
	network := ln.Network
	if ln.TLS {
		network = "tls" + strings.TrimPrefix(network, "tcp")
	}
	if ln.Addr == nil {
		return network + "://"
	}
	return network + "://" + ln.Addr.String()
}

// listenSpec is one listener before the loops start: parsed from an
// address, or an inherited socket.
type listenSpec struct {
	info    *Listener
	address string // for TCP and UDP: what each loop binds (the port resolved after loop 0)
	// shared is the runtime's own descriptor of a shared socket (a Unix
	// listener's, or the duplicate of an inherited file); each loop serves
	// a duplicate of it. -1 for per-loop sockets.
	shared int
	unix   *listener.Listener // the Unix listener that owns shared (removes its file)
}

// ParseListenAddr splits a Config.Listen address into its network and
// address: "tcp://127.0.0.1:7000" is ("tcp", "127.0.0.1:7000"),
// "udp6://[::1]:53" is ("udp6", "[::1]:53"), "unix:///run/app.sock" is
// ("unix", "/run/app.sock") and "unix://@name" is the abstract name
// "@name". An address without a scheme is TCP. The networks are those of
// package net: tcp, tcp4, tcp6, udp, udp4, udp6, unix.
func ParseListenAddr(s string) (network, address string, err error) {
	network, address, ok := strings.Cut(s, "://")
	if !ok {
		network, address = "tcp", s
	}
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
		if address == "" {
			return "", "", fmt.Errorf("listen address %q: no host:port", s)
		}
	case "unix":
		if address == "" {
			return "", "", fmt.Errorf("listen address %q: no path or @name", s)
		}
	default:
		return "", "", fmt.Errorf("listen address %q: unknown network %q (want tcp, tcp4, tcp6, udp, udp4, udp6 or unix)", s, network)
	}
	return network, address, nil
}

// listenSpecs turns Config.Addr, Config.Listen and Config.Inherited into
// listeners. A Unix listener is bound here, once, and inherited files are
// checked and duplicated: every loop serves a duplicate of those. On
// failure it undoes what it did.
func listenSpecs(cfg Config) (specs []*listenSpec, err error) {
	defer func() {
		if err != nil {
			closeSpecs(specs)
			specs = nil
		}
	}()
	addrs := cfg.Listen
	if cfg.Addr != "" {
		addrs = append([]string{cfg.Addr}, addrs...)
	}
	for _, a := range addrs {
		a, isTLS := splitTLSScheme(a)
		network, address, err := ParseListenAddr(a)
		if err != nil {
			return specs, fmt.Errorf("percore: %w", err)
		}
		s := &listenSpec{info: &Listener{Index: len(specs), Network: network, TLS: isTLS}, address: address, shared: -1}
		if network == "unix" {
			ln, err := listener.Listen("unix", address, listener.Config{Backlog: cfg.Backlog, UnixMode: cfg.UnixMode})
			if err != nil {
				return specs, fmt.Errorf("percore: %w", err)
			}
			s.unix, s.shared = ln, ln.Fd()
			s.info.Addr, s.info.Shared = ln.Addr(), true
		}
		specs = append(specs, s)
	}
	for i, f := range cfg.Inherited {
		s, err := inheritedSpec(f, len(specs))
		if err == nil {
			specs = append(specs, s) // closed by the deferred closeSpecs on failure
			err = markInheritedTLS(s, f.Name())
		}
		if err != nil {
			return specs, fmt.Errorf("percore: Config.Inherited[%d] (%s): %w", i, f.Name(), err)
		}
	}
	return specs, nil
}

// inheritedSpec checks that f is a socket percore can serve (a listening
// TCP or Unix stream socket, or a bound UDP socket) and takes a duplicate
// of it, non-blocking.
func inheritedSpec(f *os.File, index int) (*listenSpec, error) {
	if f == nil {
		return nil, errors.New("nil file")
	}
	// Not f.Fd(): it would make the socket blocking, for every process
	// that shares it.
	sc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var spec *listenSpec
	var serr error
	if err := sc.Control(func(fd uintptr) { spec, serr = inheritedFd(int(fd), index) }); err != nil {
		return nil, err
	}
	return spec, serr
}

// inheritedFd is inheritedSpec on the descriptor, which stays the file's.
func inheritedFd(fd, index int) (*listenSpec, error) {
	si, err := sys.InspectSocket(fd)
	if err != nil {
		return nil, fmt.Errorf("not a socket: %w", err)
	}
	domain, sotype := si.Domain, si.Type
	info := &Listener{Index: index, Inherited: true, Shared: true}
	switch {
	case sotype == unix.SOCK_STREAM && (domain == unix.AF_INET || domain == unix.AF_INET6):
		info.Network = "tcp"
	case sotype == unix.SOCK_DGRAM && (domain == unix.AF_INET || domain == unix.AF_INET6):
		info.Network = "udp"
	case sotype == unix.SOCK_STREAM && domain == unix.AF_UNIX:
		info.Network = "unix"
	default:
		return nil, fmt.Errorf("socket of domain %d and type %d: want a TCP or Unix stream socket or a UDP socket: %w",
			domain, sotype, errors.ErrUnsupported)
	}
	if sotype == unix.SOCK_STREAM {
		if !si.Listening {
			return nil, errors.New("stream socket is not listening (listen(2) was not called)")
		}
	}
	info.Addr, err = sys.LocalAddr(fd, info.Network == "udp")
	if err != nil {
		return nil, os.NewSyscallError("getsockname", err)
	}
	dup, err := sys.DupNonblock(fd)
	if err != nil {
		return nil, err
	}
	return &listenSpec{info: info, shared: dup}, nil
}

// closeSpecs closes what listenSpecs opened: Unix listeners (removing
// their files) and the duplicates of inherited sockets.
func closeSpecs(specs []*listenSpec) error {
	var err error
	for _, s := range specs {
		switch {
		case s.unix != nil:
			err = errors.Join(err, s.unix.Close())
		case s.shared >= 0:
			if cerr := sys.Close(s.shared); cerr != nil {
				err = errors.Join(err, os.NewSyscallError("close", cerr))
			}
		}
		s.shared = -1
		s.unix = nil
	}
	return err
}

// loopListener is one listening socket a loop serves: its own SO_REUSEPORT
// socket (ln), or its duplicate of a shared one.
type loopListener struct {
	info *Listener
	ln   *listener.Listener // nil for a duplicate
	fd   int                // ln.Fd(), or the duplicate; -1 once closed
	pc   *PacketConn        // the loop's datagram socket, for UDP
}

// openListeners gives loop l its sockets, one per spec: for TCP and UDP
// its own SO_REUSEPORT socket, for shared sockets a duplicate. It fills in
// the specs' addresses from loop 0's sockets (the port port 0 chose).
func (l *Loop) openListeners(specs []*listenSpec) error {
	cfg := l.cfg
	for _, s := range specs {
		ll := &loopListener{info: s.info, fd: -1}
		switch {
		case s.shared >= 0:
			// A duplicate of the shared socket (sys.DupNonblock: the file
			// description is shared, and O_NONBLOCK is set on it for every
			// holder, which a parent that passed it on no longer serves
			// from).
			fd, err := sys.DupNonblock(s.shared)
			if err != nil {
				return fmt.Errorf("listener %s: %w", s.info, err)
			}
			ll.fd = fd
		default:
			lcfg := listener.Config{Backlog: cfg.Backlog, IncomingCPU: cfg.IncomingCPU, CPU: l.cpu}
			var ln *listener.Listener
			var err error
			if s.info.Datagram() {
				ln, err = listener.ListenPacket(s.info.Network, s.address, lcfg)
			} else {
				ln, err = listener.Listen(s.info.Network, s.address, lcfg)
			}
			if err != nil {
				return err
			}
			ll.ln, ll.fd = ln, ln.Fd()
			if l.id == 0 {
				// Later loops bind what loop 0 got: the same port.
				s.info.Addr = ln.Addr()
				s.address = ln.Addr().String()
			}
		}
		l.lns = append(l.lns, ll)
		if s.info.Network == "tcp" || s.info.Network == "tcp4" || s.info.Network == "tcp6" {
			// Accepted sockets inherit TCP_NODELAY from the listener: one
			// setsockopt here instead of one per connection. Like Go's
			// net, percore turns Nagle's algorithm off.
			if err := sys.SetNoDelay(ll.fd); err != nil {
				return os.NewSyscallError("setsockopt", err)
			}
		}
	}
	return nil
}

// startListeners hands the loop's sockets to its driver: accepting on the
// stream listeners, receiving on the datagram sockets.
func (l *Loop) startListeners() error {
	for i, ll := range l.lns {
		var err error
		if ll.info.Datagram() {
			ll.pc = &PacketConn{loop: l, fd: ll.fd, ln: ll.info, idx: i, h: l.cfg.PacketHandler}
			ll.pc.family, err = sys.Domain(ll.fd)
			if err == nil {
				err = l.d.listenPacket(ll.pc)
			}
		} else {
			l.streams++ // before listen: the driver asks the loop whether it accepts
			err = l.d.listen(i, ll.fd)
		}
		if err != nil {
			return fmt.Errorf("listener %s: %w", ll.info, err)
		}
		if ll.info.Datagram() {
			l.packets++
		}
	}
	return nil
}

// closeListeners closes every socket of the loop, once the driver has
// stopped using them.
func (l *Loop) closeListeners() {
	for _, ll := range l.lns {
		var err error
		switch {
		case ll.ln != nil:
			err = ll.ln.Close()
		case ll.fd >= 0:
			if cerr := sys.Close(ll.fd); cerr != nil {
				err = os.NewSyscallError("close", cerr)
			}
		}
		ll.fd = -1
		if ll.pc != nil {
			ll.pc.fd = -1
		}
		if err != nil {
			l.log.Error("percore: close listener", "loop", l.id, "listener", ll.info.String(), "err", err)
			l.stopErr = errors.Join(l.stopErr, fmt.Errorf("loop %d: close listener %s: %w", l.id, ll.info, err))
		}
	}
}

// listenerFd returns the descriptor of the loop's stream listener i, or -1.
func (l *Loop) listenerFd(i int) int {
	if i < 0 || i >= len(l.lns) {
		return -1
	}
	return l.lns[i].fd
}
