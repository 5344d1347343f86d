package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/metrics"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// The cost of a scrape, on the scraper's goroutine: what the loops pay for
// it is nothing by construction (they publish once per turn whether anyone
// reads or not), and the request path is measured by the runtime's
// BenchmarkEcho.

// benchLoops starts an idle runtime of the backend with one loop per CPU
// this process may use, and no listener.
func benchLoops(b *testing.B, backend percore.Backend) *percore.Runtime {
	b.Helper()
	cores, err := cpu.Cores()
	if err != nil {
		b.Fatal(err)
	}
	return pctest.Start(b, percore.Config{Backend: backend, Cores: cores}, nil)
}

// collect runs one Collect of c and drains what it sent.
func collect(c prometheus.Collector, ch chan prometheus.Metric) int {
	c.Collect(ch)
	n := len(ch)
	for range n {
		<-ch
	}
	return n
}

// BenchmarkLoopStats is one read of a loop's published Stats.
func BenchmarkLoopStats(b *testing.B) {
	for _, backend := range pctest.Backends {
		b.Run(backend.String(), func(b *testing.B) {
			l := benchLoops(b, backend).Loops()[0]
			b.ReportAllocs()
			var turns uint64
			for b.Loop() {
				turns += l.Stats().Turns
			}
			_ = turns
		})
	}
}

// BenchmarkCollect is one scrape of the loops' collector: every loop's
// Stats read and turned into samples.
func BenchmarkCollect(b *testing.B) {
	for _, backend := range pctest.Backends {
		b.Run(backend.String(), func(b *testing.B) {
			rt := benchLoops(b, backend)
			c := metrics.New(rt)
			ch := make(chan prometheus.Metric, 4096)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n = collect(c, ch)
			}
			b.ReportMetric(float64(n), "samples/op")
		})
	}
}

// BenchmarkPoolCollect is one scrape of a pool's collector over a pool
// with a Local on every loop.
func BenchmarkPoolCollect(b *testing.B) {
	for _, backend := range pctest.Backends {
		b.Run(backend.String(), func(b *testing.B) {
			rt := benchLoops(b, backend)
			m, err := upstream.New("127.0.0.1:1") // never dialed: MinIdle is 0
			if err != nil {
				b.Fatal(err)
			}
			p, err := pool.New[*upstream.Conn](m, pool.Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { p.Close() })
			for _, l := range rt.Loops() {
				pctest.OnLoop(b, l, func() { p.Local(l) })
			}
			c := metrics.NewPool(p, metrics.PoolConfig{})
			ch := make(chan prometheus.Metric, 256)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n = collect(c, ch)
			}
			if n < 10 {
				b.Fatalf("a scrape sent %d samples: the pool's series are missing", n)
			}
			b.ReportMetric(float64(n), "samples/op")
		})
	}
}
