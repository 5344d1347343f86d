//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// runOpen runs eng in open loop until cond holds and checks what every
// open-loop run must show: no connection error, every completed request
// released by a pacer, and never more completed than the schedule had due.
func runOpen(t *testing.T, eng Engine, wl Workload, cond func(Totals) bool) Totals {
	t.Helper()
	began := time.Now()
	rec := runEngine(t, eng, wl, cond)
	elapsed := time.Since(began)
	tot := rec.Totals()
	if tot.Errors != 0 {
		t.Errorf("%d connection errors", tot.Errors)
	}
	if tot.Paced < tot.Requests {
		t.Errorf("%d requests completed, but the pacers released only %d", tot.Requests, tot.Paced)
	}
	if most := wl.Rate*elapsed.Seconds() + float64(wl.Conns); float64(tot.Requests) > most {
		t.Errorf("%d requests completed in %v, more than the %.0f the schedule had due", tot.Requests, elapsed, most)
	}
	return tot
}

func TestHTTPModeOpenLoop(t *testing.T) {
	for _, tc := range []struct {
		name string
		eng  httpEngine
	}{{"percore", httpEngine{}}, {"percore-epoll", httpEngine{backend: percore.Epoll}}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.eng.backend != percore.Epoll {
				pctest.NeedURing(t)
			}
			t.Run("honest server", func(t *testing.T) {
				var maxSeen atomic.Int64
				addr := pctest.Serve(t, plaintextHandler(0, 1, &maxSeen)).Addr()
				eng := tc.eng
				eng.mode = httpMode{Path: "/plaintext", Body: "Hello, World!", IsSet: true}
				wl := Workload{Addr: addr, Conns: 3, Rate: 3000, MaxInFlight: 4}
				if tot := runOpen(t, eng, wl, func(tot Totals) bool { return tot.Requests >= 300 }); tot.Mismatches != 0 {
					t.Errorf("%d mismatches against an honest server", tot.Mismatches)
				}
			})
			t.Run("wrong body", func(t *testing.T) {
				var maxSeen atomic.Int64
				addr := pctest.Serve(t, plaintextHandler(3, 1, &maxSeen)).Addr()
				eng := tc.eng
				eng.mode = httpMode{Path: "/plaintext", Body: "Hello, World!", IsSet: true}
				wl := Workload{Addr: addr, Conns: 2, Rate: 2000, MaxInFlight: 4}
				runOpen(t, eng, wl, func(tot Totals) bool { return tot.Mismatches >= 2 && tot.Requests >= 20 })
			})
		})
	}
}

func TestRespEngineOpenLoop(t *testing.T) {
	srv := pctest.Serve(t, respModel(false))
	for _, tc := range []struct {
		name string
		eng  respEngine
	}{{"io_uring", respEngine{}}, {"epoll", respEngine{backend: percore.Epoll}}} {
		t.Run(tc.name, func(t *testing.T) {
			eng := tc.eng
			eng.opts = respOptions{getPercent: 60, keys: 50}
			wl := Workload{Addr: srv.Addr(), Conns: 4, Bytes: 40, Rate: 4000, MaxInFlight: 8}
			if tot := runOpen(t, eng, wl, func(tot Totals) bool { return tot.Requests >= 400 }); tot.Mismatches != 0 {
				t.Errorf("%d mismatches against an honest server", tot.Mismatches)
			}
		})
	}
}

func TestUDPEngineOpenLoop(t *testing.T) {
	const conns = 2
	for _, e := range udpEngines {
		t.Run(e.name, func(t *testing.T) {
			t.Run("echo", func(t *testing.T) {
				wl := Workload{Addr: serveUDP(t, udpFaults{}), Conns: conns, Bytes: 100, Rate: 3000, MaxInFlight: 8}
				if tot := runOpen(t, e.eng, wl, func(tot Totals) bool { return tot.Requests >= 300 }); tot.Mismatches != 0 || tot.Lost != 0 {
					t.Errorf("totals %+v, want no mismatch and no loss", tot)
				}
			})
			// A dropped datagram holds its slot until it counts as lost;
			// then the slot takes the requests that waited, and the
			// traffic goes on well past the slot's next turn.
			t.Run("a datagram dropped", func(t *testing.T) {
				wl := Workload{Addr: serveUDP(t, udpFaults{drop: 5}), Conns: conns, Bytes: 64, Rate: 2000, MaxInFlight: 4}
				tot := runOpen(t, e.eng, wl, func(tot Totals) bool { return tot.Lost >= conns && tot.Requests >= 200 })
				if tot.Lost != conns || tot.Mismatches != 0 {
					t.Errorf("totals %+v, want %d lost and no mismatch", tot, conns)
				}
			})
		})
	}
}

// TestRunOpenLoopJSON checks the open-loop fields of -json.
func TestRunOpenLoopJSON(t *testing.T) {
	addr := pctest.Serve(t, echoHandler).Addr()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-addr", addr, "-engine", "percore-epoll", "-conns", "2", "-rate", "500",
		"-max-inflight", "3", "-late", "50ms", "-max-late", "1", "-warmup", "0.05", "-seconds", "0.3", "-json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
	}
	var res map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"p50_us", "p90_us", "p99_us", "p999_us", "max_us", "rps", "rate", "late_sends", "paced", "send_lag_p99_us"} {
		if _, ok := res[k]; !ok {
			t.Errorf("-json lacks %q: %s", k, stdout.String())
		}
	}
	if res["rate"] != 500.0 || res["max_inflight"] != 3.0 || res["late_slack_us"] != 50000.0 || res["paced"].(float64) == 0 {
		t.Errorf("rate %v, max_inflight %v, late_slack_us %v, paced %v; want 500, 3, 50000 and some", res["rate"], res["max_inflight"], res["late_slack_us"], res["paced"])
	}
}
