package runtime_test

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/tlsconn"
)

// Measurements of TLS under Conn (docs/performance.md, "TLS"): skipped
// unless their flag is given; run them alone, under the exclusive lock.
//
//	go test -run TestTLSIdleMemory ./runtime -args -tls.idle 5000 -tls.idle.mode percore [-tls.idle.return]
//	go test -run TestTLSIdleMemory ./runtime -args -tls.idle 5000 -tls.idle.mode nethttp
//	go test -run TestTLSStormLag ./runtime -args -tls.storm 10000

var (
	tlsIdleN      = flag.Int("tls.idle", 0, "TestTLSIdleMemory: idle TLS connections to hold (0 skips the measurement)")
	tlsIdleMode   = flag.String("tls.idle.mode", "percore", "TestTLSIdleMemory: percore (a tls:// listener, one loop), nethttp (net/http with crypto/tls) or exec (the server program -tls.idle.exec names, in a child process)")
	tlsIdleExec   = flag.String("tls.idle.exec", "", "TestTLSIdleMemory, -tls.idle.mode exec: the server program (examples/bench/baseline/tlsnbio)")
	tlsIdleRet    = flag.Bool("tls.idle.return", false, "TestTLSIdleMemory, percore: leave the return after a storm on (Config.ReturnAfterStorm's default) and read the RSS once it has fired on its own (percore.HeapReturns); false: the return off")
	tlsIdlePing   = flag.Bool("tls.idle.ping", false, "TestTLSIdleMemory, percore: ping a plain connection to the loop every millisecond from after the storm until the return has fired (without -tls.idle.return: for 2 s), and report its round trips and the collector's pauses over that window")
	tlsStormN     = flag.Int("tls.storm", 0, "TestTLSStormLag: full handshakes, 32 at a time from a child process (0 skips the measurement)")
	tlsIdleHeap   = flag.String("tls.idle.heap", "", "TestTLSIdleMemory: write a heap profile (in use, after the GC, MemProfileRate 512) to this file")
	tlsStormCPU   = flag.Int("tls.storm.cpu", -1, "TestTLSStormLag: the one loop's CPU (Config.Cores); -1: as the runtime chooses")
	tlsStormPlain = flag.Int("tls.storm.plain", 0, "TestTLSStormLag: the storm's client makes this many rounds of -tls.storm plain TCP connections (to the pinger's listener, echoed; each round closed before the next) instead of TLS ones: the same connects and requests with no handshake, the loop's lag floor on the host (0: TLS)")
	tlsStormSch   = flag.String("tls.storm.sched", "", "TestTLSStormLag: the handshake threads' Config.TLSPool.Sched: idle, nice or normal (empty: the default)")
)

// tlsIdleClientEnv makes the test binary the idle client: addr,N.
const tlsIdleClientEnv = "PERCORE_TLS_IDLE_CLIENT"

func init() {
	if v := os.Getenv(tlsIdleClientEnv); v != "" {
		addr, n, _ := strings.Cut(v, ",")
		n, rounds, plain := strings.Cut(n, ",plain,")
		count, _ := strconv.Atoi(n)
		if plain {
			r, _ := strconv.Atoi(rounds)
			os.Exit(pctest.IdlePlainClient(addr, count, max(1, r)))
		}
		os.Exit(pctest.IdleTLSClient(addr, count))
	}
}

type idleReplier struct{ opened atomic.Int64 }

func (h *idleReplier) OnData(c *percore.Conn, data []byte) {
	c.Write([]byte(pctest.IdleTLSReply))
	h.opened.Add(1)
}

// startIdleClient runs the idle client on addr (on the CPU that
// PERCORE_CLIENT_CPU names, with taskset) and returns its "ready" line.
func startIdleClient(t *testing.T, addr string, n int) string {
	t.Helper()
	return startClient(t, addr, strconv.Itoa(n))
}

// startClient runs the idle client with its PERCORE_TLS_IDLE_CLIENT
// count ("N", or "N,plain,ROUNDS" for IdlePlainClient).
func startClient(t *testing.T, addr, count string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if cpu := os.Getenv("PERCORE_CLIENT_CPU"); cpu != "" {
		cmd = exec.Command("taskset", "-c", cpu, os.Args[0], "-test.run=^$")
	}
	cmd.Env = append(os.Environ(), tlsIdleClientEnv+"="+addr+","+count,
		pctest.IdleTLSCAEnv+"="+pctest.IdleTLSCAValue(pctest.TestPKI().CA))
	_, out := startPiped(t, cmd)
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return strings.TrimSpace(line)
}

// startPiped starts cmd with its stdin and stdout piped to the test (its
// stderr the test's) and returns them; closing stdin at the test's end
// tells it to exit, and the test waits for it.
func startPiped(t testing.TB, cmd *exec.Cmd) (io.WriteCloser, *bufio.Reader) {
	t.Helper()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	return stdin, bufio.NewReader(stdout)
}

// TestTLSIdleMemory measures the process memory of idle TLS connections
// after their handshake and one request: RSS growth / N, the client in a
// child process.
func TestTLSIdleMemory(t *testing.T) {
	if *tlsIdleN == 0 {
		t.Skip("a measurement: -tls.idle N runs it")
	}
	n := *tlsIdleN
	if *tlsIdleHeap != "" {
		goruntime.MemProfileRate = 512 // before anything the connections allocate
	}
	cfg := pctest.TestPKI().ServerTLS()
	cfg.NextProtos = nil
	var addr, pingAddr string
	var live func() int
	rss := func() int64 { return pctest.VmRSSKiB(t) }
	gc, free := goruntime.GC, debug.FreeOSMemory
	switch *tlsIdleMode {
	case "percore":
		h := &idleReplier{}
		ret := -1 // off: the heap as GOGC leaves it
		if *tlsIdleRet {
			ret = 0 // the default, as a server gets it
		}
		if *tlsIdlePing {
			// The storm's handler, with a plain listener for the pinger.
			sh := &stormHandler{}
			rt := start(t, percore.Config{Listen: []string{"tls://127.0.0.1:0", "tcp://127.0.0.1:0"}, TLS: cfg, Backend: percore.IOURing, ReturnAfterStorm: ret}, sh)
			addr, pingAddr = rt.Listeners()[0].Addr.String(), rt.Listeners()[1].Addr.String()
			live = func() int { return int(sh.opened.Load()) }
			break
		}
		rt := start(t, percore.Config{Listen: []string{"tls://127.0.0.1:0"}, TLS: cfg, Backend: percore.IOURing, ReturnAfterStorm: ret}, h)
		addr = rt.Listeners()[0].Addr.String()
		live = func() int { return int(h.opened.Load()) }
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
		}
		go srv.ServeTLS(ln, "", "")
		t.Cleanup(func() { srv.Close() })
		addr = ln.Addr().String()
		live = func() int { return int(opened.Load()) }
	case "exec":
		p := startIdleServer(t, *tlsIdleExec)
		addr, live, rss, gc, free = p.addr, p.count, p.rss, p.gc, p.free
	default:
		t.Fatalf("unknown mode %q", *tlsIdleMode)
	}
	gc()
	free()
	var ms0 goruntime.MemStats
	goruntime.ReadMemStats(&ms0)
	rss0 := rss()
	returns0 := percore.HeapReturns()
	began := time.Now()
	line := startIdleClient(t, addr, n)
	var got, failed int
	fmt.Sscanf(line, "ready %d %d", &got, &failed)
	for live() < got {
		if time.Since(began) > 5*time.Minute {
			t.Fatalf("%d of %d connections seen", live(), got)
		}
		time.Sleep(10 * time.Millisecond) // polling a counter
	}
	seen := time.Now()
	var ping func() string
	pauses := []metrics.Sample{{Name: "/sched/pauses/total/gc:seconds"}}
	if pingAddr != "" {
		ping = startPinger(t, pingAddr)
		metrics.Read(pauses)
	}
	if *tlsIdleRet && *tlsIdleMode == "percore" {
		// What an operator sees: the RSS once the return has fired by
		// itself, after the storm settled (its counter, not a time).
		for percore.HeapReturns().Returns == returns0.Returns {
			if time.Since(seen) > 3*time.Minute {
				t.Fatal("no return 3 minutes after the storm")
			}
			time.Sleep(10 * time.Millisecond) // polling a counter
		}
	}
	waited := time.Since(seen)
	returns := percore.HeapReturns()
	var pinged string
	if ping != nil {
		if !*tlsIdleRet {
			time.Sleep(2 * time.Second) // the window without a return, not a synchronisation
		} else {
			time.Sleep(100 * time.Millisecond) // the pings right after the return
		}
		before := pauses[0].Value.Float64Histogram()
		b0 := append([]uint64(nil), before.Counts...)
		metrics.Read(pauses)
		after := pauses[0].Value.Float64Histogram()
		var n uint64
		var top float64
		for i, c := range after.Counts {
			if d := c - b0[i]; d > 0 {
				n += d
				top = after.Buckets[i+1]
			}
		}
		pinged = fmt.Sprintf(" gc_pauses=%d gc_pause_max<=%v %s", n, time.Duration(top*float64(time.Second)), ping())
	}
	rss1 := rss()
	gc()
	var ms1 goruntime.MemStats
	goruntime.ReadMemStats(&ms1)
	rss2 := rss()
	if *tlsIdleHeap != "" {
		f, err := os.Create(*tlsIdleHeap)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	free()
	rss3 := rss()
	per := func(kib int64) float64 { return float64(kib-rss0) * 1024 / float64(got) }
	heap := fmt.Sprintf("%.0f", float64(int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/float64(got))
	mode := *tlsIdleMode
	if mode == "exec" {
		heap = "-" // the child's heap is not this process's
		mode += ":" + filepath.Base(*tlsIdleExec)
	}
	fmt.Printf("tls idle mode=%s n=%d failed=%d return=%v returns=%d returned_bytes=%d return_took=%v waited=%v rss_per_conn=%.0f after_gc=%.0f after_free=%.0f heap_per_conn=%s took=%v%s\n",
		mode, got, failed, *tlsIdleRet, returns.Returns-returns0.Returns, returns.Bytes-returns0.Bytes, (returns.Took - returns0.Took).Round(time.Microsecond),
		waited.Round(time.Millisecond), per(rss1), per(rss2), per(rss3), heap, time.Since(began).Round(time.Millisecond), pinged)
}

// TestTLSStormLag measures the loop lag while a storm of full handshakes
// arrives (32 at a time, from a child process) on a loop that also serves
// an established connection's echo: the largest LagMax (the loop's signal
// over a window of about a second) seen during the storm.
func TestTLSStormLag(t *testing.T) {
	if *tlsStormN == 0 {
		t.Skip("a measurement: -tls.storm N runs it")
	}
	cfg := pctest.TestPKI().ServerTLS()
	cfg.NextProtos = nil
	var sched tlsconn.Sched
	switch *tlsStormSch {
	case "":
	case "idle":
		sched = tlsconn.SchedIdle
	case "nice":
		sched = tlsconn.SchedNice
	case "normal":
		sched = tlsconn.SchedNormal
	default:
		t.Fatalf("unknown -tls.storm.sched %q", *tlsStormSch)
	}
	var cores []int
	if *tlsStormCPU >= 0 {
		cores = []int{*tlsStormCPU}
	}
	rt := start(t, percore.Config{Listen: []string{"tls://127.0.0.1:0", "tcp://127.0.0.1:0"}, TLS: cfg, Cores: cores,
		TLSPool: tlsconn.PoolConfig{Sched: sched}, Backend: percore.IOURing}, &stormHandler{})
	addr := rt.Listeners()[0].Addr.String()
	ping := startPinger(t, rt.Listeners()[1].Addr.String())
	stop := make(chan struct{})
	maxLag := make(chan time.Duration, 1)
	go func() {
		var m time.Duration
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				maxLag <- max(m, rt.Stats().LagMax)
				return
			case <-tick.C:
				m = max(m, rt.Stats().LagMax)
			}
		}
	}()
	cycles := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(cycles)
	gc0 := cycles[0].Value.Uint64()
	began := time.Now()
	var line string
	if *tlsStormPlain > 0 {
		line = startClient(t, rt.Listeners()[1].Addr.String(), strconv.Itoa(*tlsStormN)+",plain,"+strconv.Itoa(*tlsStormPlain))
	} else {
		line = startIdleClient(t, addr, *tlsStormN)
	}
	took := time.Since(began)
	close(stop)
	lag := <-maxLag
	metrics.Read(cycles)
	gcs := cycles[0].Value.Uint64() - gc0
	pinged := ping()
	hwm := "?"
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				hwm = strings.Join(strings.Fields(v), "")
			}
		}
	}
	s := rt.Stats()
	fmt.Printf("tls storm n=%d plain_rounds=%d sched=%q cpus=%v gomaxprocs=%d took=%v gc_cycles=%d rss_peak=%s handshakes/s=%.0f conns/s=%.0f lag_max=%v lag_p99=%v handshakes=%d errors=%d timeouts=%d client=%q %s\n",
		*tlsStormN, *tlsStormPlain, *tlsStormSch, rt.Report().CPUs, goruntime.GOMAXPROCS(0), took.Round(time.Millisecond), gcs, hwm, float64(s.TLSHandshakes)/took.Seconds(), float64(*tlsStormN*max(1, *tlsStormPlain))/took.Seconds(), lag, s.LagP99,
		s.TLSHandshakes, s.TLSHandshakeErrors, s.TLSHandshakeTimeouts, line, pinged)
}
