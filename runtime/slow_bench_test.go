package runtime_test

import (
	"net"
	"syscall"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"golang.org/x/sys/unix"
)

// burstHandler answers each byte it receives with burstBytes of output,
// written in 64 KiB pieces: far more than the socket takes at once, so
// most of it waits in the connection's queue.
type burstHandler struct{}

const burstBytes = 4 << 20

var burstPiece = make([]byte, 64<<10)

func (burstHandler) OnData(c *percore.Conn, p []byte) {
	for range p {
		for range burstBytes / len(burstPiece) {
			c.Write(burstPiece)
		}
	}
}

// BenchmarkSlowConsumer measures draining a 4 MiB queue to a client that
// reads through a small receive buffer, as a slow consumer does: the loop
// sends a little at each writable event. It reports the process's CPU per
// drained queue (the client's reads are the same on both backends).
func BenchmarkSlowConsumer(b *testing.B) {
	for _, backend := range pctest.Backends {
		b.Run(backend.String(), func(b *testing.B) {
			rt := start(b, percore.Config{Backend: backend, MaxOutbound: -1}, burstHandler{})
			d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
				var serr error
				err := rc.Control(func(fd uintptr) {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 16<<10)
				})
				if err != nil {
					return err
				}
				return serr
			}}
			c, err := d.Dial("tcp", rt.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 16<<10)
			b.SetBytes(burstBytes)
			var before, after unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &before)
			n := 0
			for b.Loop() {
				if _, err := c.Write([]byte{1}); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < burstBytes; {
					m, err := c.Read(buf)
					if err != nil {
						b.Fatal(err)
					}
					got += m
				}
				n++
			}
			unix.Getrusage(unix.RUSAGE_SELF, &after)
			cpu := unix.TimevalToNsec(after.Utime) - unix.TimevalToNsec(before.Utime) +
				unix.TimevalToNsec(after.Stime) - unix.TimevalToNsec(before.Stime)
			b.ReportMetric(float64(cpu)/float64(n)/1e6, "cpu-ms/op")
		})
	}
}
