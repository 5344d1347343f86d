package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) {
	if os.Getenv(echoServerEnv) != "" {
		runEchoServerProcess()
		return
	}
	leakcheck.Main(m)
}

// testDeadline bounds every wait for a condition.
const testDeadline = 20 * time.Second

// echoHandler writes back everything it reads.
func echoHandler(c net.Conn) {
	_, _ = io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, make([]byte, 4096))
}

// corruptingHandler echoes requests of size bytes, but flips one bit of the
// third reply on every connection.
func corruptingHandler(size int) func(net.Conn) {
	return func(c net.Conn) {
		buf := make([]byte, size)
		for n := 1; ; n++ {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			if n == 3 {
				buf[size/2] ^= 0x10
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}
}

// engines are the engines the behaviour tests run under.
var engines = []struct {
	name string
	eng  Engine
}{
	{"std", stdEngine{}},
	{"percore", percoreEngine{}},
	{"percore-epoll", percoreEngine{backend: percore.Epoll}},
}

// eachEngine runs f once per engine, as a named subtest.
func eachEngine(t *testing.T, f func(t *testing.T, eng Engine)) {
	t.Helper()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) { f(t, e.eng) })
	}
}

// runEngine runs eng until cond holds for rec's totals (or the deadline
// passes, which fails the test), then stops it and waits for it to return.
func runEngine(t *testing.T, eng Engine, wl Workload, cond func(Totals) bool) *Recorder {
	t.Helper()
	rec := &Recorder{}
	rec.setMeasuring(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx, wl, rec) }()
	deadline := time.Now().Add(testDeadline)
	for !cond(rec.Totals()) {
		if time.Now().After(deadline) {
			cancel()
			select {
			case <-done:
			case <-time.After(testDeadline):
				t.Errorf("engine did not stop within %v of its context ending either", testDeadline)
			}
			t.Fatalf("condition not reached within %v; totals %+v", testDeadline, rec.Totals())
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not synchronising
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(testDeadline):
		t.Fatalf("engine did not stop within %v of its context ending", testDeadline)
	}
	return rec
}

func TestPayloadCheck(t *testing.T) {
	const size = 64
	p := newPayload(size, 3)
	good := p.newBuffer(1)
	p.stamp(good, 42)
	tests := []struct {
		name   string
		mutate func([]byte) []byte
		seq    uint64
		want   bool
	}{
		{"exact reply", func(b []byte) []byte { return b }, 42, true},
		{"stale reply", func(b []byte) []byte { return b }, 43, false},
		{"flipped sequence byte", func(b []byte) []byte { b[0] ^= 1; return b }, 42, false},
		{"flipped last byte", func(b []byte) []byte { b[size-1] ^= 0x80; return b }, 42, false},
		{"truncated", func(b []byte) []byte { return b[:size-1] }, 42, false},
		{"another connection's", func(_ []byte) []byte {
			o := newPayload(size, 4)
			b := o.newBuffer(1)
			o.stamp(b, 42)
			return b
		}, 42, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply := tt.mutate(bytes.Clone(good))
			if got := p.check(reply, tt.seq); got != tt.want {
				t.Errorf("check = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("every corrupted position is caught", func(t *testing.T) {
		for i := range size {
			reply := bytes.Clone(good)
			reply[i] ^= 0x04
			if p.check(reply, 42) {
				t.Fatalf("a flipped bit at byte %d went unnoticed", i)
			}
		}
	})
	t.Run("one-byte requests", func(t *testing.T) {
		p := newPayload(1, 0)
		b := p.newBuffer(1)
		p.stamp(b, 7)
		if !p.check(b, 7) || p.check(b, 8) {
			t.Errorf("one-byte payload: check(7)=%v check(8)=%v, want true, false", p.check(b, 7), p.check(b, 8))
		}
	})
}

func TestCorruptedEchoIsDetected(t *testing.T) {
	tests := []struct {
		name string
		wl   Workload
	}{
		{"closed loop", Workload{Conns: 2, Bytes: 64, Pipeline: 1}},
		{"pipelined", Workload{Conns: 2, Bytes: 64, Pipeline: 4}},
		{"churn", Workload{Conns: 1, Bytes: 64, Pipeline: 1, Reconnect: true}},
		{"large requests", Workload{Conns: 1, Bytes: 16 << 10, Pipeline: 1}},
	}
	eachEngine(t, func(t *testing.T, eng Engine) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				handler := corruptingHandler(tt.wl.Bytes)
				if tt.wl.Reconnect {
					// One request per connection: corrupt every third connection's reply.
					var n atomic.Int64
					handler = func(c net.Conn) {
						buf := make([]byte, tt.wl.Bytes)
						if _, err := io.ReadFull(c, buf); err != nil {
							return
						}
						if n.Add(1)%3 == 0 {
							buf[0] ^= 0x01
						}
						_, _ = c.Write(buf)
						_, _ = c.Read(buf) // until the client closes
					}
				}
				tt.wl.Addr = pctest.Serve(t, handler).Addr()
				rec := runEngine(t, eng, tt.wl, func(tot Totals) bool { return tot.Mismatches >= 3 })
				tot := rec.Totals()
				if tot.Requests == 0 {
					t.Errorf("no request verified: the intact replies must pass")
				}
				if got := rec.Latency().Count(); got != tot.Requests {
					t.Errorf("histogram counted %d requests, want the %d verified ones (mismatches are not requests)", got, tot.Requests)
				}
			})
		}
	})
}

func TestRunReportsMismatchInExitStatus(t *testing.T) {
	addr := pctest.Serve(t, corruptingHandler(64)).Addr()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-addr", addr, "-conns", "2", "-warmup", "0", "-seconds", "0.3", "-json"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr:\n%s", code, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not one JSON result: %v\n%s", err, stdout.String())
	}
	if res.Mismatches == 0 {
		t.Errorf("mismatches = 0 in %s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "differed") {
		t.Errorf("stderr does not say replies differed:\n%s", stderr.String())
	}
}

// inflightHandler answers requests of size bytes one at a time, and only
// when exactly want of them are outstanding (received, not answered), so
// a client that keeps fewer in flight stalls; it records the largest
// number ever outstanding, and closes enough once it has answered answers.
func inflightHandler(size, want, answers int, maxSeen *atomic.Int64, enough func()) func(net.Conn) {
	return func(c net.Conn) {
		var pending []byte
		buf := make([]byte, 64<<10)
		answered := 0
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			pending = append(pending, buf[:n]...)
			for {
				outstanding := len(pending) / size
				for {
					old := maxSeen.Load()
					if int64(outstanding) <= old || maxSeen.CompareAndSwap(old, int64(outstanding)) {
						break
					}
				}
				if outstanding < want {
					break
				}
				if _, err := c.Write(pending[:size]); err != nil {
					return
				}
				pending = pending[size:]
				if answered++; answered == answers {
					enough()
				}
			}
		}
	}
}

func TestPipelineKeepsExactlyNInFlight(t *testing.T) {
	tests := []struct {
		name     string
		pipeline int
		bytes    int
	}{
		{"one", 1, 64},
		{"four", 4, 64},
		{"sixteen", 16, 64},
		{"sixteen of 16 KiB", 16, 16 << 10},
		{"odd sizes", 5, 3},
	}
	eachEngine(t, func(t *testing.T, eng Engine) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				const conns, answers = 2, 200
				var maxSeen atomic.Int64
				var satisfied atomic.Int64
				addr := pctest.Serve(t, inflightHandler(tt.bytes, tt.pipeline, answers, &maxSeen, func() { satisfied.Add(1) })).Addr()
				wl := Workload{Addr: addr, Conns: conns, Bytes: tt.bytes, Pipeline: tt.pipeline}
				rec := runEngine(t, eng, wl, func(Totals) bool { return satisfied.Load() == conns })
				if got := maxSeen.Load(); got != int64(tt.pipeline) {
					t.Errorf("at most %d requests were outstanding, want exactly %d", got, tt.pipeline)
				}
				tot := rec.Totals()
				if tot.Errors != 0 || tot.Mismatches != 0 {
					t.Errorf("errors %d, mismatches %d, want none", tot.Errors, tot.Mismatches)
				}
				if tot.Requests < conns*answers {
					t.Errorf("%d requests verified, want at least %d", tot.Requests, conns*answers)
				}
			})
		}
	})
}

func TestChurnOpensAConnectionPerRequest(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		var accepted atomic.Int64
		addr := pctest.Serve(t, func(c net.Conn) {
			accepted.Add(1)
			echoHandler(c)
		}).Addr()
		wl := Workload{Addr: addr, Conns: 2, Bytes: 64, Pipeline: 1, Reconnect: true}
		rec := runEngine(t, eng, wl, func(tot Totals) bool { return tot.Requests >= 50 })
		tot := rec.Totals()
		if got := accepted.Load(); got < int64(tot.Requests) {
			t.Errorf("%d connections for %d requests, want one per request", got, tot.Requests)
		}
		if tot.Errors != 0 || tot.Mismatches != 0 {
			t.Errorf("errors %d, mismatches %d, want none", tot.Errors, tot.Mismatches)
		}
	})
}

// TestEngineDialsAHostName: -addr may name the host; the percore engine
// resolves it once, as a loop dials only literal addresses.
func TestEngineDialsAHostName(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		_, port, err := net.SplitHostPort(pctest.Serve(t, echoHandler).Addr())
		if err != nil {
			t.Fatal(err)
		}
		wl := Workload{Addr: net.JoinHostPort("localhost", port), Conns: 2, Bytes: 64, Pipeline: 1}
		rec := runEngine(t, eng, wl, func(tot Totals) bool { return tot.Requests >= 50 })
		if tot := rec.Totals(); tot.Errors != 0 || tot.Mismatches != 0 {
			t.Errorf("errors %d, mismatches %d, want none", tot.Errors, tot.Mismatches)
		}
	})
}

// TestPercoreEngineRejectsABadAddress: an address the engine cannot resolve
// ends Run at once with an error that names it, instead of a dial retried
// for ever.
func TestPercoreEngineRejectsABadAddress(t *testing.T) {
	tests := []struct {
		name, addr string
	}{
		{"no port", "127.0.0.1"},
		{"port out of range", "127.0.0.1:70000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
			defer cancel()
			wl := Workload{Addr: tt.addr, Conns: 1, Bytes: 64, Pipeline: 1}
			err := percoreEngine{}.Run(ctx, wl, &Recorder{})
			if err == nil || !strings.Contains(err.Error(), tt.addr) {
				t.Fatalf("Run with -addr %s: %v, want an error naming the address", tt.addr, err)
			}
			if ctx.Err() != nil {
				t.Fatalf("Run with -addr %s returned only when its context ended", tt.addr)
			}
		})
	}
}

func TestRecorderCountsOnlyTheWindow(t *testing.T) {
	rec := &Recorder{}
	w := rec.NewWorker()
	w.Done(time.Millisecond) // warm-up
	rec.setMeasuring(true)
	w.Done(2 * time.Millisecond)
	w.Done(3 * time.Millisecond)
	rec.setMeasuring(false)
	w.Done(time.Second) // after the window
	w.Error()
	rec.NewWorker().Mismatch()
	if got, want := rec.Totals(), (Totals{Requests: 4, Errors: 1, Mismatches: 1}); got != want {
		t.Errorf("Totals() = %+v, want %+v", got, want)
	}
	h := rec.Latency()
	if h.Count() != 2 || h.Max() != int64(3*time.Millisecond) {
		t.Errorf("window histogram has %d values up to %d ns, want 2 up to 3ms", h.Count(), h.Max())
	}
}

func TestMeasureAgainstEchoServer(t *testing.T) {
	tests := []struct {
		name string
		cfg  config
	}{
		{"closed loop with server sampling", config{Workload: Workload{Conns: 4, Bytes: 64, Pipeline: 1}, serverPID: os.Getpid()}},
		{"pipelined", config{Workload: Workload{Conns: 2, Bytes: 512, Pipeline: 8}}},
		{"churn", config{Workload: Workload{Conns: 2, Bytes: 64, Pipeline: 1, Reconnect: true}}},
		{"idle connections", config{Workload: Workload{Conns: 2, Bytes: 64, Pipeline: 1}, idle: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var accepted atomic.Int64
			tt.cfg.Addr = pctest.Serve(t, func(c net.Conn) {
				accepted.Add(1)
				echoHandler(c)
			}).Addr()
			tt.cfg.engine = "std"
			tt.cfg.warmup = 50 * time.Millisecond
			tt.cfg.window = 300 * time.Millisecond
			var progress bytes.Buffer
			res, err := measure(context.Background(), tt.cfg, stdEngine{}, &progress)
			if err != nil {
				t.Fatalf("measure: %v", err)
			}
			if p := res.problem(); p != "" {
				t.Fatalf("run failed: %s", p)
			}
			if res.RPS <= 0 || res.P50us <= 0 || res.P99us < res.P50us || res.MaxUs < res.P999us {
				t.Errorf("implausible figures: rps %v p50 %v p99 %v p99.9 %v max %v",
					res.RPS, res.P50us, res.P99us, res.P999us, res.MaxUs)
			}
			if res.IdleOpen != tt.cfg.idle {
				t.Errorf("%d idle connections open, want %d", res.IdleOpen, tt.cfg.idle)
			}
			if got := accepted.Load(); got < int64(tt.cfg.Conns+tt.cfg.idle) {
				t.Errorf("server accepted %d connections, want at least %d", got, tt.cfg.Conns+tt.cfg.idle)
			}
			if tt.cfg.serverPID != 0 && (res.ServerCPUs < 1 || res.ServerVmHWMKiB == 0 || res.ServerThreads == 0) {
				t.Errorf("server sampling missing: cpus %d, VmHWM %d KiB, threads %d",
					res.ServerCPUs, res.ServerVmHWMKiB, res.ServerThreads)
			}
		})
	}
}

func TestOpenIdleCountsFailures(t *testing.T) {
	conns, failed := openIdle(context.Background(), pctest.DeadAddr(t), 5)
	closeAll(conns)
	if len(conns) != 0 || failed != 5 {
		t.Errorf("openIdle to a closed port: %d open, %d failed, want 0 and 5", len(conns), failed)
	}
}

func TestHotPathAllocatesNothingPerRequest(t *testing.T) {
	tests := []struct {
		name string
		wl   Workload
	}{
		{"closed loop", Workload{Conns: 2, Bytes: 64, Pipeline: 1}},
		{"pipelined", Workload{Conns: 2, Bytes: 64, Pipeline: 8}},
	}
	eachEngine(t, func(t *testing.T, eng Engine) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tt.wl.Addr = pctest.Serve(t, echoHandler).Addr()
				var before, after runtime.MemStats
				var from uint64
				rec := runEngine(t, eng, tt.wl, func(tot Totals) bool {
					switch {
					case from == 0 && tot.Requests >= 500: // connected and warm
						runtime.ReadMemStats(&before)
						from = tot.Requests
					case from != 0 && tot.Requests >= from+20_000:
						runtime.ReadMemStats(&after)
						return true
					}
					return false
				})
				n := rec.Totals().Requests - from
				perReq := float64(after.Mallocs-before.Mallocs) / float64(n)
				// The process-wide count includes the test's own polling and the
				// server; a per-request allocation would show as >= 1.
				if perReq > 0.1 {
					t.Errorf("%.2f allocations per request (%d over %d requests), want none", perReq, after.Mallocs-before.Mallocs, n)
				}
			})
		}
	})
}
