package runtime_test

import (
	"fmt"
	"testing"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/internal/rawconn"
	percore "github.com/percore/percore/runtime"
)

// TestEchoRoundTripAllocs asserts the hot path (a request in, a reply out)
// allocates nothing, on either backend.
func TestEchoRoundTripAllocs(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		assertNoAllocs(t, start(t, percore.Config{Backend: b}, echoHandler{}))
	})
}

// BenchmarkEcho measures one connection's echo round trip per backend and
// payload, reporting allocations and the loop's kernel enters per round
// trip. It is a micro view; throughput claims come from scripts/bench.sh.
func BenchmarkEcho(b *testing.B) {
	for _, backend := range pctest.Backends {
		for _, size := range []int{64, 4 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%v/%dB", backend, size), func(b *testing.B) {
				rt := start(b, percore.Config{Backend: backend}, echoHandler{})
				c := rawconn.Dial(b, rt.Addr())
				p := make([]byte, size)
				if err := c.RoundTrip(p); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(size))
				b.ReportAllocs()
				before := rt.Stats()
				n := 0
				for b.Loop() {
					if err := c.RoundTrip(p); err != nil {
						b.Fatal(err)
					}
					n++
				}
				after := rt.Stats()
				b.ReportMetric(float64(after.Syscalls-before.Syscalls)/float64(n), "syscalls/op")
				b.ReportMetric(float64(after.Turns-before.Turns)/float64(n), "turns/op")
			})
		}
	}
}
