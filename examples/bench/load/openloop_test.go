package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestScheduleSpreadsRequestsEvenly(t *testing.T) {
	start := time.Now()
	for _, tt := range []struct {
		conns int
		rate  float64
	}{{1, 1000}, {7, 10_000}, {50, 123_456}, {1000, 200_000}} {
		t.Run(fmt.Sprintf("%d conns at %.0f per s", tt.conns, tt.rate), func(t *testing.T) {
			s := newSchedule(Workload{Conns: tt.conns, Rate: tt.rate}, start)
			var all []time.Duration
			for id := range tt.conns {
				for k := range uint64(20) {
					all = append(all, s.due(id, k).Sub(start))
				}
			}
			slices.Sort(all)
			step := time.Duration(1e9 / tt.rate)
			for r, d := range all {
				want := time.Duration(float64(r) * 1e9 / tt.rate)
				if diff := d - want; diff < -time.Nanosecond || diff > time.Nanosecond {
					t.Fatalf("the %dth request over all connections is due at %v, want %v (one every %v)", r, d, want, step)
				}
			}
		})
	}
}

// modelConn is a connection in the pacer model: it counts its releases,
// sends what fell due while it has fewer than bound in flight, and checks
// what it sends against the schedule.
type modelConn struct {
	t        *testing.T
	s        schedule
	bl       backlog
	bound    int
	inFlight int
	clock    *time.Time
	seed     uint64
	releases []time.Time // the time of each release
}

func (c *modelConn) release() {
	c.bl.due++
	c.releases = append(c.releases, *c.clock)
	c.flush()
}

func (c *modelConn) flush() {
	for c.bl.waiting() > 0 && c.inFlight < c.bound {
		k := c.bl.sent
		due := c.bl.take(c.s)
		if want := c.s.due(c.bl.id, k); !due.Equal(want) {
			c.t.Fatalf("seed %d: conn %d request %d starts at %v, want its due time %v", c.seed, c.bl.id, k, due, want)
		}
		if due.After(*c.clock) {
			c.t.Fatalf("seed %d: conn %d request %d sent at %v, before it fell due at %v", c.seed, c.bl.id, k, *c.clock, due)
		}
		c.inFlight++
	}
}

// TestPacerModel drives a pacer with a fake clock that jumps by random
// amounts (now and then far ahead, past maxRelease requests), connections
// that answer at random, and checks after every step what must hold: every
// request due by now is released, none that is not, in order of due time,
// each once; each connection sends in order, at or after the due time, and
// never more than its bound in flight; the send lags and late sends the
// worker counted are exactly the oracle's. A third of the steps are pokes
// (a reply handler's run) at a turn's clock behind the clock: they read the
// clock once, and release as a run does, only if a request was due by the
// turn's clock, and release nothing otherwise.
func TestPacerModel(t *testing.T) {
	for i := range 30 {
		seed := uint64(time.Now().UnixNano()) + uint64(i)
		t.Run(fmt.Sprint(i), func(t *testing.T) { pacerModel(t, seed) })
	}
}

func pacerModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	conns := 1 + r.IntN(20)
	loops := 1 + r.IntN(3)
	loop := r.IntN(loops)
	rate := float64(1 + r.IntN(1_000_000))
	slack := time.Duration(r.IntN(2000)) * time.Microsecond
	start := time.Unix(1000, 0)
	clock := start
	s := newSchedule(Workload{Conns: conns, Rate: rate}, start)
	rec := &Recorder{Slack: slack}
	rec.setMeasuring(true)
	p := &pacer{s: s, w: rec.NewWorker()}
	var mine []*modelConn
	for id := loop; id < conns; id += loops {
		c := &modelConn{t: t, s: s, bl: backlog{id: id}, bound: 1 + r.IntN(4), clock: &clock, seed: seed}
		mine = append(mine, c)
		p.add(id, c)
	}
	if len(mine) == 0 {
		return
	}
	var wantLate, wantPaced uint64
	var lastDue time.Time
	interval := time.Duration(1e9 / rate)
	for step := range 100 {
		switch r.IntN(25) {
		case 0: // far ahead: more than maxRelease requests due
			clock = clock.Add(time.Duration(maxRelease+r.IntN(maxRelease)) * interval * time.Duration(loops))
		default:
			clock = clock.Add(time.Duration(r.Int64N(int64(20*interval + 1))))
		}
		before := make([]uint64, len(mine))
		total := 0
		for i, c := range mine {
			before[i] = c.bl.due
			total += int(c.bl.due)
		}
		// A run at the clock, or a poke from a reply handler: the turn's
		// clock, read as the kernel returned, is at or before the clock
		// now, and a poke reads the clock only if a request was due by
		// the turn's.
		var next time.Time
		poke := r.IntN(3) == 0
		if poke {
			turn := clock.Add(-time.Duration(r.Int64N(int64(3*interval + 1))))
			dueByTurn := false
			for _, c := range mine {
				dueByTurn = dueByTurn || !s.due(c.bl.id, c.bl.due).After(turn)
			}
			reads := 0
			p.poke(turn, func() time.Time { reads++; return clock })
			if want := map[bool]int{false: 0, true: 1}[dueByTurn]; reads != want {
				t.Fatalf("seed %d step %d: a poke read the clock %d times, want %d (a request due by the turn's clock: %v)", seed, step, reads, want, dueByTurn)
			}
			if !dueByTurn {
				for i, c := range mine {
					if c.bl.due != before[i] {
						t.Fatalf("seed %d step %d: a poke with nothing due by the turn's clock released conn %d's request", seed, step, c.bl.id)
					}
				}
				continue
			}
			next = p.next()
		} else {
			next = p.run(clock)
		}
		released := 0
		for i, c := range mine {
			released += int(c.bl.due - before[i])
			for k := before[i]; k < c.bl.due; k++ {
				due := s.due(c.bl.id, k)
				if due.After(clock) {
					t.Fatalf("seed %d step %d: conn %d request %d released at %v, before it fell due at %v", seed, step, c.bl.id, k, clock, due)
				}
				wantPaced++
				if clock.Sub(due) > slack {
					wantLate++
				}
			}
		}
		// Everything due is released, unless the run stopped at maxRelease.
		if released < maxRelease {
			for _, c := range mine {
				if due := s.due(c.bl.id, c.bl.due); !due.After(clock) {
					t.Fatalf("seed %d step %d: conn %d request %d due at %v is not released at %v", seed, step, c.bl.id, c.bl.due, due, clock)
				}
			}
			if !next.After(clock) || !next.Equal(p.next()) {
				t.Fatalf("seed %d step %d: run returned %v at %v, want the next due time %v", seed, step, next, clock, p.next())
			}
		} else if released != maxRelease || (!poke && !next.Equal(clock)) {
			t.Fatalf("seed %d step %d: a run released %d and returned %v, want at most %d and now (%v) when more wait",
				seed, step, released, next, maxRelease, clock)
		}
		// In order of due time, over all connections: the pacer's cursor
		// only moves forward.
		if d := p.next(); d.Before(lastDue) {
			t.Fatalf("seed %d step %d: next due %v went back from %v", seed, step, d, lastDue)
		}
		lastDue = p.next()
		// Random replies free slots; the connections send what waits.
		for _, c := range mine {
			if c.inFlight > c.bound {
				t.Fatalf("seed %d step %d: conn %d has %d in flight, bound %d", seed, step, c.bl.id, c.inFlight, c.bound)
			}
			c.inFlight -= r.IntN(c.inFlight + 1)
			c.flush()
		}
	}
	tot := rec.Totals()
	if tot.Paced != wantPaced || tot.LateSends != wantLate {
		t.Fatalf("seed %d: worker counted %d paced, %d late; the oracle %d and %d", seed, tot.Paced, tot.LateSends, wantPaced, wantLate)
	}
	if h := rec.SendLag(); h.Count() != wantPaced {
		t.Fatalf("seed %d: send-lag histogram holds %d values, want %d", seed, h.Count(), wantPaced)
	}
}

// countingEcho echoes requests of size bytes and counts them in n.
func countingEcho(size int, n *atomic.Int64) func(net.Conn) {
	return func(c net.Conn) {
		buf := make([]byte, size)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			n.Add(1)
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}
}

// TestOpenLoopEngines runs each engine in open loop against an echo server
// that counts what it gets, until some requests completed, and checks that
// every one was verified, counted by a pacer, and that the server never got
// more than the schedule had due: an open-loop client sends at its rate,
// never faster, whatever the server does.
func TestOpenLoopEngines(t *testing.T) {
	tests := []struct {
		name string
		wl   Workload
		unix bool
	}{
		{"one connection", Workload{Conns: 1, Bytes: 64, Rate: 1000, MaxInFlight: 4}, false},
		{"several connections", Workload{Conns: 5, Bytes: 64, Rate: 3000, MaxInFlight: 16}, false},
		{"churn", Workload{Conns: 3, Bytes: 64, Rate: 600, Reconnect: true}, false},
		{"unix socket", Workload{Conns: 3, Bytes: 64, Rate: 2000, MaxInFlight: 8}, true},
		{"batched waits", Workload{Conns: 5, Bytes: 64, Rate: 3000, MaxInFlight: 16, WaitBatch: 16, WaitMin: 50 * time.Microsecond}, false},
		{"polling", Workload{Conns: 5, Bytes: 64, Rate: 3000, MaxInFlight: 16, Spin: time.Millisecond}, false},
	}
	eachEngine(t, func(t *testing.T, eng Engine) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if tt.wl.WaitBatch > 0 {
					needBatchedWaits(t)
				}
				var got atomic.Int64
				handler := countingEcho(tt.wl.Bytes, &got)
				if tt.wl.Reconnect {
					handler = func(c net.Conn) {
						buf := make([]byte, tt.wl.Bytes)
						if _, err := io.ReadFull(c, buf); err == nil {
							got.Add(1)
							_, _ = c.Write(buf)
							_, _ = c.Read(buf) // until the client closes
						}
					}
				}
				wl := tt.wl
				if tt.unix {
					if _, ok := eng.(stdEngine); ok {
						t.Skip("the std engine dials TCP only")
					}
					wl.Addr = serveUnix(t, handler)
				} else {
					wl.Addr = pctest.Serve(t, handler).Addr()
				}
				began := time.Now()
				rec := runEngine(t, eng, wl, func(tot Totals) bool { return tot.Requests >= 100 })
				elapsed := time.Since(began)
				tot := rec.Totals()
				if tot.Errors != 0 || tot.Mismatches != 0 {
					t.Errorf("errors %d, mismatches %d, want none", tot.Errors, tot.Mismatches)
				}
				if tot.Paced < tot.Requests {
					t.Errorf("%d requests completed but the pacers released only %d", tot.Requests, tot.Paced)
				}
				if most := wl.Rate*elapsed.Seconds() + float64(wl.Conns); float64(got.Load()) > most {
					t.Errorf("the server got %d requests in %v, more than the %.0f the schedule had due", got.Load(), elapsed, most)
				}
				if n := rec.Latency().Count(); n != tot.Requests {
					t.Errorf("histogram counted %d requests, want %d", n, tot.Requests)
				}
				// A percore loop that polls at 3,000 requests/s over 5
				// connections finds nothing in most of its polls.
				if _, std := eng.(stdEngine); wl.Spin > 0 && !std && tot.SpinIdle <= 0 {
					t.Errorf("a polling loop counted %v idle", tot.SpinIdle)
				}
				if wl.Spin == 0 && tot.SpinIdle != 0 {
					t.Errorf("a loop that does not poll counted %v idle", tot.SpinIdle)
				}
			})
		}
	})
}

// needBatchedWaits skips the test where an io_uring loop cannot batch its
// waits (Config.WaitBatch needs kernel 6.12+; a host without io_uring runs
// the percore engines on epoll, which ignores it).
func needBatchedWaits(t *testing.T) {
	t.Helper()
	rt, err := percore.New(Workload{WaitBatch: 16, WaitMin: 50 * time.Microsecond}.loopConfig(percore.IOURing), nil)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("batched waits unavailable here: %v", err)
	}
	if err != nil && !errors.Is(err, percore.ErrUnavailable) {
		t.Fatal(err)
	}
	if err == nil {
		rt.Close()
	}
}

// serveUnix serves handler on a Unix socket in a temporary directory and
// returns its unix:// address.
func serveUnix(t *testing.T, handler func(net.Conn)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "echo.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { handler(c); _ = c.Close() })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "unix://" + path
}

// TestOpenLoopBoundsRequestsInFlight serves connections that read and never
// answer: each connection must send exactly MaxInFlight requests and keep
// the rest waiting, however many fall due.
func TestOpenLoopBoundsRequestsInFlight(t *testing.T) {
	const bound, conns, size = 3, 2, 64
	eachEngine(t, func(t *testing.T, eng Engine) {
		var mu sync.Mutex
		perConn := map[net.Conn]int{}
		srv := pctest.Serve(t, func(c net.Conn) {
			buf := make([]byte, size)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				mu.Lock()
				perConn[c]++
				mu.Unlock()
			}
		})
		wl := Workload{Addr: srv.Addr(), Conns: conns, Bytes: size, Rate: 2000, MaxInFlight: bound}
		received := func() (total, most int) {
			mu.Lock()
			defer mu.Unlock()
			for _, n := range perConn {
				total += n
				most = max(most, n)
			}
			return total, most
		}
		rec := runEngine(t, eng, wl, func(tot Totals) bool {
			total, _ := received()
			return tot.Paced >= 20*bound*conns && total >= bound*conns
		})
		if total, most := received(); total != bound*conns || most != bound {
			t.Errorf("the server got %d requests, at most %d on a connection; want %d on each of %d (the bound), with %d fallen due",
				total, most, bound, conns, rec.Totals().Paced)
		}
	})
}

// TestMain's helper process: with LOAD_TEST_ECHO_SERVER set, the test
// binary is an echo server (goroutine per connection) on 127.0.0.1:0 that
// prints its address and runs until its standard input closes, so that a
// test can stop and continue it with signals.
const echoServerEnv = "LOAD_TEST_ECHO_SERVER"
