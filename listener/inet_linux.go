//go:build linux

package listener

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// somaxconnPath holds the kernel's listen backlog limit.
const somaxconnPath = "/proc/sys/net/core/somaxconn"

// defaultBacklog is the backlog used when somaxconnPath cannot be read: the
// kernel's own default for net.core.somaxconn since Linux 5.4.
const defaultBacklog = 4096

// Listen returns a listening stream socket. network is "tcp", "tcp4" or
// "tcp6" with address host:port, or "unix" with address a filesystem path
// (or "@name" for Linux's abstract namespace).
//
// The host is a literal IP, "localhost" or another name (resolved once, here),
// or empty for the wildcard; port 0 lets the kernel choose, and
// [Listener.Addr] reports its choice. With "tcp" an empty host binds the
// dual-stack IPv6 wildcard [::] (IPv4 0.0.0.0 where the kernel has no IPv6);
// a literal 0.0.0.0 binds IPv4 only. The socket is non-blocking and
// close-on-exec, and for TCP has SO_REUSEADDR and SO_REUSEPORT set before
// bind, so that other listeners of this process (see [Group]) can share the
// address.
//
// For "unix", a stale socket file at the path (one that nothing listens on)
// is removed first; a live socket or a file that is not a socket makes
// Listen fail with EADDRINUSE and is left alone. See the package
// documentation for the details.
//
// Errors are *net.OpError with Op "listen", wrapping an *os.SyscallError
// when a system call failed (errors.Is(err, syscall.EADDRINUSE) works).
func Listen(network, address string, cfg Config) (*Listener, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
		return listenInet(network, address, true, cfg)
	case "unix":
		return listenUnix(address, cfg)
	}
	return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
}

// ListenPacket returns a bound datagram socket. network is "udp", "udp4" or
// "udp6"; the address, the options and the errors are those of [Listen].
func ListenPacket(network, address string, cfg Config) (*Listener, error) {
	switch network {
	case "udp", "udp4", "udp6":
		return listenInet(network, address, false, cfg)
	}
	return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
}

// Group returns len(cpus) sockets bound to one address with SO_REUSEPORT, one
// for each of len(cpus) loops, so that the kernel spreads connections (or
// datagrams) across them. network is one of the TCP networks of [Listen] or
// the UDP networks of [ListenPacket]; Unix sockets have no SO_REUSEPORT.
//
// With port 0 the first socket lets the kernel choose the port and the
// others bind the same one. With cfg.IncomingCPU, listener i gets
// SO_INCOMING_CPU cpus[i] (cfg.CPU is ignored); otherwise cpus only sets the
// count. On failure Group closes every socket it opened and returns the
// error of the one that failed.
func Group(network, address string, cpus []int, cfg Config) ([]*Listener, error) {
	var stream bool
	switch network {
	case "tcp", "tcp4", "tcp6":
		stream = true
	case "udp", "udp4", "udp6":
	case "unix":
		return nil, &net.OpError{Op: "listen", Net: network, Addr: &net.UnixAddr{Name: address, Net: network},
			Err: fmt.Errorf("unix sockets have no SO_REUSEPORT group: %w", errors.ErrUnsupported)}
	default:
		return nil, &net.OpError{Op: "listen", Net: network, Err: net.UnknownNetworkError(network)}
	}
	if len(cpus) == 0 {
		return nil, &net.OpError{Op: "listen", Net: network, Err: errors.New("group of no listeners: cpus is empty")}
	}
	b, err := resolveInet(network, address, stream, cfg)
	if err != nil {
		return nil, err
	}
	ls := make([]*Listener, 0, len(cpus))
	for i, cpu := range cpus {
		b.cpu = cpu
		l, err := b.listen()
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, err
		}
		ls = append(ls, l)
		if i == 0 {
			// The rest bind exactly what the first one got: same family,
			// address and (resolved) port.
			b.family, b.dual, b.sa, b.addr = sys.Family(l.sa), false, l.sa, l.addr
		}
	}
	return ls, nil
}

func listenInet(network, address string, stream bool, cfg Config) (*Listener, error) {
	b, err := resolveInet(network, address, stream, cfg)
	if err != nil {
		return nil, err
	}
	b.cpu = cfg.CPU
	return b.listen()
}

// inetBind is everything needed to open one TCP or UDP socket.
type inetBind struct {
	network string
	stream  bool
	family  int
	dual    bool // family is AF_INET6 for an unspecified host: fall back to AF_INET
	sa      unix.Sockaddr
	addr    net.Addr // the requested address, for errors
	backlog int
	cfg     Config
	cpu     int // SO_INCOMING_CPU, when cfg.IncomingCPU
}

// resolveInet parses and resolves address for network and picks the address
// family.
func resolveInet(network, address string, stream bool, cfg Config) (inetBind, error) {
	var ip net.IP
	var port int
	var zone string
	var addr net.Addr
	if stream {
		a, err := net.ResolveTCPAddr(network, address)
		if err != nil {
			return inetBind{}, resolveError(network, address, err)
		}
		ip, port, zone, addr = a.IP, a.Port, a.Zone, a
	} else {
		a, err := net.ResolveUDPAddr(network, address)
		if err != nil {
			return inetBind{}, resolveError(network, address, err)
		}
		ip, port, zone, addr = a.IP, a.Port, a.Zone, a
	}
	b := inetBind{network: network, stream: stream, addr: addr, cfg: cfg}
	if stream {
		b.backlog = backlog(cfg.Backlog, somaxconnPath)
	}
	switch {
	case strings.HasSuffix(network, "4"):
		b.family = unix.AF_INET
	case strings.HasSuffix(network, "6"):
		b.family = unix.AF_INET6
	case ip == nil:
		b.family, b.dual = unix.AF_INET6, true
	case ip.To4() != nil:
		b.family = unix.AF_INET
	default:
		b.family = unix.AF_INET6
	}
	if b.family == unix.AF_INET {
		sa := &unix.SockaddrInet4{Port: port}
		if ip != nil {
			copy(sa.Addr[:], ip.To4())
		}
		b.sa = sa
		return b, nil
	}
	sa := &unix.SockaddrInet6{Port: port}
	copy(sa.Addr[:], ip.To16())
	if zone != "" {
		id, err := zoneIndex(zone)
		if err != nil {
			return inetBind{}, &net.OpError{Op: "listen", Net: network, Addr: addr, Err: err}
		}
		sa.ZoneId = id
	}
	b.sa = sa
	return b, nil
}

// resolveError reports an address that did not resolve, naming it unless
// the resolver's error already does (a *net.AddrError does, a lookup error
// names only the part it looked up).
func resolveError(network, address string, err error) error {
	if ae := (*net.AddrError)(nil); !errors.As(err, &ae) || ae.Addr == "" {
		err = fmt.Errorf("address %s: %w", address, err)
	}
	return &net.OpError{Op: "listen", Net: network, Err: err}
}

// listen opens, configures, binds and (for streams) listens one socket.
func (b *inetBind) listen() (*Listener, error) {
	sotype, proto := unix.SOCK_DGRAM, unix.IPPROTO_UDP
	if b.stream {
		sotype, proto = unix.SOCK_STREAM, unix.IPPROTO_TCP
	}
	family, sa := b.family, b.sa
	fd, err := unix.Socket(family, sotype|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err == unix.EAFNOSUPPORT && b.dual {
		// No IPv6 in this kernel: the unspecified host becomes 0.0.0.0.
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: b.sa.(*unix.SockaddrInet6).Port}
		fd, err = unix.Socket(family, sotype|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	}
	if err != nil {
		return nil, b.opError(os.NewSyscallError("socket", err))
	}
	l, err := b.setup(fd, family, sa)
	if err != nil {
		unix.Close(fd)
		return nil, b.opError(err)
	}
	return l, nil
}

func (b *inetBind) setup(fd, family int, sa unix.Sockaddr) (*Listener, error) {
	l := &Listener{network: b.network, stream: b.stream}
	if err := b.configure(fd, family, l); err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, sa); err != nil {
		return nil, os.NewSyscallError("bind", err)
	}
	if b.stream {
		if err := unix.Listen(fd, b.backlog); err != nil {
			return nil, os.NewSyscallError("listen", err)
		}
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		return nil, os.NewSyscallError("getsockname", err)
	}
	l.sa, l.addr = bound, sys.Addr(bound, !b.stream)
	l.fd.Store(int64(fd))
	return l, nil
}

// configure sets the options that must precede bind. A refused
// SO_INCOMING_CPU is recorded in l rather than returned.
func (b *inetBind) configure(fd, family int, l *Listener) error {
	if err := setInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return err
	}
	if err := setInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return err
	}
	if family == unix.AF_INET6 {
		// Binding a specific IPv6 address makes the kernel set IPV6_V6ONLY
		// whatever is asked; the option matters for the wildcard.
		if err := setInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, boolInt(b.cfg.V6Only)); err != nil {
			return err
		}
	}
	if b.cfg.IncomingCPU {
		if err := setInt(fd, unix.SOL_SOCKET, unix.SO_INCOMING_CPU, b.cpu); err != nil {
			// A hint only: keep the listener, report through IncomingCPU.
			l.incomingErr = b.opError(fmt.Errorf("SO_INCOMING_CPU %d: %w", b.cpu, err))
		}
	}
	return nil
}

func (b *inetBind) opError(err error) error {
	return &net.OpError{Op: "listen", Net: b.network, Addr: b.addr, Err: err}
}

// backlog returns the listen backlog for the configured value n, reading
// the kernel's limit from path when n is not positive.
func backlog(n int, path string) int {
	if n > 0 {
		return min(n, math.MaxInt32)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return defaultBacklog
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || v <= 0 {
		return defaultBacklog
	}
	return v
}

func setInt(fd, level, opt, value int) error {
	if err := unix.SetsockoptInt(fd, level, opt, value); err != nil {
		return os.NewSyscallError("setsockopt", err)
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// zoneIndex returns the interface index an IPv6 zone names: an interface
// name, or the index itself.
func zoneIndex(zone string) (uint32, error) {
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n), nil
	}
	ifi, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, fmt.Errorf("ipv6 zone %q: %w", zone, err)
	}
	return uint32(ifi.Index), nil
}
