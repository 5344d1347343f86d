package runtime_test

import (
	"fmt"
	"net"
	"testing"

	percore "github.com/percore/percore/runtime"
	"golang.org/x/sys/unix"
)

// rawClient is a blocking socket driven with raw system calls, so that the
// client side of a round trip allocates nothing and its cost is only the
// kernel's.
type rawClient struct {
	fd  int
	buf []byte
}

func newRawClient(tb testing.TB, addr net.Addr) *rawClient {
	tb.Helper()
	a := addr.(*net.TCPAddr)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	sa := &unix.SockaddrInet4{Port: a.Port}
	copy(sa.Addr[:], a.IP.To4())
	if err := unix.Connect(fd, sa); err != nil {
		tb.Fatal(err)
	}
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	tv := unix.Timeval{Sec: 10}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	return &rawClient{fd: fd, buf: make([]byte, 1<<20)}
}

// roundTrip sends p and reads as many bytes back.
func (c *rawClient) roundTrip(p []byte) error {
	for off := 0; off < len(p); {
		n, err := unix.Write(c.fd, p[off:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		off += n
	}
	for got := 0; got < len(p); {
		n, err := unix.Read(c.fd, c.buf[:min(len(c.buf), len(p)-got)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("eof after %d of %d bytes", got, len(p))
		}
		got += n
	}
	return nil
}

// TestEchoRoundTripAllocs asserts the hot path (a request in, a reply out)
// allocates nothing, on either backend.
func TestEchoRoundTripAllocs(t *testing.T) {
	eachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b}, echoHandler{})
		c := newRawClient(t, rt.Addr())
		p := make([]byte, 512)
		for range 200 { // warm up: buffers, slices, the loop's first turns
			if err := c.roundTrip(p); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		allocs := testing.AllocsPerRun(2000, func() {
			if e := c.roundTrip(p); e != nil {
				err = e
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Fatalf("%v allocations per echo round trip, want 0", allocs)
		}
	})
}

// BenchmarkEcho measures one connection's echo round trip per backend and
// payload, reporting allocations and the loop's kernel enters per round
// trip. It is a micro view; throughput claims come from scripts/bench.sh.
func BenchmarkEcho(b *testing.B) {
	for _, backend := range backends {
		for _, size := range []int{64, 4 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%v/%dB", backend, size), func(b *testing.B) {
				rt, err := percore.New(percore.Config{Backend: backend, Addr: "127.0.0.1:0", Cores: []int{0}, Logger: quietLogger(b)}, echoHandler{})
				if err != nil {
					b.Fatal(err)
				}
				defer rt.Close()
				c := newRawClient(b, rt.Addr())
				p := make([]byte, size)
				if err := c.roundTrip(p); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				before := rt.Stats()
				n := 0
				for b.Loop() {
					if err := c.roundTrip(p); err != nil {
						b.Fatal(err)
					}
					n++
				}
				after := rt.Stats()
				b.ReportMetric(float64(after.Enters-before.Enters)/float64(n), "enters/op")
				b.ReportMetric(float64(after.Turns-before.Turns)/float64(n), "turns/op")
			})
		}
	}
}
