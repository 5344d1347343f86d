package tlsconn_test

import (
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/percore/percore/runtime/tlsconn"
)

func readGOGC() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestStormGOGC: GOGC is StormGOGC from StormAt handshakes running at
// once until the pool is idle again, one record for the process: two
// pools in a storm keep the larger want until both are idle, a GOGC set by
// someone else during the storm is left alone, and a StormGOGC below
// GOGC changes nothing.
func TestStormGOGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	// Client sessions hold their places, waiting for a ServerHello.
	hold := func(p *tlsconn.Pool, n int) func() {
		ss := make([]*tlsconn.Session, n)
		for i := range ss {
			ss[i] = tlsconn.Client(clientConfig(t), tlsconn.Options{Pool: p})
		}
		return func() {
			before := p.Stats().Running
			for _, s := range ss {
				s.Close()
			}
			waitFor(t, "the handshakes to end", func() bool { return p.Stats().Running == before-n })
		}
	}
	want := func(step string, gogc int) {
		t.Helper()
		if got := readGOGC(); got != gogc {
			t.Fatalf("%s: GOGC %d, want %d", step, got, gogc)
		}
	}
	a := newPool(t, tlsconn.PoolConfig{StormGOGC: 400, StormAt: 2, Timeout: time.Hour})
	b := newPool(t, tlsconn.PoolConfig{StormGOGC: 800, StormAt: 2, Timeout: time.Hour})

	endA := hold(a, 1)
	want("below StormAt", 100)
	endA2 := hold(a, 1)
	want("at StormAt", 400)
	endB := hold(b, 2)
	want("two pools in a storm", 800)
	endB()
	want("the other pool idle", 400)
	endA()
	want("a storm still running", 400)
	endA2()
	want("every pool idle", 100)

	endA = hold(a, 2)
	want("a second storm", 400)
	debug.SetGCPercent(150) // the program's, during the storm
	endA()
	want("set by someone else during the storm", 150)

	debug.SetGCPercent(1000)
	endA = hold(a, 2)
	want("StormGOGC below GOGC", 1000)
	endA()
	want("after", 1000)

	debug.SetGCPercent(100)
	c := tlsconn.NewPool(tlsconn.PoolConfig{StormGOGC: 400, StormAt: 1, Timeout: time.Hour})
	tlsconn.Client(clientConfig(t), tlsconn.Options{Pool: c})
	want("a storm", 400)
	c.Close()
	want("the pool closed in a storm", 100)
}
