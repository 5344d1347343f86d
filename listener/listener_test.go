package listener

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestBadAddress(t *testing.T) {
	tests := []struct {
		name    string
		network string
		address string
		packet  bool
		want    string // a part of the error text
		errno   error  // nil: not a system call error
	}{
		{"port not a number", "tcp", "127.0.0.1:notaport", false, "address 127.0.0.1:notaport: lookup tcp/notaport: unknown port", nil},
		{"missing port", "tcp", "127.0.0.1", false, "listen tcp: address 127.0.0.1: missing port in address", nil},
		{"port out of range", "tcp", "127.0.0.1:99999", false, "invalid port", nil},
		{"unclosed bracket", "tcp", "[::1:0", false, "missing ']' in address", nil},
		{"ipv6 literal for tcp4", "tcp4", "[::1]:0", false, "no suitable address", nil},
		{"ipv4 literal for tcp6", "tcp6", "127.0.0.1:0", false, "no suitable address", nil},
		{"unknown zone", "tcp6", "[fe80::1%nosuchif0]:0", false, `ipv6 zone "nosuchif0"`, nil},
		{"address not on this host", "tcp", "192.0.2.1:0", false, "bind: cannot assign requested address", syscall.EADDRNOTAVAIL},
		{"unknown network", "sctp", "127.0.0.1:0", false, "unknown network sctp", nil},
		{"udp to Listen", "udp", "127.0.0.1:0", false, "unknown network udp", nil},
		{"udp port not a number", "udp", "127.0.0.1:x", true, "unknown port", nil},
		{"tcp to ListenPacket", "tcp", "127.0.0.1:0", true, "unknown network tcp", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			open := Listen
			if tt.packet {
				open = ListenPacket
			}
			l, err := open(tt.network, tt.address, Config{})
			if err == nil {
				l.Close()
				t.Fatalf("(%q, %q) succeeded", tt.network, tt.address)
			}
			var oe *net.OpError
			if !errors.As(err, &oe) || oe.Op != "listen" || oe.Net != tt.network {
				t.Errorf("error %#v is not a *net.OpError{Op: listen, Net: %s}", err, tt.network)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "listen "+tt.network) {
				t.Errorf("error %q does not start with %q and name %q", err, "listen "+tt.network, tt.want)
			}
			if tt.errno != nil {
				var se *os.SyscallError
				if !errors.As(err, &se) || !errors.Is(err, tt.errno) {
					t.Errorf("error %v does not wrap an *os.SyscallError for %v", err, tt.errno)
				}
			}
		})
	}
}

func TestSocketOptions(t *testing.T) {
	tests := []struct {
		name      string
		open      func(t *testing.T) *Listener
		sotype    int
		reusePort bool
	}{
		{"tcp", func(t *testing.T) *Listener { return mustListen(t, "tcp", "127.0.0.1:0", Config{}) }, unix.SOCK_STREAM, true},
		{"tcp4 localhost", func(t *testing.T) *Listener { return mustListen(t, "tcp4", "localhost:0", Config{Backlog: 8}) }, unix.SOCK_STREAM, true},
		{"udp", func(t *testing.T) *Listener { return mustListenPacket(t, "udp", "127.0.0.1:0", Config{}) }, unix.SOCK_DGRAM, true},
		{"unix", func(t *testing.T) *Listener {
			return mustListen(t, "unix", filepath.Join(sockDir(t), "s"), Config{})
		}, unix.SOCK_STREAM, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.open(t)
			fd := l.Fd()
			if got := getInt(t, fd, unix.SOL_SOCKET, unix.SO_TYPE); got != tt.sotype {
				t.Errorf("SO_TYPE = %d, want %d", got, tt.sotype)
			}
			if tt.reusePort {
				if getInt(t, fd, unix.SOL_SOCKET, unix.SO_REUSEADDR) != 1 {
					t.Error("SO_REUSEADDR is not set")
				}
				if getInt(t, fd, unix.SOL_SOCKET, unix.SO_REUSEPORT) != 1 {
					t.Error("SO_REUSEPORT is not set")
				}
			}
			if want := boolInt(tt.sotype == unix.SOCK_STREAM); getInt(t, fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN) != want {
				t.Errorf("SO_ACCEPTCONN is not %d", want)
			}
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
				t.Errorf("O_NONBLOCK is not set (flags %#x, %v)", fl, err)
			}
			if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC == 0 {
				t.Errorf("FD_CLOEXEC is not set (flags %#x, %v)", fl, err)
			}
		})
	}
}

func TestBacklog(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		n    int
		path string
		want int
	}{
		{"configured", 16, filepath.Join(dir, "missing"), 16},
		{"zero reads somaxconn", 0, write("ok", "1234\n"), 1234},
		{"negative reads somaxconn", -1, write("ok2", "77"), 77},
		{"unreadable", 0, filepath.Join(dir, "missing"), defaultBacklog},
		{"garbage", 0, write("bad", "lots\n"), defaultBacklog},
		{"zero in file", 0, write("zero", "0\n"), defaultBacklog},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backlog(tt.n, tt.path); got != tt.want {
				t.Errorf("backlog(%d, %s) = %d, want %d", tt.n, tt.path, got, tt.want)
			}
		})
	}
	t.Run("this host", func(t *testing.T) {
		data, err := os.ReadFile(somaxconnPath)
		if err != nil {
			t.Skipf("cannot read %s: %v", somaxconnPath, err)
		}
		want, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("%s holds %q", somaxconnPath, data)
		}
		if got := backlog(0, somaxconnPath); got != want {
			t.Errorf("backlog(0) = %d, want net.core.somaxconn %d", got, want)
		}
	})
}

func TestClose(t *testing.T) {
	tests := []struct {
		name string
		open func(t *testing.T) (*Listener, string)
	}{
		{"tcp", func(t *testing.T) (*Listener, string) { return mustListen(t, "tcp", "127.0.0.1:0", Config{}), "" }},
		{"udp", func(t *testing.T) (*Listener, string) { return mustListenPacket(t, "udp", "127.0.0.1:0", Config{}), "" }},
		{"unix", func(t *testing.T) (*Listener, string) {
			p := filepath.Join(sockDir(t), "s")
			return mustListen(t, "unix", p, Config{}), p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, path := tt.open(t)
			for i := range 3 {
				if err := l.Close(); err != nil {
					t.Fatalf("Close #%d: %v", i+1, err)
				}
			}
			if fd := l.Fd(); fd != -1 {
				t.Errorf("Fd() after Close = %d, want -1", fd)
			}
			if _, err := l.IncomingCPU(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("IncomingCPU after Close: %v, want net.ErrClosed", err)
			}
			if _, err := l.NetListener(); err == nil {
				t.Error("NetListener after Close succeeded")
			}
			if _, err := l.PacketConn(); err == nil {
				t.Error("PacketConn after Close succeeded")
			}
			if path != "" {
				if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("socket file after Close: %v, want it removed", err)
				}
			}
		})
	}
}

func TestNetListener(t *testing.T) {
	tests := []struct {
		name    string
		network string
		address func(t *testing.T) string
	}{
		{"tcp", "tcp", func(*testing.T) string { return "127.0.0.1:0" }},
		{"unix", "unix", func(t *testing.T) string { return filepath.Join(sockDir(t), "s") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustListen(t, tt.network, tt.address(t), Config{})
			ln, err := l.NetListener()
			if err != nil {
				t.Fatalf("NetListener: %v", err)
			}
			if ln.Addr().String() != l.Addr().String() {
				t.Errorf("net.Listener address %v, listener %v", ln.Addr(), l.Addr())
			}
			c := dial(t, tt.network, l.Addr().String())
			defer c.Close()
			ln.(interface{ SetDeadline(time.Time) error }).SetDeadline(time.Now().Add(waitTimeout))
			s, err := ln.Accept()
			if err != nil {
				t.Fatalf("Accept: %v", err)
			}
			defer s.Close()
			if _, err := c.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			s.SetDeadline(time.Now().Add(waitTimeout))
			buf := make([]byte, 4)
			if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("read %q, %v; want ping", buf, err)
			}
			if err := ln.Close(); err != nil {
				t.Fatalf("net.Listener Close: %v", err)
			}
			// l still owns a listening, non-blocking socket.
			if fl, err := unix.FcntlInt(uintptr(l.Fd()), unix.F_GETFL, 0); err != nil || fl&unix.O_NONBLOCK == 0 {
				t.Errorf("O_NONBLOCK lost after NetListener (flags %#x, %v)", fl, err)
			}
			c2 := dial(t, tt.network, l.Addr().String())
			defer c2.Close()
			acceptAll(t, []int{l.Fd()}, 1)
		})
	}
}

func TestPacketConn(t *testing.T) {
	l := mustListenPacket(t, "udp", "127.0.0.1:0", Config{})
	pc, err := l.PacketConn()
	if err != nil {
		t.Fatalf("PacketConn: %v", err)
	}
	defer pc.Close()
	c := dial(t, "udp", l.Addr().String())
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	pc.SetDeadline(time.Now().Add(waitTimeout))
	buf := make([]byte, 16)
	n, from, err := pc.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "ping" || from.String() != c.LocalAddr().String() {
		t.Fatalf("ReadFrom = %q from %v, %v; want ping from %v", buf[:n], from, err, c.LocalAddr())
	}
}

func TestWrongKind(t *testing.T) {
	tests := []struct {
		name string
		conv func(t *testing.T) error
	}{
		{"NetListener on udp", func(t *testing.T) error {
			_, err := mustListenPacket(t, "udp", "127.0.0.1:0", Config{}).NetListener()
			return err
		}},
		{"PacketConn on tcp", func(t *testing.T) error {
			_, err := mustListen(t, "tcp", "127.0.0.1:0", Config{}).PacketConn()
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.conv(t); !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("got %v, want errors.ErrUnsupported", err)
			}
		})
	}
}

func TestIPv6Loopback(t *testing.T) {
	requireIPv6(t)
	tests := []struct {
		name    string
		network string
		cfg     Config
	}{
		{"tcp6 v6only", "tcp6", Config{V6Only: true}},
		{"tcp default", "tcp", Config{}},
		{"udp6", "udp6", Config{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := strings.HasPrefix(tt.network, "tcp")
			ls := mustGroup(t, tt.network, "[::1]:0", []int{0, 1}, tt.cfg)
			var port int
			for i, l := range ls {
				var ip net.IP
				var p int
				if stream {
					a := l.Addr().(*net.TCPAddr)
					ip, p = a.IP, a.Port
				} else {
					a := l.Addr().(*net.UDPAddr)
					ip, p = a.IP, a.Port
				}
				if !ip.Equal(net.IPv6loopback) || p == 0 || (i > 0 && p != port) {
					t.Errorf("listener %d bound %v, want [::1] on one nonzero port", i, l.Addr())
				}
				port = p
			}
			addr := ls[0].Addr().String()
			if stream {
				c := dial(t, "tcp6", addr)
				defer c.Close()
				acceptAll(t, fds(ls), 1)
				return
			}
			c := dial(t, "udp6", addr)
			defer c.Close()
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 8)
			drain(t, fds(ls), 1, func(_, fd int) (bool, error) {
				_, _, err := unix.Recvfrom(fd, buf, 0)
				if errors.Is(err, unix.EAGAIN) {
					return false, nil
				}
				return err == nil, err
			})
		})
	}
}

// TestV6OnlyBeforeBind checks IPV6_V6ONLY on an unbound socket: binding a
// specific address such as [::1] makes the kernel force it to 1, and these
// tests bind nothing but loopback.
func TestV6OnlyBeforeBind(t *testing.T) {
	requireIPv6(t)
	tests := []struct {
		name string
		cfg  Config
		want int
	}{
		{"default dual-stack", Config{}, 0},
		{"v6only", Config{V6Only: true}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			// Start from the opposite, so that the test sees configure act.
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1-tt.want); err != nil {
				t.Fatal(err)
			}
			b := inetBind{network: "tcp6", stream: true, cfg: tt.cfg}
			if err := b.configure(fd, unix.AF_INET6, &Listener{}); err != nil {
				t.Fatalf("configure: %v", err)
			}
			if got := getInt(t, fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY); got != tt.want {
				t.Errorf("IPV6_V6ONLY = %d, want %d", got, tt.want)
			}
		})
	}
}

// Dup and a concurrent Close are ordered: Dup never duplicates the
// descriptor number that Close released and an open elsewhere was given
// (Runtime.ListenerFiles dups a loop's socket while the loop may be closing it).
// The hook runs Close while Dup is between reading the descriptor and
// duplicating it, and takes the lowest free number as an open would.
func TestDupIsOrderedWithClose(t *testing.T) {
	l := mustListen(t, "tcp", "127.0.0.1:0", Config{})
	closed := make(chan error, 1)
	var squatter *os.File
	dupHook = func() {
		go func() { closed <- l.Close() }()
		select {
		case <-closed: // Close released the number (it must not, yet)
			closed <- nil
		case <-time.After(100 * time.Millisecond):
		}
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Error(err)
		}
		squatter = f
	}
	t.Cleanup(func() { dupHook = func() {} })
	d, err := l.Dup()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(d)
	defer squatter.Close()
	if v, err := unix.GetsockoptInt(d, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
		t.Fatalf("Dup returned descriptor %d, not the listening socket: SO_ACCEPTCONN %d, %v", d, v, err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := l.Dup(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Dup after Close: %v, want net.ErrClosed", err)
	}
}
