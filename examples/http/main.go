//go:build linux

// Command http is an HTTP/1.1 server on percore, with the plaintext and
// JSON endpoints of the TechEmpower benchmarks:
//
//	go run ./examples/http -addr 127.0.0.1:8080
//	curl -v http://127.0.0.1:8080/plaintext http://127.0.0.1:8080/json
//	wrk -t1 -c100 -d10s http://127.0.0.1:8080/plaintext
//
// Endpoints (GET and HEAD unless said):
//
//   - /plaintext: "Hello, World!", text/plain.
//   - /json: {"message":"Hello, World!"}, application/json, serialized for
//     every request.
//   - POST or PUT /echo: the request body, streamed back as it arrives
//     (with the request's Content-Length, or chunked for a chunked upload),
//     never held whole: a client that uploads faster than it reads is held
//     back by the outbound cap (Config.MaxOutbound pauses reading).
//   - /sleep?ms=N: answers "slept" after N milliseconds (at most 10 s),
//     a request that outlives its read, to show graceful shutdown.
//
// Every response carries Server and a Date cached per loop (http1.Date with
// Loop.Now). Keep-alive and pipelining: the requests of one read are
// answered with one write. Requests are parsed by runtime/frame/http1 in
// place (frame.View): a malformed request, or one over the limits, gets its
// status (400, 413, 414, 431, 501, 505, 417) with Connection: close, and the
// connection closes lingering (Conn.CloseLinger: the write side shut, what
// the client still sends read and dropped, within bounds), so that the
// answer arrives. A head that does not arrive whole within -head-timeout
// gets 408. Expect: 100-continue is answered with 100 Continue on /echo,
// and with the final status (and a close) elsewhere.
//
// On SIGINT or SIGTERM the server shuts down gracefully: it stops
// accepting, closes idle connections, lets requests in flight finish
// (Conn.BeginRequest/EndRequest) and answers each with Connection: close.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/metrics"
)

// config is what the flags set.
type config struct {
	addr        string
	cores       string
	backend     string
	idleTimeout time.Duration
	headTimeout time.Duration
	maxBody     int64
	waitBatch   int
	waitMin     time.Duration
	metrics     string
	logger      *slog.Logger
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen address")
	flag.StringVar(&cfg.cores, "cores", "", "CPU list for the loops, e.g. 0-3 (default: the affinity mask, at most GOMAXPROCS of it)")
	flag.StringVar(&cfg.backend, "backend", "auto", "auto, uring or epoll")
	flag.DurationVar(&cfg.idleTimeout, "idle-timeout", 75*time.Second, "close a connection that sends nothing for this long (0: never)")
	flag.DurationVar(&cfg.headTimeout, "head-timeout", 10*time.Second, "answer 408 to a request head that is not whole this long after its first byte")
	flag.Int64Var(&cfg.maxBody, "max-body", http1.DefaultMaxBody, "longest request body in bytes (413 past it; -1: no limit)")
	flag.IntVar(&cfg.waitBatch, "wait-batch", 0, "io_uring: wait for up to this many completions per wake-up (0: off; Config.WaitBatch)")
	flag.DurationVar(&cfg.waitMin, "wait-min", 0, "io_uring: the longest extra wait of -wait-batch (0: 20µs)")
	flag.StringVar(&cfg.metrics, "metrics", "", "serve Prometheus metrics at /metrics and pprof at /debug/pprof/ on this address (default: off)")
	flag.Parse()
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	s, err := start(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("http: %d loops listening on %s (%s)\n", len(s.rt.Loops()), s.rt.Addr(), s.rt.Loops()[0].Backend())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.shutdown(sctx)
}

// running is a started server.
type running struct {
	rt      *percore.Runtime
	metrics *metrics.Server // nil without -metrics
}

// start starts the server's loops.
func start(cfg config) (*running, error) {
	s := newServer(http1.Limits{MaxBody: cfg.maxBody}, cfg.headTimeout)
	rcfg := percore.Config{Addr: cfg.addr, Logger: cfg.logger, LoopSetup: s.setup, IdleTimeout: cfg.idleTimeout,
		WaitBatch: cfg.waitBatch, WaitMin: cfg.waitMin}
	var err error
	if rcfg.Backend, err = percore.ParseBackend(cfg.backend); err != nil {
		return nil, err
	}
	if cfg.cores != "" {
		if rcfg.Cores, err = cpu.ParseList(cfg.cores); err != nil {
			return nil, err
		}
	}
	rt, err := percore.New(rcfg, s.handler())
	if err != nil {
		return nil, err
	}
	r := &running{rt: rt}
	if cfg.metrics != "" {
		if r.metrics, err = metrics.Listen(cfg.metrics, rt); err != nil {
			rt.Close()
			return nil, err
		}
	}
	return r, nil
}

// shutdown lets requests in flight finish until ctx is done.
func (r *running) shutdown(ctx context.Context) error {
	err := r.rt.Shutdown(ctx)
	if r.metrics != nil {
		r.metrics.Close()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// close stops the server at once.
func (r *running) close() {
	r.rt.Close()
	if r.metrics != nil {
		r.metrics.Close()
	}
}
