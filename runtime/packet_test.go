package runtime_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// packetEcho sends every datagram back to its source.
type packetEcho struct{}

func (packetEcho) OnPacket(p *percore.PacketConn, data []byte, from netip.AddrPort) {
	_ = p.WriteTo(data, from)
}

// startUDP starts a one-loop runtime with one UDP listener on addr.
func startUDP(t *testing.T, b percore.Backend, addr string, h percore.PacketHandler, cfg percore.Config) *percore.Runtime {
	t.Helper()
	cfg.Backend = b
	cfg.Listen = append(cfg.Listen, "udp://"+addr)
	cfg.PacketHandler = h
	return start(t, cfg, nil)
}

// udpClient is a connected UDP socket to rt's first listener, with a
// deadline on every read and write.
func udpClient(t *testing.T, rt *percore.Runtime) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, rt.Addr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

func TestUDPEcho(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := startUDP(t, b, "127.0.0.1:0", packetEcho{}, percore.Config{})
		if ln := rt.Listeners()[0]; ln.Network != "udp" || !ln.Datagram() || ln.Shared {
			t.Fatalf("listener %+v", ln)
		}
		c := udpClient(t, rt)
		buf := make([]byte, 70000)
		// The largest UDP payload over IPv4, an empty datagram, and
		// sizes around the page and the batch buffers.
		for _, n := range []int{1, 0, 64, 1400, 4095, 4096, 4097, 16 << 10, 65507} {
			p := bytes.Repeat([]byte{byte(n)}, n)
			if _, err := c.Write(p); err != nil {
				t.Fatalf("write %d: %v", n, err)
			}
			got, err := c.Read(buf)
			if err != nil {
				t.Fatalf("read reply to %d bytes: %v", n, err)
			}
			if !bytes.Equal(buf[:got], p) {
				t.Fatalf("reply to %d bytes: %d bytes, differs", n, got)
			}
		}
		pctest.WaitFor(t, "the counters", func() bool {
			s := rt.Stats()
			return s.PacketsIn == 9 && s.PacketsOut == 9
		})
		if s := rt.Stats(); s.PacketsTruncated != 0 || s.PacketDrops != 0 || s.PacketErrors != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestUDPIPv6(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		probe, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
		if err != nil {
			t.Skipf("no IPv6 loopback here: %v", err)
		}
		probe.Close()
		var src atomic.Value
		rt := startUDP(t, b, "[::1]:0", percore.PacketHandlerFunc(func(p *percore.PacketConn, data []byte, from netip.AddrPort) {
			src.Store(from)
			_ = p.WriteTo(data, from)
		}), percore.Config{})
		c := udpClient(t, rt)
		if _, err := c.Write([]byte("over v6")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "over v6" {
			t.Fatalf("reply %q, %v", buf[:n], err)
		}
		want := c.LocalAddr().(*net.UDPAddr).AddrPort()
		if got := src.Load().(netip.AddrPort); got != want {
			t.Fatalf("source %v, want %v", got, want)
		}
	})
}

// A dual-stack socket takes IPv4 clients and replies to them with the
// IPv4 address the handler saw.
func TestUDPDualStack(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		probe, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
		if err != nil {
			t.Skipf("no IPv6 here: %v", err)
		}
		probe.Close()
		var src atomic.Value
		rt := startUDP(t, b, "[::]:0", percore.PacketHandlerFunc(func(p *percore.PacketConn, data []byte, from netip.AddrPort) {
			src.Store(from)
			_ = p.WriteTo(data, from)
		}), percore.Config{})
		port := rt.Addr().(*net.UDPAddr).Port
		c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write([]byte("v4")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 8)
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "v4" {
			t.Fatalf("reply %q, %v", buf[:n], err)
		}
		if got := src.Load().(netip.AddrPort); !got.Addr().Is4() {
			t.Fatalf("source %v: want the IPv4 address, unmapped", got)
		}
	})
}

// truncating records the datagrams too large for the buffer, and echoes
// the others.
type truncating struct {
	packetEcho
	sizes chan int
}

func (h truncating) OnTruncated(p *percore.PacketConn, data []byte, size int, from netip.AddrPort) {
	h.sizes <- size
	_ = p.WriteTo(data[:8], from)
}

func TestUDPTruncated(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := truncating{sizes: make(chan int, 4)}
		rt := startUDP(t, b, "127.0.0.1:0", h, percore.Config{PacketBufferSize: 1024})
		c := udpClient(t, rt)
		big := bytes.Repeat([]byte("0123456789"), 300) // 3000 bytes
		if _, err := c.Write(big); err != nil {
			t.Fatal(err)
		}
		if size := pctest.Recv(t, h.sizes, "truncated datagram"); size != len(big) {
			t.Fatalf("OnTruncated size %d, want %d", size, len(big))
		}
		buf := make([]byte, 4096)
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "01234567" {
			t.Fatalf("reply to the truncated datagram %q, %v", buf[:n], err)
		}
		// The socket goes on: a datagram that fits is echoed whole.
		if _, err := c.Write(big[:1024]); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(buf); err != nil || !bytes.Equal(buf[:n], big[:1024]) {
			t.Fatalf("reply %d bytes, %v", n, err)
		}
		pctest.WaitFor(t, "the counts", func() bool {
			s := rt.Stats()
			return s.PacketsTruncated == 1 && s.PacketsIn == 2
		})
	})
}

// Without a TruncatedHandler a truncated datagram is dropped, and counted.
func TestUDPTruncatedDropped(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := startUDP(t, b, "127.0.0.1:0", packetEcho{}, percore.Config{PacketBufferSize: 512})
		c := udpClient(t, rt)
		if _, err := c.Write(make([]byte, 600)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("small")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1024)
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "small" {
			t.Fatalf("first reply %q, %v: want only the datagram that fitted", buf[:n], err)
		}
		pctest.WaitFor(t, "the counts", func() bool {
			s := rt.Stats()
			return s.PacketsTruncated == 1 && s.PacketsOut == 1
		})
	})
}

// A burst larger than the socket's receive buffer, sent while the loop is
// held: the kernel drops what does not fit, the loop counts those drops
// (PacketsLost, from SO_RXQ_OVFL) and serves the rest, and nothing hangs.
func TestUDPBurstOverReceiveBuffer(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		var probes atomic.Int64
		rt := startUDP(t, b, "127.0.0.1:0", percore.PacketHandlerFunc(func(p *percore.PacketConn, data []byte, from netip.AddrPort) {
			if string(data) == "probe" {
				probes.Add(1)
				_ = p.WriteTo(data, from)
			}
		}), percore.Config{})
		c := udpClient(t, rt)
		const burst = 3000
		release := pctest.HoldLoop(t, rt.Loops()[0])
		p := make([]byte, 1024)
		for range burst {
			if _, err := c.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		release()
		// The drop count arrives with a datagram queued after the
		// drops: probe until the loop's counts add up.
		sent := int64(0)
		pctest.WaitFor(t, "every datagram received or counted lost", func() bool {
			s := rt.Stats()
			if s.PacketsIn+s.PacketsLost == uint64(burst+sent) && probes.Load() == sent && sent > 0 {
				return true
			}
			if probes.Load() == sent {
				sent++
				_, _ = c.Write([]byte("probe"))
			}
			return false
		})
		s := rt.Stats()
		if s.PacketsLost == 0 {
			t.Fatalf("no datagram lost in a burst of %d KiB: the receive buffer held them all?", burst)
		}
		t.Logf("%d of %d received, %d lost in the kernel", s.PacketsIn-uint64(sent), burst, s.PacketsLost)
	})
}

// fanOut replies n times to every datagram: more than MaxPacketQueue
// allows at once.
type fanOut struct {
	n    int
	errs chan error
}

func (h fanOut) OnPacket(p *percore.PacketConn, data []byte, from netip.AddrPort) {
	var first error
	for range h.n {
		if err := p.WriteTo(data, from); err != nil && first == nil {
			first = err
		}
	}
	h.errs <- first
}

// The send-queue policy: past MaxPacketQueue datagrams waiting in one
// turn, WriteTo drops the datagram, counts it, and says so.
func TestUDPSendQueueFull(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := fanOut{n: 20, errs: make(chan error, 1)}
		rt := startUDP(t, b, "127.0.0.1:0", h, percore.Config{MaxPacketQueue: 4})
		c := udpClient(t, rt)
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := pctest.Recv(t, h.errs, "the handler's result"); !errors.Is(err, percore.ErrPacketQueueFull) {
			t.Fatalf("WriteTo past the queue: %v, want ErrPacketQueueFull", err)
		}
		buf := make([]byte, 8)
		for range 4 {
			if _, err := c.Read(buf); err != nil {
				t.Fatalf("the queued replies: %v", err)
			}
		}
		pctest.WaitFor(t, "the counts", func() bool {
			s := rt.Stats()
			return s.PacketDrops == 16 && s.PacketsOut == 4
		})
	})
}

// Replies to many sources reach each its own.
func TestUDPManySources(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := startUDP(t, b, "127.0.0.1:0", packetEcho{}, percore.Config{})
		const clients = 64
		cs := make([]*net.UDPConn, clients)
		for i := range cs {
			cs[i] = udpClient(t, rt)
		}
		for round := range 3 {
			for i, c := range cs {
				if _, err := fmt.Fprintf(c, "client %d round %d", i, round); err != nil {
					t.Fatal(err)
				}
			}
			buf := make([]byte, 64)
			for i, c := range cs {
				n, err := c.Read(buf)
				if want := fmt.Sprintf("client %d round %d", i, round); err != nil || string(buf[:n]) != want {
					t.Fatalf("client %d: %q, %v; want %q", i, buf[:n], err, want)
				}
			}
		}
	})
}

// A reply to an address nobody listens on (the kernel answers with an
// ICMP port unreachable) does not stop the socket.
func TestUDPICMPError(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		dead, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		deadAddr := dead.LocalAddr().(*net.UDPAddr).AddrPort()
		dead.Close()
		rt := startUDP(t, b, "127.0.0.1:0", percore.PacketHandlerFunc(func(p *percore.PacketConn, data []byte, from netip.AddrPort) {
			_ = p.WriteTo(data, deadAddr) // refused by the kernel, by ICMP
			_ = p.WriteTo(data, from)
		}), percore.Config{})
		c := udpClient(t, rt)
		buf := make([]byte, 16)
		for i := range 20 {
			want := fmt.Sprintf("request %d", i)
			if _, err := c.Write([]byte(want)); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Read(buf); err != nil || string(buf[:n]) != want {
				t.Fatalf("reply %q, %v; want %q", buf[:n], err, want)
			}
		}
		// A connected client socket does get the ICMP error: the
		// server's socket is unconnected, and goes on.
		pctest.WaitFor(t, "the count", func() bool { return rt.Stats().PacketsIn == 20 })
	})
}

// WriteTo refuses what it cannot send, with an error and nothing queued.
func TestUDPWriteToErrors(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		errs := make(chan [3]error, 1)
		rt := startUDP(t, b, "127.0.0.1:0", percore.PacketHandlerFunc(func(p *percore.PacketConn, data []byte, from netip.AddrPort) {
			errs <- [3]error{
				p.WriteTo(make([]byte, 70000), from),
				p.WriteTo(data, netip.MustParseAddrPort("[::1]:9")),
				p.WriteTo(data, netip.AddrPort{}),
			}
			_ = p.WriteTo(data, from)
		}), percore.Config{})
		c := udpClient(t, rt)
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		got := pctest.Recv(t, errs, "the handler's errors")
		for i, err := range got {
			if err == nil {
				t.Errorf("case %d: WriteTo succeeded", i)
			}
		}
		buf := make([]byte, 8)
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != "x" {
			t.Fatalf("reply %q, %v", buf[:n], err)
		}
	})
}

// A datagram round trip allocates nothing, on either side of the process.
func TestUDPEchoAllocs(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := startUDP(t, b, "127.0.0.1:0", packetEcho{}, percore.Config{})
		c := udpClient(t, rt)
		p := make([]byte, 512)
		buf := make([]byte, 1024)
		var err error
		roundTrip := func() {
			if _, e := c.Write(p); e != nil {
				err = e
				return
			}
			if _, e := c.Read(buf); e != nil {
				err = e
			}
		}
		for range 200 {
			roundTrip()
		}
		allocs := testing.AllocsPerRun(2000, roundTrip)
		if err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Fatalf("%v allocations per datagram round trip, want 0", allocs)
		}
	})
}

// A runtime with a UDP listener needs a packet handler.
func TestUDPNeedsPacketHandler(t *testing.T) {
	_, err := percore.New(percore.Config{Listen: []string{"udp://127.0.0.1:0"}, Cores: allCores(t)[:1], Logger: discard}, nil)
	if err == nil {
		t.Fatal("New succeeded without a PacketHandler")
	}
}
