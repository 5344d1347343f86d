//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/percore/percore/examples/bench/gwproto"
)

const secret = "wsload-test"

// fault is what the test gateway does wrong, to show that wsload sees it.
// A publish index of -1 is no fault.
type fault struct {
	drop, dup, swap, corrupt int // to the first subscriber, at this publish
	short                    bool
	echoCorrupt              bool

	// Seeded random faults: each delivery is dropped with probability
	// pDrop, else sent twice with probability pDup; the gateway counts
	// what it did (the oracle).
	seed        uint64
	pDrop, pDup float64
	drops, dups *atomic.Int64

	headTimeout time.Duration // net/http's ReadHeaderTimeout (0: none)
}

var clean = fault{drop: -1, dup: -1, swap: -1, corrupt: -1}

type tconn struct {
	c   *websocket.Conn
	wmu sync.Mutex
}

func (c *tconn) write(op int, p []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.c.WriteMessage(op, p)
}

// gateway starts a small gateway of the protocol (one topic's worth of
// it) that commits fault f, and returns its address.
func gateway(t *testing.T, f fault) string {
	t.Helper()
	var mu sync.Mutex
	var subs []*tconn
	var held []byte
	pubs := 0
	up := websocket.Upgrader{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := gwproto.Authorized(r, secret); !ok {
			gwproto.Refuse(w)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		c := &tconn{c: ws}
		go func() {
			defer func() {
				mu.Lock()
				for i, s := range subs {
					if s == c {
						subs = append(subs[:i], subs[i+1:]...)
						break
					}
				}
				mu.Unlock()
				ws.Close()
			}()
			for {
				op, p, err := ws.ReadMessage()
				if err != nil {
					return
				}
				if op == websocket.BinaryMessage {
					if f.echoCorrupt && len(p) > 20 {
						p[20] ^= 1
					}
					c.write(op, p)
					continue
				}
				cmd, err := gwproto.ParseCommand(p)
				if err == nil && cmd.Sub {
					mu.Lock()
					subs = append(subs, c)
					mu.Unlock()
				}
				c.write(websocket.TextMessage, gwproto.Reply(cmd, err))
			}
		}()
	})
	mux.HandleFunc("/publish", gwproto.PublishHandler(func(_ string, body []byte) int {
		mu.Lock()
		defer mu.Unlock()
		idx := pubs
		pubs++
		for i, s := range subs {
			p := body
			if f.drops != nil {
				rng := rand.New(rand.NewPCG(f.seed, uint64(idx)<<32|uint64(i)))
				switch x := rng.Float64(); {
				case x < f.pDrop:
					f.drops.Add(1)
					continue
				case x < f.pDrop+f.pDup:
					f.dups.Add(1)
					s.write(websocket.TextMessage, p)
				}
			}
			if i == 0 {
				switch idx {
				case f.drop:
					continue
				case f.swap:
					held = append([]byte(nil), body...)
					continue
				case f.corrupt:
					p = append([]byte(nil), body...)
					p[len(p)-1] = 'y'
				}
			}
			s.write(websocket.TextMessage, p)
			if i == 0 && idx == f.dup {
				s.write(websocket.TextMessage, p)
			}
			if i == 0 && idx == f.swap+1 && held != nil {
				s.write(websocket.TextMessage, held)
			}
		}
		if f.short && idx == 0 {
			return len(subs) - 1
		}
		return len(subs)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: f.headTimeout}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

func runLoad(t *testing.T, args ...string) (int, Result, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append(args, "-json", "-timeout", "60s"), &out, &errb)
	var res Result
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("%v: %s", err, out.String())
		}
	}
	return code, res, errb.String()
}

func TestModesClean(t *testing.T) {
	addr := gateway(t, clean)
	base := []string{"-addr", addr, "-secret", secret}
	for _, tc := range []struct {
		name string
		args []string
		ok   func(Result) bool
	}{
		{"idle", []string{"-mode", "idle", "-conns", "30", "-settle", "0"}, func(r Result) bool { return r.Checked == 30 }},
		{"fanout", []string{"-mode", "fanout", "-conns", "10", "-publishes", "20", "-interval", "1ms"}, func(r Result) bool {
			return r.Delivered == 200 && r.Publishes == 20 && r.LatMaxUs > 0 && r.LastMaxUs >= r.LatP50us
		}},
		{"echo", []string{"-mode", "echo", "-conns", "4", "-warmup", "0", "-seconds", "0.2s"}, func(r Result) bool { return r.Messages > 0 && r.RttP50us > 0 }},
		{"storm", []string{"-mode", "storm", "-conns", "40", "-live-before", "50ms"}, func(r Result) bool { return r.Checked == 40 && r.StormS > 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, res, stderr := runLoad(t, append(base, tc.args...)...)
			if code != 0 || res.Problem != "" || !tc.ok(res) {
				t.Fatalf("exit %d, result %+v\n%s", code, res, stderr)
			}
		})
	}
}

// TestSeesFaults: each fault of the gateway fails the run, counted where
// it belongs.
func TestSeesFaults(t *testing.T) {
	fan := []string{"-mode", "fanout", "-conns", "3", "-publishes", "5", "-interval", "1ms", "-drain", "300ms"}
	for _, tc := range []struct {
		name string
		f    func(*fault)
		args []string
		want func(Result) bool
	}{
		{"lost", func(f *fault) { f.drop = 2 }, fan, func(r Result) bool { return r.Lost == 1 && r.Reordered == 0 }},
		{"duplicated", func(f *fault) { f.dup = 1 }, fan, func(r Result) bool { return r.Duplicates == 1 && r.Lost == 0 }},
		{"reordered", func(f *fault) { f.swap = 1 }, fan, func(r Result) bool { return r.Reordered > 0 && r.Lost == 0 }},
		{"corrupted", func(f *fault) { f.corrupt = 3 }, fan, func(r Result) bool { return r.Mismatches == 1 && r.Lost == 1 }},
		{"short count", func(f *fault) { f.short = true }, fan, func(r Result) bool { return r.ShortCounts == 1 }},
		{"echo corrupted", func(f *fault) { f.echoCorrupt = true }, []string{"-mode", "echo", "-conns", "2", "-warmup", "0", "-seconds", "0.1s"},
			func(r Result) bool { return r.Mismatches > 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := clean
			tc.f(&f)
			addr := gateway(t, f)
			code, res, stderr := runLoad(t, append([]string{"-addr", addr, "-secret", secret}, tc.args...)...)
			if code != 1 || res.Problem == "" || !tc.want(res) {
				t.Fatalf("exit %d, want 1; result %+v\n%s", code, res, stderr)
			}
		})
	}
}

// TestRandomFaults: seeded random drops and duplicates over many
// subscribers and publishes; wsload's counts must be the gateway's own.
func TestRandomFaults(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		f := clean
		f.seed, f.pDrop, f.pDup = seed, 0.03, 0.03
		f.drops, f.dups = new(atomic.Int64), new(atomic.Int64)
		if seed == 6 {
			f.pDrop, f.pDup = 0, 0 // and one clean run
		}
		addr := gateway(t, f)
		code, res, stderr := runLoad(t, "-addr", addr, "-secret", secret, "-mode", "fanout", "-conns", "12",
			"-publishes", "40", "-interval", "1ms", "-drain", "300ms")
		drops, dups := uint64(f.drops.Load()), uint64(f.dups.Load())
		if res.Lost != drops || res.Duplicates != dups || res.Reordered != 0 || res.Mismatches != 0 ||
			res.Delivered != 12*40-drops {
			t.Errorf("seed %d: lost %d dup %d reordered %d delivered %d, the gateway dropped %d and duplicated %d\n%s",
				seed, res.Lost, res.Duplicates, res.Reordered, res.Delivered, drops, dups, stderr)
		}
		if want := map[bool]int{true: 0, false: 1}[drops+dups == 0]; code != want {
			t.Errorf("seed %d: exit %d, want %d", seed, code, want)
		}
	}
}

// TestHalfOpen: a gateway with a head timeout closes every half-open
// upgrade; one without leaves them open, and the run fails.
func TestHalfOpen(t *testing.T) {
	f := clean
	f.headTimeout = 100 * time.Millisecond
	addr := gateway(t, f)
	code, res, stderr := runLoad(t, "-addr", addr, "-secret", secret, "-mode", "halfopen", "-conns", "30", "-hold", "10s", "-settle", "0")
	if code != 0 || res.Checked != 30 || res.ClosedMaxUs <= 0 {
		t.Fatalf("with a head timeout: exit %d, %+v\n%s", code, res, stderr)
	}
	addr = gateway(t, clean)
	code, res, stderr = runLoad(t, "-addr", addr, "-secret", secret, "-mode", "halfopen", "-conns", "5", "-hold", "300ms", "-settle", "0")
	if code != 1 || res.Checked != 0 || res.Errors == 0 {
		t.Fatalf("without a head timeout: exit %d, want 1; %+v\n%s", code, res, stderr)
	}
}

func TestRefusedToken(t *testing.T) {
	addr := gateway(t, clean)
	code, _, stderr := runLoad(t, "-addr", addr, "-secret", "wrong", "-mode", "idle", "-conns", "2")
	if code != 2 || !strings.Contains(stderr, "401") {
		t.Fatalf("exit %d, want 2 with the 401:\n%s", code, stderr)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-mode", "pubsub"},
		{"-conns", "0"},
		{"-mode", "fanout", "-bytes", "20"},
		{"-mode", "echo", "-bytes", "8"},
		{"-interval", "0s"},
		{"-src-ips", "300"},
		{"-mode", "halfopen", "-hold", "0s"},
		{"-topic", "a b"},
		{"extra"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

func TestPayload(t *testing.T) {
	for _, size := range []int{48, 64, 1000} {
		b := make([]byte, size)
		for _, seq := range []int{0, 7, 123456789} {
			ts := time.Now().UnixNano()
			payload(b, seq, ts)
			gotSeq, gotT, ok := parsePayload(b, size)
			if !ok || gotSeq != seq || gotT != ts {
				t.Fatalf("size %d seq %d: parsed %d %d %v from %q", size, seq, gotSeq, gotT, ok, b)
			}
		}
		b[size-1] = 'y'
		if _, _, ok := parsePayload(b, size); ok {
			t.Errorf("a changed pad byte was not noticed")
		}
		if _, _, ok := parsePayload(b[:size-1], size); ok {
			t.Errorf("a short message was not noticed")
		}
	}
}

// TestMain runs wsload's main instead of the tests in a live client
// process that storm started from this test binary.
func TestMain(m *testing.M) {
	if os.Getenv(liveChildEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
