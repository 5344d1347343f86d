package runtime_test

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// closer closes every connection as it opens, unless keep is set.
type closer struct{ keep *atomic.Bool }

func (h closer) OnOpen(c *percore.Conn) {
	if !h.keep.Load() {
		c.Close()
	}
}
func (closer) OnData(*percore.Conn, []byte) {}

// closeOne dials addr and waits for the server to close the connection.
func closeOne(b *testing.B, addr string) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var p [1]byte
	if _, err := c.Read(p[:]); err != io.EOF {
		b.Fatalf("read after the server's close: %v, want EOF", err)
	}
	c.Close()
}

// BenchmarkServerCloseAtScale measures a server-side close (a dial the
// server closes as it opens, until the client reads EOF) with open
// connections held silent beside it, and reports it against the same
// close with none open ("x-vs-0"): a close whose cost grows with the open
// connections shows here as a ratio far above 1. With both ends in this
// process the descriptor limit allows about 9,000 silent connections;
// scripts/scale.sh measures 18,000 across processes.
//
//	go test -run XXX -bench ServerCloseAtScale -benchtime 2000x ./runtime/
func BenchmarkServerCloseAtScale(b *testing.B) {
	const baseline = 500
	for _, backend := range pctest.Backends {
		for _, open := range []int{0, 8000} {
			b.Run(fmt.Sprintf("%v/open=%d", backend, open), func(b *testing.B) {
				keep := new(atomic.Bool)
				rt := start(b, percore.Config{Backend: backend}, closer{keep})
				addr := rt.Addr().String()
				for range 50 { // warm up
					closeOne(b, addr)
				}
				t0 := time.Now()
				for range baseline {
					closeOne(b, addr)
				}
				alone := time.Since(t0) / baseline
				keep.Store(true)
				openSilent(b, addr, open)
				keep.Store(false)
				for b.Loop() {
					closeOne(b, addr)
				}
				perClose := b.Elapsed() / time.Duration(b.N)
				b.ReportMetric(float64(alone.Microseconds()), "us/close-alone")
				b.ReportMetric(float64(perClose)/float64(alone), "x-vs-0")
			})
		}
	}
}
