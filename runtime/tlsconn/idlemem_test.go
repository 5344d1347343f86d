//go:build linux

package tlsconn_test

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/runtime/tlsconn"
)

var (
	idleN    = flag.Int("tlsconn.idle", 0, "TestIdleMemory: idle TLS connections to hold (0 skips the measurement)")
	idleMode = flag.String("tlsconn.idle.mode", "engine", "TestIdleMemory: engine (Sessions on one loop) or nethttp (net/http with crypto/tls, a goroutine per connection)")
)

const (
	idleClientEnv = "TLSCONN_IDLE_CLIENT" // addr,N: the child process that dials (pctest.IdleTLSClient)
	idleCAEnv     = pctest.IdleTLSCAEnv
)

const idleReply = pctest.IdleTLSReply

func init() {
	if v := os.Getenv(idleClientEnv); v != "" {
		addr, n, _ := strings.Cut(v, ",")
		count, _ := strconv.Atoi(n)
		os.Exit(pctest.IdleTLSClient(addr, count))
	}
}

// TestIdleMemory measures the process memory of idle TLS connections after
// their handshake and one request: RSS growth / N, with the client in a
// child process. Run it alone, under the exclusive lock:
//
//	go test -run TestIdleMemory -tlsconn.idle 19000 -tlsconn.idle.mode engine ./runtime/tlsconn
func TestIdleMemory(t *testing.T) {
	if *idleN == 0 {
		t.Skip("a measurement: -tlsconn.idle N runs it")
	}
	n := *idleN
	cfg := serverConfig(t)
	cfg.NextProtos = nil
	var addr string
	var live func() int
	switch *idleMode {
	case "engine":
		pool := newPool(t, tlsconn.PoolConfig{})
		l := newEloop(t, cfg, pool)
		l.onData = func(c *econn, p []byte) { c.write([]byte(idleReply)) }
		addr = l.addr
		live = func() int { est, _ := l.count(); return est }
	case "nethttp":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var opened atomic.Int64
		srv := &http.Server{
			Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
			TLSConfig: cfg,
			ConnState: func(_ net.Conn, s http.ConnState) {
				if s == http.StateIdle {
					opened.Add(1)
				}
			},
			TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}, // HTTP/1.1 only
		}
		go srv.ServeTLS(ln, "", "")
		t.Cleanup(func() { srv.Close() })
		addr = ln.Addr().String()
		live = func() int { return int(opened.Load()) }
	default:
		t.Fatalf("unknown mode %q", *idleMode)
	}
	runtime.GC()
	debug.FreeOSMemory()
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	rss0 := pctest.VmRSSKiB(t)

	cmd := clientCommand()
	cmd.Env = append(os.Environ(), idleClientEnv+"="+addr+","+strconv.Itoa(n),
		idleCAEnv+"="+base64.StdEncoding.EncodeToString(testPKI(t).caCert.Raw))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	var got, failed int
	fmt.Sscanf(line, "ready %d %d", &got, &failed)
	waitFor(t, "every connection idle on the server", func() bool { return live() >= got })
	took := time.Since(start)
	rss1 := pctest.VmRSSKiB(t)
	runtime.GC()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	rss2 := pctest.VmRSSKiB(t)
	debug.FreeOSMemory()
	rss3 := pctest.VmRSSKiB(t)
	per := func(kib int64) float64 { return float64(kib-rss0) * 1024 / float64(got) }
	t.Logf("mode %s: %d idle connections (%d failed) in %v", *idleMode, got, failed, took.Round(time.Millisecond))
	t.Logf("RSS before %d KiB; with them %d KiB: %.0f B/conn; after a GC %.0f B/conn; after FreeOSMemory %.0f B/conn",
		rss0, rss1, per(rss1), per(rss2), per(rss3))
	t.Logf("live heap %.0f B/conn, goroutines %d, GOGC default", float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/float64(got), runtime.NumGoroutine())
	fmt.Printf("idlemem mode=%s n=%d rss_per_conn=%.0f after_gc=%.0f after_free=%.0f heap_per_conn=%.0f\n",
		*idleMode, got, per(rss1), per(rss2), per(rss3), float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/float64(got))
}

var stormN = flag.Int("tlsconn.storm", 0, "TestStormTurns: concurrent handshakes (0 skips the measurement)")

// TestStormTurns measures the loop's turns while a storm of full handshakes
// arrives (client in a child process) and one established connection
// keeps exchanging: how long the longest turns took. A handshake runs on
// the pool, so a turn only moves bytes.
//
//	go test -run TestStormTurns ./runtime/tlsconn -args -tlsconn.storm 10000
func TestStormTurns(t *testing.T) {
	if *stormN == 0 {
		t.Skip("a measurement: -tlsconn.storm N runs it")
	}
	cfg := serverConfig(t)
	pool := newPool(t, tlsconn.PoolConfig{})
	l := newEloop(t, cfg, pool)
	l.onData = func(c *econn, p []byte) { c.write([]byte(idleReply)) }
	l.timing = true
	cmd := clientCommand()
	cmd.Env = append(os.Environ(), idleClientEnv+"="+l.addr+","+strconv.Itoa(*stormN),
		idleCAEnv+"="+base64.StdEncoding.EncodeToString(testPKI(t).caCert.Raw))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	took := time.Since(start)
	l.estMu.Lock()
	turns := append([]time.Duration(nil), l.turns...)
	l.estMu.Unlock()
	slices.Sort(turns)
	over := 0
	for _, d := range turns {
		if d > time.Millisecond {
			over++
		}
	}
	q := func(f float64) time.Duration { return turns[int(f*float64(len(turns)-1))] }
	st := pool.Stats()
	fmt.Printf("storm n=%d took=%v handshakes/s=%.0f turns=%d p50=%v p99=%v p99.9=%v max=%v over1ms=%d pool=%+v client=%q\n",
		*stormN, took.Round(time.Millisecond), float64(st.Succeeded)/took.Seconds(), len(turns), q(0.5), q(0.99), q(0.999), turns[len(turns)-1], over, st, strings.TrimSpace(line))
}

// clientCommand runs this test binary as the client, on the CPU that
// TLSCONN_CLIENT_CPU names (with taskset) when it is set.
func clientCommand() *exec.Cmd {
	if cpu := os.Getenv("TLSCONN_CLIENT_CPU"); cpu != "" {
		return exec.Command("taskset", "-c", cpu, os.Args[0], "-test.run=^$")
	}
	return exec.Command(os.Args[0], "-test.run=^$")
}
