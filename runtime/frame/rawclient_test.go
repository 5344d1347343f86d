package frame_test

import (
	"bytes"
	"fmt"
	"net"
	"testing"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"golang.org/x/sys/unix"
)

// rawClient is a blocking socket driven with raw system calls, so that the
// client side of a round trip allocates nothing.
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
	return &rawClient{fd: fd, buf: make([]byte, 64<<10)}
}

// roundTrip sends the pieces one write each and reads back as many bytes
// as they hold in total.
func (c *rawClient) roundTrip(pieces ...[]byte) error {
	total := 0
	for _, p := range pieces {
		total += len(p)
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
	}
	for got := 0; got < total; {
		n, err := unix.Read(c.fd, c.buf[got:total])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("eof after %d of %d bytes", got, total)
		}
		got += n
	}
	return nil
}

// TestFramedRoundTripAllocs: a framed request in, a framed reply out
// (WriteLine, WriteFrame), with frames whole and split across writes,
// allocates nothing on either backend.
func TestFramedRoundTripAllocs(t *testing.T) {
	lines := frame.Lines(frame.LineHandlerFunc(func(c *percore.Conn, line []byte) {
		frame.WriteLine(c, line)
	}), frame.LineConfig{})
	frames := frame.LengthPrefixed(frame.FrameHandlerFunc(func(c *percore.Conn, payload []byte) {
		frame.WriteFrame(c, payload)
	}), frame.LengthConfig{})
	req := frame.AppendFrame(frame.AppendFrame(nil, []byte("first")), bytes.Repeat([]byte("z"), 100))
	tests := []struct {
		name   string
		h      percore.Handler
		pieces [][]byte
	}{
		{"lines", lines, [][]byte{[]byte("ping\nsplit li"), []byte("ne\n")}},
		{"length", frames, [][]byte{req[:20], req[20:]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, b percore.Backend) {
				rt := serve(t, b, tt.h)
				c := newRawClient(t, rt.Addr())
				for range 200 { // warm up: buffers and the loop's first turns
					if err := c.roundTrip(tt.pieces...); err != nil {
						t.Fatal(err)
					}
				}
				var err error
				allocs := testing.AllocsPerRun(1000, func() {
					if e := c.roundTrip(tt.pieces...); e != nil {
						err = e
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if allocs != 0 {
					t.Fatalf("%v allocations per round trip, want 0", allocs)
				}
			})
		})
	}
}
