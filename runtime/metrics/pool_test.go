package metrics_test

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/metrics"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// roundTrip leases a connection from local on loop, sends a line, waits
// for the echo and puts the connection back.
func roundTrip(t *testing.T, loop *percore.Loop, local *pool.Local[*upstream.Conn]) {
	t.Helper()
	done := make(chan error, 1)
	pctest.OnLoop(t, loop, func() {
		local.Get(func(ls pool.Lease[*upstream.Conn], err error) {
			if err != nil {
				done <- err
				return
			}
			uc := ls.Conn()
			var buf []byte
			uc.Receive(func(data []byte) {
				if buf = append(buf, data...); bytes.IndexByte(buf, '\n') >= 0 {
					uc.Receive(nil, nil)
					local.Put(ls)
					done <- nil
				}
			}, func(err error) { local.Put(ls); done <- err })
			uc.Write([]byte("ping\n"))
		})
	})
	if err := pctest.Recv(t, done, "reply"); err != nil {
		t.Fatal(err)
	}
}

func TestPoolCollector(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := pctest.Serve(t, pctest.LineEcho)
		rt := start(t, b)
		m, err := upstream.New(up.Addr())
		if err != nil {
			t.Fatal(err)
		}
		p, err := pool.New[*upstream.Conn](m, pool.Config{MaxSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		c := metrics.NewPool(p, metrics.PoolConfig{Name: "upstream"})

		loop := rt.Loops()[0]
		var local *pool.Local[*upstream.Conn]
		pctest.OnLoop(t, loop, func() { local = p.Local(loop) })
		roundTrip(t, loop, local) // a new connection: the get waited for it
		roundTrip(t, loop, local) // the idle one

		// The loop publishes at the end of each turn: the second get's, then
		// the one of the Put that idles the connection again.
		var mfs map[string]*dto.MetricFamily
		pctest.WaitFor(t, "the loop to publish the second get and its put", func() bool {
			mfs = gather(t, c)
			return sum(mfs, "percore_pool_gets_total", map[string]string{"result": "direct"}) == 1 &&
				sum(mfs, "percore_pool_idle_connections", nil) == 1
		})
		for _, name := range []string{"percore_pool_gets_total", "percore_pool_get_wait_seconds_total",
			"percore_pool_connections_created_total", "percore_pool_connect_errors_total",
			"percore_pool_connections_closed_total"} {
			if mfs[name].GetType().String() != "COUNTER" {
				t.Errorf("%s is a %v, want a counter", name, mfs[name].GetType())
			}
		}
		for _, name := range []string{"percore_pool_loops", "percore_pool_connections",
			"percore_pool_connecting", "percore_pool_idle_connections", "percore_pool_waiters"} {
			if mfs[name].GetType().String() != "GAUGE" {
				t.Errorf("%s is a %v, want a gauge", name, mfs[name].GetType())
			}
		}
		for _, tc := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{"percore_pool_gets_total", map[string]string{"result": "waited", "pool": "upstream"}, 1},
			{"percore_pool_gets_total", map[string]string{"result": "direct"}, 1},
			{"percore_pool_gets_total", map[string]string{"result": "timed_out"}, 0},
			{"percore_pool_connections_created_total", nil, 1},
			{"percore_pool_connections_closed_total", nil, 0},
			{"percore_pool_connections", nil, 1},
			{"percore_pool_idle_connections", nil, 1},
			{"percore_pool_loops", nil, 1},
		} {
			if got := sum(mfs, tc.name, tc.labels); got != tc.want {
				t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
			}
		}

		// Closing the pool closes its connection: the conservation law
		// stays visible, created = closed + live.
		p.Close()
		pctest.WaitFor(t, "the pool's connection to close", func() bool {
			mfs = gather(t, c)
			return sum(mfs, "percore_pool_connections_closed_total", map[string]string{"cause": "pool_closed"}) == 1
		})
		created := sum(mfs, "percore_pool_connections_created_total", nil)
		closed := sum(mfs, "percore_pool_connections_closed_total", nil)
		live := sum(mfs, "percore_pool_connections", nil)
		if created != closed+live {
			t.Errorf("created %v != closed %v + live %v", created, closed, live)
		}

		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	})
}
