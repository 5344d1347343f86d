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
// a time.
//
// With -metrics ADDR it serves its loops' counters and its pool's
// (percore_pool_*, pool="upstream") to Prometheus at /metrics, and the Go
// profiles at /debug/pprof/, on ADDR.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/metrics"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// config is what the flags set.
type config struct {
	addr     string
	upstream string
	cores    string
	backend  string
	max      int
	wait     time.Duration
	timeout  time.Duration
	maxLine  int
	metrics  string // the metrics and pprof address, "" for none
	logger   *slog.Logger
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:7100", "listen address")
	flag.StringVar(&cfg.upstream, "upstream", "127.0.0.1:7000", "upstream address (literal ip:port)")
	flag.StringVar(&cfg.cores, "cores", "", "CPU list for the loops, e.g. 0-3 (default: the affinity mask, at most GOMAXPROCS of it)")
	flag.StringVar(&cfg.backend, "backend", "auto", "auto, uring or epoll")
	flag.IntVar(&cfg.max, "max", 10, "upstream connections per loop (0: the pool's default, 10)")
	flag.DurationVar(&cfg.wait, "wait", 5*time.Second, "how long a request may wait for an upstream connection (the pool's connection timeout)")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Second, "how long the upstream may take to reply")
	flag.IntVar(&cfg.maxLine, "max-line", 64<<10, "longest request or reply line, newline included")
	flag.StringVar(&cfg.metrics, "metrics", "", "serve Prometheus metrics (the loops' and the pool's) at /metrics and pprof at /debug/pprof/ on this address, e.g. 127.0.0.1:9102 (default: off)")
	stats := flag.Bool("stats", false, "print the pool's state and statistics every second")
	flag.Parse()
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
	rcfg := percore.Config{Addr: cfg.addr, Logger: cfg.logger}
	if rcfg.Backend, err = percore.ParseBackend(cfg.backend); err != nil {
		return nil, err
	}
	if cfg.cores != "" {
		if rcfg.Cores, err = cpu.ParseList(cfg.cores); err != nil {
			return nil, err
		}
	}
	if cfg.maxLine < 2 {
		return nil, fmt.Errorf("max line %d too short", cfg.maxLine)
	}
	rt, err := percore.New(rcfg, &front{pool: p, timeout: cfg.timeout, maxLine: cfg.maxLine})
	if err != nil {
		return nil, err
	}
	s := &server{rt: rt, pool: p}
	if cfg.metrics != "" {
		s.metrics, err = metrics.Listen(cfg.metrics, rt, metrics.NewPool(p, metrics.PoolConfig{Name: "upstream"}))
		if err != nil {
			s.close()
			return nil, err
		}
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
		st, err := p.State(ctx)
		if err != nil {
			return
		}
		s, err := p.Statistics(ctx)
		if err != nil {
			return
		}
		fmt.Fprintf(os.Stderr, "pool: %v\npool: %v\n", st, s)
	}
}

// front is the handler of client connections. Its callbacks run on the
// client's loop.
type front struct {
	pool    *pool.Pool[*upstream.Conn]
	timeout time.Duration
	maxLine int
}

func (f *front) OnOpen(c *percore.Conn) {
	cl := &client{f: f, c: c, local: f.pool.Local(c.Loop())}
	// Bound once per client, so that a request allocates nothing for them.
	cl.gotFn = cl.got
	cl.replyFn = cl.onReply
	cl.upCloseFn = cl.onUpstreamClose
	c.SetValue(cl)
}

func (f *front) OnData(c *percore.Conn, data []byte) { c.Value().(*client).received(data) }

func (f *front) OnClose(c *percore.Conn, _ error) {
	if cl, ok := c.Value().(*client); ok {
		cl.gone()
	}
}

// client is one client connection: the requests it sent and the one in
// flight.
type client struct {
	f     *front
	c     *percore.Conn
	local *pool.Local[*upstream.Conn]

	in      []byte // requests received and not answered; the first is in flight when busy
	busy    bool
	looping bool // next is running
	closed  bool
	lease   *pool.Lease[*upstream.Conn]
	reply   []byte
	timer   *percore.Timer

	gotFn     func(*pool.Lease[*upstream.Conn], error)
	replyFn   func([]byte)
	upCloseFn func(error)
}

// received queues the client's bytes and starts the next request.
func (cl *client) received(data []byte) {
	if len(cl.in)+len(data) > 4*cl.f.maxLine {
		cl.fatal("ERR too many requests in flight\n")
		return
	}
	cl.in = append(cl.in, data...)
	cl.next()
}

// next sends requests to the pool, one at a time, while full lines wait.
func (cl *client) next() {
	if cl.looping {
		return // the loop below continues once the current call returns
	}
	cl.looping = true
	for !cl.busy && !cl.closed {
		i := bytes.IndexByte(cl.in, '\n')
		if i < 0 && len(cl.in) >= cl.f.maxLine || i >= cl.f.maxLine {
			cl.fatal("ERR request line too long\n")
			break
		}
		if i < 0 {
			break
		}
		cl.busy = true
		cl.c.BeginRequest() // a graceful shutdown waits for its answer
		cl.local.Get(cl.gotFn)
	}
	cl.looping = false
}

// got receives the lease for the request at the head of in.
func (cl *client) got(ls *pool.Lease[*upstream.Conn], err error) {
	if cl.closed {
		if ls != nil {
			cl.local.Put(ls)
		}
		return
	}
	if err != nil {
		cl.answerError(err)
		return
	}
	cl.lease = ls
	uc := ls.Conn()
	uc.Receive(cl.replyFn, cl.upCloseFn)
	uc.Write(cl.in[:bytes.IndexByte(cl.in, '\n')+1])
	if cl.f.timeout > 0 {
		if cl.timer == nil {
			cl.timer = cl.c.Loop().AfterFunc(cl.f.timeout, cl.onTimeout)
		} else {
			cl.timer.Reset(cl.f.timeout)
		}
	}
}

// onReply collects the upstream's reply line.
func (cl *client) onReply(data []byte) {
	cl.reply = append(cl.reply, data...)
	i := bytes.IndexByte(cl.reply, '\n')
	if i < 0 {
		if len(cl.reply) >= cl.f.maxLine {
			cl.abandon("ERR upstream reply too long\n")
		}
		return
	}
	uc := cl.lease.Conn()
	if i+1 != len(cl.reply) {
		uc.MarkBroken() // more than one reply: the connection is out of step
	}
	uc.Receive(nil, nil)
	cl.release()
	cl.answer(cl.reply[:i+1])
}

// onUpstreamClose ends a request whose upstream connection closed.
func (cl *client) onUpstreamClose(err error) {
	cl.release() // broken: the pool closes it
	cl.answerError(fmt.Errorf("upstream closed: %w", err))
}

// onTimeout ends a request the upstream did not answer in time.
func (cl *client) onTimeout() {
	if cl.lease != nil {
		cl.abandon("ERR upstream timeout\n")
	}
}

// abandon gives up on the exchange in flight: the upstream connection is
// out of step, so it goes back marked broken.
func (cl *client) abandon(answer string) {
	uc := cl.lease.Conn()
	uc.MarkBroken()
	uc.Receive(nil, nil)
	cl.release()
	cl.answer([]byte(answer))
}

// release puts the lease back.
func (cl *client) release() {
	if cl.timer != nil {
		cl.timer.Stop()
	}
	cl.local.Put(cl.lease)
	cl.lease = nil
}

func (cl *client) answerError(err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	cl.answer([]byte("ERR " + msg + "\n"))
}

// answer writes the reply to the request at the head of in and moves on.
// The answered request ends only after the next one, if any, began, so
// that a graceful shutdown does not close the client between two of its
// pipelined requests.
func (cl *client) answer(p []byte) {
	cl.c.Write(p)
	i := bytes.IndexByte(cl.in, '\n')
	cl.in = cl.in[:copy(cl.in, cl.in[i+1:])]
	cl.reply = cl.reply[:0]
	cl.busy = false
	cl.next()
	cl.c.EndRequest()
}

// fatal answers with a protocol error and closes the client.
func (cl *client) fatal(msg string) {
	cl.c.Write([]byte(msg))
	cl.c.Close()
	cl.gone()
}

// gone stops serving a client that went away: a lease in hand goes back
// broken (its reply would arrive with nobody to read it).
func (cl *client) gone() {
	if cl.closed {
		return
	}
	cl.closed = true
	if cl.lease != nil {
		uc := cl.lease.Conn()
		uc.MarkBroken()
		uc.Receive(nil, nil)
		cl.release()
	}
}
