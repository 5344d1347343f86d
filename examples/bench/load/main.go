//go:build linux

// Command load is a load generator for echo servers (and, with
// -http PATH, for HTTP/1.1 servers: engine_http.go; with -engine resp, for
// Redis servers: engine_resp.go; with -addr udp://host:port, for UDP echo
// servers: engine_udp.go; with -addr unix:///path, over a Unix socket). In
// closed loop (the default) each connection keeps a fixed number of requests
// in flight; in open loop (-rate N) requests fall due on a fixed schedule, N
// per second, and each one's latency runs from the time it fell due
// (openloop.go). Either way it verifies every reply byte for byte and
// records its latency.
//
// It reports requests per second over a measurement window that follows a
// warm-up, latency percentiles from internal/hist (HdrHistogram's three
// significant digits), errors, mismatched replies, and its own CPU time per request. Given
// -server-pid it also samples the server process over the same window: CPU
// per request, context switches per request, busy share of its CPUs, peak
// and current resident memory, and with -perf its system calls per request.
// It also reports what stalled either side without showing as its CPU: the
// hypervisor's steal on the generator's and the server's own CPUs and their
// threads' run-queue wait (sched.go).
//
//	load -addr 127.0.0.1:7000 -conns 50 -bytes 64 -warmup 1 -seconds 5
//	load -addr 127.0.0.1:7000 -conns 1000 -json -server-pid 1234
//	load -conns 50 -idle 10000        # 10,000 extra connections, held silent
//	load -conns 50 -pipeline 16       # 16 requests in flight per connection
//	load -conns 50 -reconnect         # a new connection per request
//	load -conns 50 -tls [-reconnect]  # TLS (a TLS echo server: examples/echo -tls-cert -tls-key)
//	load -addr udp://127.0.0.1:7001 -conns 4 -pipeline 16   # UDP datagrams
//	load -conns 50 -rate 20000        # open loop: 20,000 requests/s
//	load -conns 50 -rates 10%,50%,80%,90%,100%   # closed-loop capacity, then a sweep
//	load -conns 50 -rate 60000 -spin 1ms         # open loop, the loop polling instead of sleeping
//
// A progress line goes to stderr every second; the result goes to stdout, as
// one JSON object with -json (with -rates, one per line: the capacity run,
// then each step). The exit status is 0 for a clean run, 1 when any request
// failed, any reply differed from its request, no request completed in the
// window, or (open loop) the generator fell behind its own schedule, and 2
// when the run could not start. In a sweep, 1 when any step was not clean.
//
// The generator is as cheap per request as the engine it runs on: -engine
// std (one goroutine per connection over the standard library's net) costs
// about as much CPU per request as a fast server, so on a small machine the
// fastest servers make it the bottleneck; the Client busy figure says when.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// config is the parsed command line.
type config struct {
	Workload
	engine    string
	warmup    time.Duration
	window    time.Duration
	idle      int
	cores     string
	json      bool
	serverPID int
	perf      bool
	http      httpMode    // -http: the HTTP/1.1 workload (engine_http.go)
	resp      respOptions // -engine resp: engine_resp.go
	slack     time.Duration
	maxLate   float64
	rates     []rateStep // -rates: the sweep (sweep.go)
	capacity  float64    // -capacity: what -rates percentages are of; 0: measure it
	onWindow  func()     // tests: called as the measurement window opens
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main with its inputs and outputs passed in; a signal ends ctx. It
// returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "load: %v\n", err)
		return 2
	}
	if cfg.cores != "" {
		if err := pinProcess(cfg.cores); err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return 2
		}
	}
	eng, err := chooseEngine(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "load: %v\n", err)
		return 2
	}
	if len(cfg.rates) > 0 {
		return sweep(ctx, cfg, eng, stdout, stderr)
	}
	res, err := measure(ctx, cfg, eng, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "load: %v\n", err)
		return 2
	}
	res.Problem = res.problem()
	if cfg.json {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "load: %v\n", err)
			return 2
		}
	} else {
		res.writeText(stdout)
	}
	if res.Problem != "" {
		fmt.Fprintf(stderr, "load: %s\n", res.Problem)
		return 1
	}
	return 0
}

// chooseEngine returns the engine for cfg's -engine, -addr and -http.
func chooseEngine(cfg config) (Engine, error) {
	switch {
	case isUDP(cfg.Addr):
		return udpEngineFor(cfg.engine)
	case cfg.http.Path != "":
		return httpEngineFor(cfg.engine, cfg.http)
	}
	return engineFor(cfg)
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:7000", "server address: host:port (TCP), unix:///path, or udp://host:port")
	fs.IntVar(&cfg.Conns, "conns", 50, "connections sending requests")
	fs.IntVar(&cfg.Bytes, "bytes", 64, "request (and reply) size in bytes")
	fs.IntVar(&cfg.Pipeline, "pipeline", 1, "requests in flight per connection")
	fs.BoolVar(&cfg.Reconnect, "reconnect", false, "open a new connection for every request (churn)")
	fs.BoolVar(&cfg.TLS, "tls", false, "TLS to the server (percore engines; unverified, full handshakes: with -reconnect, new TLS connections per second)")
	fs.StringVar(&cfg.engine, "engine", "percore", "engine that generates the traffic: "+engineNames)
	warmup := fs.Float64("warmup", 1, "seconds of traffic before the measurement window")
	window := fs.Float64("seconds", 5, "seconds in the measurement window")
	fs.IntVar(&cfg.idle, "idle", 0, "extra connections opened first and held silent for the whole run")
	fs.StringVar(&cfg.cores, "cores", "", "pin the generator to these CPUs (\"1\", \"2-3\"); bench.sh uses taskset instead")
	fs.BoolVar(&cfg.json, "json", false, "print the result as one JSON object")
	fs.IntVar(&cfg.serverPID, "server-pid", 0, "sample this server process over the window")
	fs.BoolVar(&cfg.perf, "perf", false, "count the server's system calls with perf stat (needs -server-pid)")
	fs.StringVar(&cfg.http.Path, "http", "", "HTTP/1.1 mode: GET this path (\"/plaintext\") on keep-alive connections, -pipeline in flight, checking status 200 (-bytes does not apply)")
	fs.Func("http-body", "with -http: the body every response must have, byte for byte", func(v string) error {
		cfg.http.Body, cfg.http.IsSet = v, true
		return nil
	})
	addRespFlags(fs, &cfg.resp)
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: this many requests per second over all connections, each due at a fixed time, latency from that time (0: closed loop)")
	fs.Func("rates", "open-loop sweep: a comma-separated list of rates, each requests/s or a percentage of the closed-loop capacity (\"10%,50%,80%,90%,100%\"), measured first unless -capacity gives it", func(v string) error {
		steps, err := parseRates(v)
		cfg.rates = steps
		return err
	})
	fs.Float64Var(&cfg.capacity, "capacity", 0, "with -rates: the closed-loop capacity, requests/s, that percentages are of (0: measure it first)")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", 16, "open loop: most requests in flight on one connection; more wait in the client, their latency counted from their due time")
	fs.DurationVar(&cfg.Quantum, "pace", 20*time.Microsecond, "open loop: a percore loop's pacer wakes at most this often and sends what fell due meanwhile together (each request's latency still counts from its due time)")
	fs.DurationVar(&cfg.Spin, "spin", 0, "open loop: a percore loop polls the kernel instead of sleeping while its next request falls due within this (0: sleeps until then); its CPU then counts the polling (client_spin_idle_pct)")
	fs.IntVar(&cfg.WaitBatch, "wait-batch", 0, "the percore engines on io_uring: a loop waits for up to this many completions per wake-up, at most -wait-min longer (runtime Config.WaitBatch; 0: off, wake on each)")
	fs.DurationVar(&cfg.WaitMin, "wait-min", 0, "with -wait-batch: the longest extra wait (runtime Config.WaitMin; 0: its default)")
	fs.DurationVar(&cfg.slack, "late", time.Millisecond, "open loop: a request released by the generator more than this after its due time is a late send")
	fs.Float64Var(&cfg.maxLate, "max-late", 0.001, "open loop: the fraction of late sends above which a run is invalid (the generator fell behind its schedule)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.warmup = time.Duration(*warmup * float64(time.Second))
	cfg.window = time.Duration(*window * float64(time.Second))
	switch {
	case cfg.Conns < 1:
		return cfg, errors.New("-conns must be at least 1")
	case cfg.Bytes < 1:
		return cfg, errors.New("-bytes must be at least 1")
	case cfg.Pipeline < 1:
		return cfg, errors.New("-pipeline must be at least 1")
	case cfg.TLS && (!strings.HasPrefix(cfg.engine, "percore") || cfg.http.Path != "" || isUDP(cfg.Addr)):
		return cfg, errors.New("-tls runs on the percore engines' echo workload (Loop.DialTLS)")
	case cfg.Reconnect && cfg.Pipeline > 1:
		return cfg, errors.New("-reconnect sends one request per connection: it cannot be combined with -pipeline")
	case cfg.warmup < 0 || cfg.window <= 0:
		return cfg, errors.New("-warmup must be >= 0 and -seconds > 0")
	case cfg.idle < 0:
		return cfg, errors.New("-idle must be >= 0")
	case cfg.perf && cfg.serverPID == 0:
		return cfg, errors.New("-perf needs -server-pid")
	case isUDP(cfg.Addr) && (cfg.Reconnect || cfg.idle > 0 || cfg.http.Path != ""):
		return cfg, errors.New("-addr udp:// sends datagrams: -reconnect, -idle and -http do not apply")
	case isUDP(cfg.Addr) && cfg.Bytes < seqBytes:
		return cfg, fmt.Errorf("-addr udp:// needs -bytes of at least %d (the sequence number)", seqBytes)
	case cfg.Rate < 0 || math.IsInf(cfg.Rate, 0) || math.IsNaN(cfg.Rate):
		return cfg, errors.New("-rate must be a number of requests per second above 0 (or 0 for closed loop)")
	case cfg.Rate > 0 && len(cfg.rates) > 0:
		return cfg, errors.New("-rate and -rates do not go together: -rates runs each of its rates")
	case (cfg.Rate > 0 || len(cfg.rates) > 0) && cfg.Pipeline > 1:
		return cfg, errors.New("-pipeline is the closed loop's depth: in open loop (-rate, -rates) -max-inflight bounds the requests in flight")
	case cfg.Quantum < 0 || cfg.Spin < 0:
		return cfg, errors.New("-pace and -spin must be >= 0")
	case cfg.WaitBatch < 0 || cfg.WaitMin < 0:
		return cfg, errors.New("-wait-batch and -wait-min must be >= 0")
	case cfg.MaxInFlight < 1:
		return cfg, errors.New("-max-inflight must be at least 1")
	case cfg.slack < 0 || cfg.maxLate < 0 || cfg.maxLate > 1:
		return cfg, errors.New("-late must be >= 0 and -max-late in 0..1")
	case cfg.capacity < 0 || (cfg.capacity > 0 && len(cfg.rates) == 0):
		return cfg, errors.New("-capacity must be above 0 and goes with -rates")
	}
	return cfg, nil
}

// measure runs one load test: it opens the idle connections, starts the
// engine, waits out the warm-up, measures over the window, then stops the
// engine and closes everything. Progress lines go to progress.
func measure(ctx context.Context, cfg config, eng Engine, progress io.Writer) (*Result, error) {
	res := &Result{
		Engine: cfg.engine, Addr: cfg.Addr, Conns: cfg.Conns, Bytes: cfg.Bytes,
		Pipeline: cfg.Pipeline, Reconnect: cfg.Reconnect, Idle: cfg.idle,
		WarmupS: cfg.warmup.Seconds(), ClientCPUs: cpuCount(0), GOMAXPROCS: runtime.GOMAXPROCS(0),
		Rate: cfg.Rate, maxLate: cfg.maxLate, slack: cfg.slack,
	}
	if cfg.open() {
		res.Pipeline = 0
		res.MaxInFlight = cfg.Workload.depth()
	}
	if cfg.http.Path != "" {
		res.Engine += " (http GET " + cfg.http.Path + ")"
	}
	var serverCPUs []int
	if cfg.serverPID != 0 {
		if _, err := sampleProc(cfg.serverPID); err != nil {
			return nil, fmt.Errorf("server process: %w", err)
		}
		res.ServerPID = cfg.serverPID
		res.ServerCPUs = cpuCount(cfg.serverPID)
		serverCPUs = affinity(cfg.serverPID)
	}

	idle, idleErrors := openIdle(ctx, cfg.Addr, cfg.idle)
	defer closeAll(idle)
	res.IdleOpen = len(idle)

	rec := &Recorder{Slack: cfg.slack}
	runCtx, stopEngine := context.WithCancel(ctx)
	defer stopEngine()
	engineDone := make(chan error, 1)
	go func() { engineDone <- eng.Run(runCtx, cfg.Workload, rec) }()

	start := time.Now()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	var last Totals
	lastAt := start
	tick := func(phase string) {
		now := time.Now()
		t := rec.Totals()
		rate := float64(t.Requests-last.Requests) / now.Sub(lastAt).Seconds()
		fmt.Fprintf(progress, "load: %5.1fs %-7s %9.0f req/s  errors %d  mismatches %d\n",
			now.Sub(start).Seconds(), phase, rate, t.Errors+idleErrors, t.Mismatches)
		last, lastAt = t, now
	}
	// sleep waits d, printing progress, and reports whether the run may go on.
	sleep := func(d time.Duration, phase string) (bool, error) {
		end := time.NewTimer(d)
		defer end.Stop()
		for {
			select {
			case <-end.C:
				return true, nil
			case <-ticker.C:
				tick(phase)
			case err := <-engineDone:
				if err == nil {
					err = errors.New("engine stopped before the run ended")
				}
				return false, err
			case <-ctx.Done():
				return false, nil
			}
		}
	}

	if ok, err := sleep(cfg.warmup, "warmup"); !ok {
		return nil, errors.Join(err, ctx.Err())
	}

	// The window: sample everything, then open it; close it, then sample.
	w0 := sampleWindow(cfg.serverPID)
	s0 := sampleSched(cfg.serverPID)
	var perf *perfCounter
	if cfg.perf {
		var err error
		if perf, err = startPerf(cfg.serverPID); err != nil {
			return nil, err
		}
	}
	on := time.Now()
	rec.setMeasuring(true)
	if cfg.onWindow != nil {
		cfg.onWindow()
	}
	ok, err := sleep(cfg.window, "measure")
	rec.setMeasuring(false)
	res.WindowS = time.Since(on).Seconds()
	s1 := sampleSched(cfg.serverPID)
	w1 := sampleWindow(cfg.serverPID)
	var syscalls uint64
	var perfErr error
	if perf != nil {
		syscalls, perfErr = perf.stop()
	}
	if !ok {
		return nil, errors.Join(err, ctx.Err())
	}
	if cfg.serverPID != 0 {
		mem, err := readMemory(cfg.serverPID)
		if err != nil {
			return nil, fmt.Errorf("server process: %w", err)
		}
		res.ServerVmHWMKiB, res.ServerVmRSSKiB, res.ServerThreads = mem.hwm, mem.rss, mem.threads
	}

	stopEngine()
	select {
	case err := <-engineDone:
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
	case <-time.After(10 * time.Second):
		return nil, errors.New("engine did not stop within 10s")
	}

	totals := rec.Totals()
	res.fill(rec.Latency(), totals, idleErrors, w0, w1)
	res.fillSched(s0, s1, affinity(0), serverCPUs)
	if cfg.open() {
		res.fillOpen(rec.SendLag(), totals)
	}
	if perf != nil {
		if perfErr != nil {
			fmt.Fprintf(progress, "load: %v\n", perfErr)
		} else if res.Requests > 0 {
			v := float64(syscalls) / float64(res.Requests)
			res.ServerSyscallsPerReq = &v
		}
	}
	return res, nil
}

// windowSample is everything sampled at one edge of the measurement window.
type windowSample struct {
	self   time.Duration
	mach   machineSample
	server procSample
	err    error
}

func sampleWindow(serverPID int) windowSample {
	s := windowSample{self: selfCPU(), mach: sampleMachine()}
	if serverPID != 0 {
		s.server, s.err = sampleProc(serverPID)
	}
	return s
}
