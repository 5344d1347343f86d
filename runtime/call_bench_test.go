package runtime_test

import (
	"testing"
	"time"

	percore "github.com/percore/percore/runtime"
)

// BenchmarkCrossLoopCall measures cross-loop calls between two loops: a
// round trip at a time (latency: each done starts the next call), and
// 1,000 calls made in one turn (throughput: one batch there and back).
// The two loops share this machine's two CPUs with the benchmark itself.
//
//	go test -run XXX -bench CrossLoopCall -benchtime 200x ./runtime/
func BenchmarkCrossLoopCall(b *testing.B) {
	const per = 1000
	type mode struct {
		name    string
		backend percore.Backend
		eventfd bool
	}
	modes := []mode{{"io_uring-msgring", percore.IOURing, false}, {"io_uring-eventfd", percore.IOURing, true}, {"epoll", percore.Epoll, false}}
	for _, m := range modes {
		backend := m.backend
		b.Run(m.name+"/round-trip", func(b *testing.B) {
			rt := crossLoops(b, backend, m.eventfd)
			a, z := rt.Loops()[0], rt.Loops()[1]
			done := make(chan struct{}, 1)
			var chain func(left int)
			chain = func(left int) {
				a.Call(z, func() {}, func(error) {
					if left == 1 {
						done <- struct{}{}
						return
					}
					chain(left - 1)
				})
			}
			t0 := time.Now()
			for b.Loop() {
				if err := a.Post(func() { chain(per) }); err != nil {
					b.Fatal(err)
				}
				<-done
			}
			b.ReportMetric(float64(time.Since(t0).Nanoseconds())/float64(b.N*per), "ns/call")
		})
		b.Run(m.name+"/batch", func(b *testing.B) {
			rt := crossLoops(b, backend, m.eventfd)
			a, z := rt.Loops()[0], rt.Loops()[1]
			done := make(chan struct{}, 1)
			left := 0
			burst := func() {
				left = per
				for range per {
					a.Call(z, func() {}, func(error) {
						if left--; left == 0 {
							done <- struct{}{}
						}
					})
				}
			}
			t0 := time.Now()
			for b.Loop() {
				if err := a.Post(burst); err != nil {
					b.Fatal(err)
				}
				<-done
			}
			el := time.Since(t0)
			b.ReportMetric(float64(b.N*per)/el.Seconds(), "calls/s")
			b.ReportMetric(float64(el.Nanoseconds())/float64(b.N*per), "ns/call")
		})
	}
}

func crossLoops(b *testing.B, backend percore.Backend, eventfd bool) *percore.Runtime {
	cores := allCores(b)
	if len(cores) < 2 {
		b.Skip("needs two CPUs in the affinity mask: Config.Cores takes a CPU once")
	}
	return start(b, percore.EventfdWake(percore.Config{Backend: backend, Cores: []int{cores[0], cores[len(cores)-1]}}, eventfd), nil)
}
