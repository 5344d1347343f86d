//go:build linux

package sys

import (
	"net"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestPutInetRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		family int
		to     string
		want   string // what AddrPortFrom reads back
		salen  uint32
	}{
		{"ipv4", unix.AF_INET, "127.0.0.1:80", "127.0.0.1:80", unix.SizeofSockaddrInet4},
		{"mapped on ipv4", unix.AF_INET, "[::ffff:10.0.0.1]:9", "10.0.0.1:9", unix.SizeofSockaddrInet4},
		{"ipv6", unix.AF_INET6, "[2001:db8::1]:443", "[2001:db8::1]:443", unix.SizeofSockaddrInet6},
		{"ipv4 on ipv6 is mapped, read back unmapped", unix.AF_INET6, "192.0.2.7:53", "192.0.2.7:53", unix.SizeofSockaddrInet6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sa unix.RawSockaddrInet6
			n, err := PutInet(&sa, tt.family, netip.MustParseAddrPort(tt.to))
			if err != nil || n != tt.salen {
				t.Fatalf("PutInet = %d, %v; want %d", n, err, tt.salen)
			}
			name := unsafe.Slice((*byte)(unsafe.Pointer(&sa)), n)
			if got := AddrPortFrom(name).String(); got != tt.want {
				t.Errorf("read back %s, want %s", got, tt.want)
			}
		})
	}
	var sa unix.RawSockaddrInet6
	if _, err := PutInet(&sa, unix.AF_INET, netip.MustParseAddrPort("[::1]:1")); err == nil {
		t.Error("an IPv6 destination on an IPv4 socket was accepted")
	}
	if got := AddrPortFrom([]byte{1, 2}); got.IsValid() {
		t.Errorf("a short name read as %v", got)
	}
}

func TestPutUnix(t *testing.T) {
	var sa unix.RawSockaddrAny
	if _, err := PutUnix(&sa, ""); err == nil {
		t.Error("an empty path was accepted")
	}
	if _, err := PutUnix(&sa, string(make([]byte, 108))); err == nil {
		t.Error("a path without room for its NUL was accepted")
	}
	n, err := PutUnix(&sa, "@abstract")
	su := (*unix.RawSockaddrUnix)(unsafe.Pointer(&sa))
	if err != nil || n != uint32(unsafe.Offsetof(su.Path))+9 || su.Path[0] != 0 || su.Path[1] != 'a' {
		t.Errorf("abstract name: len %d, %v, path %v", n, err, su.Path[:10])
	}
}

func TestAddr(t *testing.T) {
	tests := []struct {
		sa       unix.Sockaddr
		datagram bool
		want     net.Addr
	}{
		{&unix.SockaddrInet4{Port: 80, Addr: [4]byte{127, 0, 0, 1}}, false, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1).To4(), Port: 80}},
		{&unix.SockaddrInet4{Port: 53, Addr: [4]byte{10, 0, 0, 1}}, true, &net.UDPAddr{IP: net.IPv4(10, 0, 0, 1).To4(), Port: 53}},
		{&unix.SockaddrInet6{Port: 1, ZoneId: 0, Addr: [16]byte{15: 1}}, false, &net.TCPAddr{IP: net.IPv6loopback, Port: 1}},
		{&unix.SockaddrUnix{Name: "/tmp/s"}, false, &net.UnixAddr{Name: "/tmp/s", Net: "unix"}},
	}
	for _, tt := range tests {
		if got := Addr(tt.sa, tt.datagram); got.String() != tt.want.String() || got.Network() != tt.want.Network() {
			t.Errorf("Addr(%+v, %v) = %v %s, want %v %s", tt.sa, tt.datagram, got, got.Network(), tt.want, tt.want.Network())
		}
	}
}

// countSignaler counts the signals a Waker sends.
type countSignaler struct{ n int }

func (c *countSignaler) Fd() int       { return -1 }
func (c *countSignaler) Signal() error { c.n++; return nil }
func (c *countSignaler) Close() error  { return nil }

func TestWakerCoalesces(t *testing.T) {
	s := &countSignaler{}
	w := NewWaker(s)
	w.Wake()
	w.Wake()
	if s.n != 1 || !w.Pending() {
		t.Fatalf("two wakes: %d signals, pending %v; want 1, true", s.n, w.Pending())
	}
	if w.Claim() {
		t.Error("claimed a wake-up that is on its way")
	}
	w.Woke()
	if !w.Claim() || s.n != 1 {
		t.Errorf("after Woke: Claim failed or signalled (%d)", s.n)
	}
	w.Wake() // claimed: the claimer delivers it
	if s.n != 1 {
		t.Errorf("a claimed wake-up signalled again (%d)", s.n)
	}
}

func TestEventfd(t *testing.T) {
	ev, err := OpenEventfd(true)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWaker(ev)
	t.Cleanup(func() { w.Close() })
	if err := w.Wake(); err != nil {
		t.Fatal(err)
	}
	if !Readable(ev.Fd()) {
		t.Fatal("the eventfd is not readable after Wake")
	}
	ev.Read()
	w.Woke()
	if Readable(ev.Fd()) {
		t.Fatal("the eventfd is readable after Read")
	}
}
