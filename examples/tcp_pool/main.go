//go:build linux

// Command tcp_pool is a thread-per-core front for a line protocol: every
// loop accepts clients on its own SO_REUSEPORT listener and, for each
// request line, leases an upstream connection from its own loop's pool,
// forwards the line, reads the upstream's reply line, returns the lease and
// answers the client.
//
//	go run ./examples/echo -addr 127.0.0.1:7000 &
//	go run ./examples/tcp_pool -addr 127.0.0.1:7100 -upstream 127.0.0.1:7000 -max 4
//
// Framing: a request is one line ending in "\n" (at most -max-line bytes,
// newline included); its answer is the upstream's reply line, or a line
// "ERR <reason>\n" when the front could not get one (the upstream refused
// or was unreachable, closed mid-request or did not reply within -timeout).
// Requests pipelined on one client connection are answered in order, one at
// a time: frame.Split frames the lines, frame.PauseRead holds the next ones
// back, and an upstream.Exchange sends each request and reads its reply.
//
// With -metrics ADDR it serves its loops' counters and its pool's
// (percore_pool_*, pool="upstream") to Prometheus at /metrics, and the Go
// profiles at /debug/pprof/, on ADDR.
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

	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/metrics"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// config is what the flags set.
type config struct {
	serverflag.Flags
	upstream string
	max      int
	wait     time.Duration
	timeout  time.Duration
	maxLine  int
	logger   *slog.Logger
}

func main() {
	var cfg config
	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:7100")
	flag.StringVar(&cfg.upstream, "upstream", "127.0.0.1:7000", "upstream address (literal ip:port)")
	flag.IntVar(&cfg.max, "max", 10, "upstream connections per loop (0: the pool's default, 10)")
	flag.DurationVar(&cfg.wait, "wait", 5*time.Second, "how long a request may wait for an upstream connection (the pool's connection timeout)")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Second, "how long the upstream may take to reply")
	flag.IntVar(&cfg.maxLine, "max-line", 64<<10, "longest request or reply line, newline included")
	stats := flag.Bool("stats", false, "print the pool's state and statistics every second")
	flag.Parse()
	cfg.Flags = *sf
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(cfg, *stats); err != nil {
		fmt.Fprintln(os.Stderr, "tcp_pool:", err)
		os.Exit(1)
	}
}

func run(cfg config, stats bool) error {
	s, err := start(cfg)
	if err != nil {
		return err
	}
	fmt.Println(s.banner(cfg))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if stats {
		go printStats(ctx, s.pool)
	}
	<-ctx.Done()
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.shutdown(sctx)
}

// banner says what the front serves, with the pool's limit as the pool
// applies it (-max 0 is the pool's default).
func (s *server) banner(cfg config) string {
	b := fmt.Sprintf("tcp_pool: %d loops listening on %s, upstream %s, at most %d upstream connections per loop",
		len(s.rt.Loops()), s.rt.Addr(), cfg.upstream, s.pool.Config().MaxSize)
	if s.metrics != nil {
		b += fmt.Sprintf("; metrics on http://%s/metrics", s.metrics.Addr())
	}
	return b
}

// server is a running front.
type server struct {
	rt      *percore.Runtime
	pool    *pool.Pool[*upstream.Conn]
	metrics *metrics.Server // nil without -metrics
}

// start starts the front's loops and its pool.
func start(cfg config) (*server, error) {
	m, err := upstream.New(cfg.upstream)
	if err != nil {
		return nil, err
	}
	p, err := pool.New[*upstream.Conn](m, pool.Config{MaxSize: cfg.max, ConnectionTimeout: cfg.wait})
	if err != nil {
		return nil, err
	}
	rcfg := percore.Config{Addr: cfg.Addr, Logger: cfg.logger}
	cfg.Apply(&rcfg)
	if cfg.maxLine < 2 {
		return nil, fmt.Errorf("max line %d too short", cfg.maxLine)
	}
	rt, err := percore.New(rcfg, newFront(p, cfg.timeout, cfg.maxLine))
	if err != nil {
		return nil, err
	}
	s := &server{rt: rt, pool: p}
	// -metrics serves the pool's series too, pool="upstream".
	if s.metrics, err = cfg.ServeMetrics(rt, metrics.NewPool(p, metrics.PoolConfig{Name: "upstream"})); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// shutdown stops accepting, lets clients finish until ctx is done, then
// closes the pool.
func (s *server) shutdown(ctx context.Context) error {
	err := s.rt.Shutdown(ctx)
	s.pool.Close()
	if s.metrics != nil {
		s.metrics.Close()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// close stops the front at once.
func (s *server) close() {
	s.rt.Close()
	s.pool.Close()
	if s.metrics != nil {
		s.metrics.Close()
	}
}

func printStats(ctx context.Context, p *pool.Pool[*upstream.Conn]) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, s := p.Snapshot()
		fmt.Fprintf(os.Stderr, "pool: %v\npool: %v\n", st, s)
	}
}
