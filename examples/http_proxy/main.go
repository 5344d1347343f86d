//go:build linux

// Command http_proxy is a reverse proxy for HTTP/1.1 on percore: every loop
// accepts clients on its own SO_REUSEPORT listener and forwards each request
// to one of the upstream servers (round robin, per loop) over a keep-alive
// connection leased from its own loop's pool.
//
//	go run ./examples/http -addr 127.0.0.1:8080 &
//	go run ./examples/http_proxy -addr 127.0.0.1:8081 -upstream 127.0.0.1:8080
//	curl -v http://127.0.0.1:8081/plaintext
//
// Requests and responses are parsed by runtime/frame/http1 (strictly: a
// request the codec rejects gets its status and is not forwarded); their
// bodies are forwarded as they arrive, with their framing, never held whole,
// with backpressure both ways: a client that sends a body faster than the
// upstream takes it is not read until the upstream drains, and an upstream
// that sends faster than the client reads is not read until the client
// drains (-max-outbound bounds each connection's queue). Header fields are
// handled by one table (fieldTable in headers.go, each rule with its RFC
// 9110/9112 section): hop-by-hop fields (Connection and those it names,
// Keep-Alive, Proxy-Connection, TE, Upgrade, HTTP2-Settings) are removed
// both ways, X-Forwarded-For gets the client's address, and Expect:
// 100-continue is answered by the proxy. A field that frames a message
// (Content-Length, Transfer-Encoding) travels with its body and is never
// hop-by-hop: a request whose Connection names one is refused with 400, a
// response with 502 (removing it while the body goes on as it came would
// let the next hop read the body as the next message: request smuggling).
// A response with a Transfer-Encoding loses its Content-Length (RFC 9112
// 6.3), and an HTTP/1.0 client gets no transfer coding (a chunked body is
// de-chunked; another coding is a 502). CONNECT is refused (501).
//
// Failures: 502 when no connection to the upstream can be made or it closes
// or sends garbage before its response, 504 when it sends nothing for
// -timeout once the request is sent (or no connection is free within
// -wait), and the client is cut off when a response already begun cannot
// be completed. -timeout measures the upstream's silence only: it stops
// while the proxy holds the upstream back for a client that reads slowly,
// and -idle-timeout a client's silence only while the proxy reads it (not
// while the client waits for its response or its upload is held back); the
// runtime's write timeout (60 s, nginx's send_timeout) ends a peer that
// takes none of what the proxy sends it. An idempotent
// request without a body whose kept-alive connection closes before anything
// is answered (the keep-alive race) is sent again once, on a new
// connection. A connection that
// failed, or whose response did not end cleanly and in step, is never lent
// again. Requests pipelined on one client connection are forwarded one at a
// time, in order.
//
// With -metrics ADDR it serves the loops' and the pools' counters
// (pool="upstream0", ...) at /metrics and pprof at /debug/pprof/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/metrics"
	"github.com/percore/percore/runtime/pool"
)

// config is what the flags set.
type config struct {
	addr        string
	upstreams   string // comma-separated ip:port
	cores       string
	backend     string
	max         int
	wait        time.Duration
	timeout     time.Duration
	idleTimeout time.Duration
	maxBody     int64
	maxOutbound int
	waitBatch   int
	waitMin     time.Duration
	features    string // -uring-features, percore.ParseUringFeatures' names ("": the default)
	metrics     string
	logger      *slog.Logger
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:8081", "listen address")
	flag.StringVar(&cfg.upstreams, "upstream", "127.0.0.1:8080", "upstream servers, comma-separated literal ip:port")
	flag.StringVar(&cfg.cores, "cores", "", "CPU list for the loops, e.g. 0-3 (default: the affinity mask, at most GOMAXPROCS of it)")
	flag.StringVar(&cfg.backend, "backend", "auto", "auto, uring or epoll")
	flag.IntVar(&cfg.max, "max", 64, "keep-alive connections per loop per upstream (the pool's MaxSize)")
	flag.DurationVar(&cfg.wait, "wait", 5*time.Second, "how long a request may wait for an upstream connection (504 past it)")
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "how long the upstream may send nothing once the request is sent, not counting while the proxy holds it back for a slow client (504, or the client cut off, past it)")
	flag.DurationVar(&cfg.idleTimeout, "idle-timeout", 75*time.Second, "close a client connection that sends nothing for this long while the proxy reads it: between requests, or mid-upload (0: never)")
	flag.Int64Var(&cfg.maxBody, "max-body", -1, "longest request body in bytes (413 past it; -1: no limit, bodies are streamed)")
	flag.IntVar(&cfg.maxOutbound, "max-outbound", 256<<10, "bytes queued per connection before its peer is no longer read (the memory a stream takes)")
	flag.IntVar(&cfg.waitBatch, "wait-batch", 0, "io_uring: wait for up to this many completions per wake-up (0: off; Config.WaitBatch)")
	flag.DurationVar(&cfg.waitMin, "wait-min", 0, "io_uring: the longest extra wait of -wait-batch (0: 20µs)")
	flag.StringVar(&cfg.features, "uring-features", "", "io_uring features to use where the kernel has them: default, none, or a list of registered_ring,skip_sends,napi,direct_descriptors,incremental_buffers,zero_copy_send,bundles (Config.UringFeatures)")
	flag.StringVar(&cfg.metrics, "metrics", "", "serve Prometheus metrics at /metrics and pprof at /debug/pprof/ on this address (default: off)")
	flag.Parse()
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "http_proxy:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	s, err := start(cfg)
	if err != nil {
		return err
	}
	// Signals are caught before the line that says it listens: whoever reads
	// it may stop the server at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	fmt.Printf("http_proxy: %d loops listening on %s (%s), upstream %s\n",
		len(s.rt.Loops()), s.rt.Addr(), s.rt.Loops()[0].Backend(), cfg.upstreams)
	defer stop()
	<-ctx.Done()
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.shutdown(sctx)
}

// server is a running proxy.
type server struct {
	rt      *percore.Runtime
	pools   []*pool.Pool[*upConn]
	metrics *metrics.Server
}

func start(cfg config) (*server, error) {
	p := &proxy{timeout: cfg.timeout, idle: cfg.idleTimeout, lim: http1.Limits{MaxBody: cfg.maxBody}}
	s := &server{}
	for _, a := range strings.Split(cfg.upstreams, ",") {
		ap, err := netip.ParseAddrPort(strings.TrimSpace(a))
		if err != nil {
			return nil, fmt.Errorf("upstream %q: %w", a, err)
		}
		pl, err := pool.New[*upConn](&upManager{addr: ap}, pool.Config{MaxSize: cfg.max, ConnectionTimeout: cfg.wait})
		if err != nil {
			return nil, err
		}
		p.pools = append(p.pools, pl)
		p.hosts = append(p.hosts, []byte(ap.String()))
	}
	s.pools = p.pools
	rcfg := percore.Config{Addr: cfg.addr, Logger: cfg.logger, LoopSetup: p.setup,
		IdleTimeout: cfg.idleTimeout, MaxOutbound: cfg.maxOutbound, WaitBatch: cfg.waitBatch, WaitMin: cfg.waitMin}
	var err error
	if rcfg.Backend, err = percore.ParseBackend(cfg.backend); err != nil {
		return nil, err
	}
	if cfg.features != "" {
		f, err := percore.ParseUringFeatures(cfg.features)
		if err != nil {
			return nil, fmt.Errorf("-uring-features: %w", err)
		}
		rcfg.UringFeatures = &f
	}
	if cfg.cores != "" {
		if rcfg.Cores, err = cpu.ParseList(cfg.cores); err != nil {
			return nil, err
		}
	}
	if s.rt, err = percore.New(rcfg, p.handler()); err != nil {
		s.closePools()
		return nil, err
	}
	if cfg.metrics != "" {
		var extra []prometheus.Collector
		for i, pl := range s.pools {
			extra = append(extra, metrics.NewPool(pl, metrics.PoolConfig{Name: fmt.Sprintf("upstream%d", i)}))
		}
		if s.metrics, err = metrics.Listen(cfg.metrics, s.rt, extra...); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

func (s *server) closePools() {
	for _, pl := range s.pools {
		pl.Close()
	}
}

// shutdown stops accepting, lets exchanges in flight finish until ctx is
// done, then closes the pools.
func (s *server) shutdown(ctx context.Context) error {
	err := s.rt.Shutdown(ctx)
	s.closePools()
	if s.metrics != nil {
		s.metrics.Close()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// close stops the proxy at once.
func (s *server) close() {
	s.rt.Close()
	s.closePools()
	if s.metrics != nil {
		s.metrics.Close()
	}
}
