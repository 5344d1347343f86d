//go:build linux

// Command redis_proxy is a pooling Redis proxy on percore: every loop
// accepts clients on its own SO_REUSEPORT listener, sends each command to
// the server its keys hash to (as twemproxy does: fnv1a_64 and modula, so
// that the proxy and a twemproxy configured alike put every key on the
// same server; the servers are ordered as twemproxy orders them), on
// connections the loop leased from its own pool for that
// server, and answers each client in the order of its requests. A
// command's keys are where Redis's command table says
// (runtime/frame/resp/commands: EVAL's after numkeys, OBJECT's after the
// subcommand, ...), and what the proxy refuses is derived from that table
// too (policy.go).
//
//	redis-server --port 6379 --save '' --appendonly no &
//	go run ./examples/redis_proxy -addr 127.0.0.1:6390 -servers 127.0.0.1:6379
//	redis-benchmark -p 6390 -q -t set,get -P 16
//
// Pipelining: the commands of a loop's clients for one server, a client's
// pipeline among them, go out on one leased connection, in order, written
// together at the end of the loop's turn; the replies come back in the
// same order and a FIFO per connection says whose each is. A connection is
// leased when a request needs one and goes back to the pool once it has
// nothing in flight: not one lease per request. While every leased
// connection to a server has -depth requests in flight the loop leases
// another, up to -max per server per loop (the pool's MaxSize). A client's
// commands to one server stay on one connection while any is in flight
// there, so that the server runs them in the order the client sent them.
//
// Faults: a server that refuses or cannot be reached, a connection that
// closes with requests in flight, a reply that does not parse, and a
// server that makes no progress for -timeout (a frozen server) each answer
// every request they hold with "-ERR upstream ADDR ...", and the
// connection goes back to the pool broken, never to be lent again: a
// client gets an error, never a hang. Refused, with the reason: commands
// that do not answer once per request (SUBSCRIBE and its kind, REPLCONF,
// MONITOR), that block or change the shared connection (BLPOP, MULTI,
// SELECT n, AUTH, CLIENT, ...), administrative ones, commands that span
// every server (KEYS, SCAN, FLUSHALL, ...), commands without a key, and
// commands whose keys belong to several servers (CROSSSLOT), except those
// Redis Cluster splits (MGET, MSET, DEL, EXISTS, TOUCH, UNLINK): one
// command per key, joined (docs/decisions/0024-redis-kv-and-proxy.md).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/metrics"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
	"github.com/prometheus/client_golang/prometheus"
)

// config is what the flags set.
type config struct {
	serverflag.Flags
	servers  []string
	max      int
	depth    int
	wait     time.Duration
	timeout  time.Duration
	maxReq   int
	maxReply int
	maxWait  int
	logger   *slog.Logger
}

func main() {
	var cfg config
	servers := flag.String("servers", "127.0.0.1:6379", "the Redis servers, comma-separated literal ip:port (ordered as twemproxy orders a pool's servers)")
	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:6390")
	flag.IntVar(&cfg.max, "max", 4, "upstream connections per server per loop (the pool's MaxSize)")
	flag.IntVar(&cfg.depth, "depth", 256, "requests in flight on one upstream connection before another is leased")
	flag.DurationVar(&cfg.wait, "wait", 5*time.Second, "how long a request may wait for an upstream connection (the pool's connection timeout)")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Second, "how long an upstream connection with requests in flight may go without a reply")
	flag.IntVar(&cfg.maxReq, "max-request", 1<<20, "longest client request in bytes")
	flag.IntVar(&cfg.maxReply, "max-reply", 16<<20, "longest upstream reply in bytes")
	flag.IntVar(&cfg.maxWait, "max-waiting", 1024, "replies a client may have waiting before the proxy stops reading its requests")
	flag.Parse()
	cfg.Flags = *sf
	cfg.servers = strings.Split(*servers, ",")
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "redis_proxy:", err)
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
	fmt.Printf("redis_proxy: %d loops listening on %s, servers %s, at most %d connections per server per loop\n",
		len(s.rt.Loops()), s.rt.Addr(), strings.Join(cfg.servers, ","), cfg.max)
	defer stop()
	<-ctx.Done()
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.shutdown(sctx)
}

// server is a running proxy.
type server struct {
	rt      *percore.Runtime
	p       *proxy
	pools   []*pool.Pool[*upstream.Conn]
	metrics *metrics.Server // nil without -metrics
}

// start starts the proxy's loops and its pools, one per server.
func start(cfg config) (*server, error) {
	switch {
	case len(cfg.servers) == 0:
		return nil, errors.New("no servers")
	case cfg.max < 1:
		return nil, fmt.Errorf("max %d: at least one connection per server", cfg.max)
	case cfg.depth < 1:
		return nil, fmt.Errorf("depth %d: at least 1", cfg.depth)
	case cfg.maxReq < 64 || cfg.maxReply < 64:
		return nil, fmt.Errorf("max request %d or max reply %d too short", cfg.maxReq, cfg.maxReply)
	case cfg.maxWait < 2:
		return nil, fmt.Errorf("max waiting %d: at least 2", cfg.maxWait)
	}
	s := &server{}
	servers := twemproxyOrder(cfg.servers)
	p := &proxy{servers: servers, maxReq: cfg.maxReq, maxReply: cfg.maxReply, depth: cfg.depth,
		maxConns: cfg.max, timeout: cfg.timeout, maxWait: cfg.maxWait,
		lim: resp.Limits{MaxBulk: cfg.maxReq, MaxInline: min(cfg.maxReq, resp.DefaultMaxInline)}}
	for _, addr := range servers {
		m, err := upstream.New(addr)
		if err != nil {
			s.closePools()
			return nil, err
		}
		pl, err := pool.New[*upstream.Conn](m, pool.Config{MaxSize: cfg.max, ConnectionTimeout: cfg.wait})
		if err != nil {
			s.closePools()
			return nil, err
		}
		s.pools = append(s.pools, pl)
	}
	p.pools = s.pools
	s.p = p
	rcfg := percore.Config{Addr: cfg.Addr, Logger: cfg.logger, LoopSetup: p.setup}
	cfg.Apply(&rcfg)
	var err error
	if s.rt, err = percore.New(rcfg, frame.View(p, frame.SplitConfig{MaxBuffered: cfg.maxReq})); err != nil {
		s.closePools()
		return nil, err
	}
	// -metrics serves the pools' series too, pool="ADDR".
	var cs []prometheus.Collector
	for i, pl := range s.pools {
		cs = append(cs, metrics.NewPool(pl, metrics.PoolConfig{Name: servers[i]}))
	}
	if s.metrics, err = cfg.ServeMetrics(s.rt, cs...); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// twemproxyOrder returns the servers in the order twemproxy puts a pool's
// servers in before it distributes keys over them: it sorts them by their
// names, "host:port:weight" (weight 1 here), shorter names first, then
// byte by byte (conf_validate_server's array_sort with
// conf_server_name_cmp). So the proxy and a twemproxy pool of the same
// servers put every key on the same server, whatever order each lists
// them in.
func twemproxyOrder(servers []string) []string {
	out := make([]string, 0, len(servers))
	for _, s := range servers {
		out = append(out, strings.TrimSpace(s))
	}
	slices.SortStableFunc(out, func(a, b string) int {
		a, b = a+":1", b+":1"
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return out
}

// shutdown stops accepting, lets clients finish until ctx is done, then
// closes the pools.
func (s *server) shutdown(ctx context.Context) error {
	err := s.rt.Shutdown(ctx)
	s.closePools()
	if errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// close stops the proxy at once.
func (s *server) close() {
	s.rt.Close()
	s.closePools()
}

func (s *server) closePools() {
	for _, p := range s.pools {
		p.Close()
	}
	if s.metrics != nil {
		s.metrics.Close()
		s.metrics = nil
	}
}
