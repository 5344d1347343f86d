//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	percore "github.com/percore/percore/runtime"
)

// udpEngines are the UDP engines, one per backend.
var udpEngines = []struct {
	name string
	eng  Engine
}{
	{"percore", udpEngine{}},
	{"percore-epoll", udpEngine{backend: percore.Epoll}},
}

// udpFaults says what a test UDP server does to the nth datagram (1-based)
// of each source; zero fields mean a plain echo.
type udpFaults struct {
	drop, duplicate, corrupt, delay int
}

// serveUDP runs a UDP echo server on 127.0.0.1:0 in a goroutine, applying
// f per source, and returns its address as load takes it. It stops at
// cleanup.
func serveUDP(t *testing.T, f udpFaults) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		c.Close()
		wg.Wait()
	})
	wg.Go(func() {
		counts := map[netip.AddrPort]int{}
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			counts[from]++
			b := buf[:n]
			switch counts[from] {
			case f.drop:
				continue
			case f.duplicate:
				_, _ = c.WriteToUDPAddrPort(b, from)
			case f.corrupt:
				b[n-1] ^= 0x40
			case f.delay:
				late := bytes.Clone(b)
				wg.Go(func() {
					select {
					case <-time.After(2 * udpTimeout): // past the timeout: the reply is late
						_, _ = c.WriteToUDPAddrPort(late, from)
					case <-stop:
					}
				})
				continue
			}
			_, _ = c.WriteToUDPAddrPort(b, from)
		}
	})
	return "udp://" + c.LocalAddr().String()
}

// A clean echo: every reply verified, nothing mismatched, and every
// datagram answered. A reply slower than udpTimeout is counted lost when
// its time is up and late when it comes: on a busy machine (make test runs
// packages side by side) the echo server's goroutine or the client's loop
// can stall past 200 ms, and once six replies of twelve in flight were
// counted lost so. The run therefore goes on until every datagram counted
// lost has come back late (within the test's deadline); one the server
// really dropped never comes back, and fails the test.
// TestUDPEngineCountsEveryFault checks that drops are counted as losses.
func TestUDPEngineEchoes(t *testing.T) {
	for _, e := range udpEngines {
		for _, tc := range []struct {
			name   string
			faults udpFaults
		}{
			{"clean", udpFaults{}},
			// What a stall looks like: a reply 400 ms late.
			{"a stall", udpFaults{delay: 100}},
		} {
			t.Run(e.name+"/"+tc.name, func(t *testing.T) {
				wl := Workload{Addr: serveUDP(t, tc.faults), Conns: 3, Bytes: 100, Pipeline: 4}
				stalls := uint64(0)
				if tc.faults.delay != 0 {
					stalls = uint64(wl.Conns) // one reply per source
				}
				rec := runEngine(t, e.eng, wl, func(tot Totals) bool {
					return tot.Requests >= 2000 && tot.Late >= stalls && tot.Lost == tot.Late
				})
				tot := rec.Totals()
				if tot.Errors != 0 || tot.Mismatches != 0 || tot.Lost != tot.Late {
					t.Errorf("totals %+v, want no errors or mismatches, and every datagram counted lost answered late", tot)
				}
				if tot.Lost > 0 {
					t.Logf("%d replies came after the %v loss timeout, all of them", tot.Lost, udpTimeout)
				}
			})
		}
	}
}

// Each fault is counted as what it is, and none stops the traffic: a
// dropped datagram is lost (and its slot goes on), a duplicate and a
// corrupted reply are mismatches (the corrupted one's request is then
// lost), and a reply delayed past the timeout is lost, then late.
func TestUDPEngineCountsEveryFault(t *testing.T) {
	const conns = 2
	for _, e := range udpEngines {
		t.Run(e.name, func(t *testing.T) {
			wl := Workload{Addr: serveUDP(t, udpFaults{drop: 5, duplicate: 10, corrupt: 15, delay: 20}), Conns: conns, Bytes: 64, Pipeline: 4}
			rec := runEngine(t, e.eng, wl, func(tot Totals) bool {
				return tot.Requests >= 500 && tot.Lost >= 3*conns && tot.Late >= conns && tot.Mismatches >= 2*conns
			})
			tot := rec.Totals()
			// Each fault happens once per connection. A reply that a busy
			// machine delays past the timeout adds one to lost and one to
			// late, so lost - late stays the drops and the corruptions.
			if tot.Lost-tot.Late != 2*conns || tot.Mismatches != 2*conns || tot.Errors != 0 {
				t.Errorf("totals %+v, want lost - late = %d, mismatches %d, errors 0", tot, 2*conns, 2*conns)
			}
		})
	}
}

func TestUDPEngineAllocatesNothingPerDatagram(t *testing.T) {
	for _, e := range udpEngines {
		t.Run(e.name, func(t *testing.T) {
			wl := Workload{Addr: serveUDP(t, udpFaults{}), Conns: 2, Bytes: 64, Pipeline: 8}
			var before, after runtime.MemStats
			var from uint64
			rec := runEngine(t, e.eng, wl, func(tot Totals) bool {
				switch {
				case from == 0 && tot.Requests >= 500:
					runtime.ReadMemStats(&before)
					from = tot.Requests
				case from != 0 && tot.Requests >= from+20_000:
					runtime.ReadMemStats(&after)
					return true
				}
				return false
			})
			n := rec.Totals().Requests - from
			// Process-wide, the test server and polling included: one
			// allocation per datagram would show as >= 1.
			if perReq := float64(after.Mallocs-before.Mallocs) / float64(n); perReq > 0.1 {
				t.Errorf("%.2f allocations per datagram (%d over %d), want none", perReq, after.Mallocs-before.Mallocs, n)
			}
		})
	}
}

// The whole program in UDP mode: exit 0 and the losses in the JSON.
func TestRunUDPMode(t *testing.T) {
	addr := serveUDP(t, udpFaults{})
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-addr", addr, "-conns", "2", "-pipeline", "2", "-warmup", "0", "-seconds", "0.3", "-json"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut.String())
	}
	var res map[string]any
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("result %q: %v", out.String(), err)
	}
	if res["lost"] != 0.0 || res["mismatches"] != 0.0 || res["requests"] == 0.0 {
		t.Errorf("result %s, want requests, no losses, no mismatches", out.String())
	}
}

func TestUDPModeRejects(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"churn", []string{"-addr", "udp://127.0.0.1:1", "-reconnect"}, "-reconnect"},
		{"idle", []string{"-addr", "udp://127.0.0.1:1", "-idle", "1"}, "-idle"},
		{"http", []string{"-addr", "udp://127.0.0.1:1", "-http", "/"}, "-http"},
		{"short datagrams", []string{"-addr", "udp://127.0.0.1:1", "-bytes", "4"}, "-bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseFlags(tt.args, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseFlags error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
	if _, err := udpEngineFor("std"); err == nil {
		t.Error(`udpEngineFor("std") succeeded`)
	}
	err := udpEngine{}.Run(context.Background(), Workload{Addr: "udp://127.0.0.1:0", Conns: 1, Bytes: 64, Pipeline: 1}, &Recorder{})
	if err == nil || !strings.Contains(err.Error(), "port") {
		t.Errorf("Run to port 0: %v, want an error about the port", err)
	}
}
