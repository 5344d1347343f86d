//go:build linux

// Command kv is a sharded, shared-nothing Redis-protocol key-value server
// on percore: keys live in Redis Cluster's 16,384 hash slots, each slot
// belongs to one loop (Loop.Owner of the slot), and a command for a key
// another loop owns runs there through a cross-loop call (Loop.Call), its
// reply coming back in order on the client's connection, even when a
// pipeline mixes keys of several loops (runtime/frame/ordered keeps the
// order).
//
//	go run ./examples/kv -addr 127.0.0.1:6380 -maxmemory 256mb
//	redis-cli -p 6380 SET k v EX 60
//	redis-benchmark -p 6380 -q -t set,get -P 16
//
// Commands: PING, ECHO, SET (EX, PX, EXAT, PXAT, NX, XX, KEEPTTL, GET), GET,
// DEL, EXISTS, INCR, INCRBY, DECR, DECRBY, MGET, MSET, EXPIRE and PEXPIRE
// (NX, XX, GT, LT), TTL, PTTL, DBSIZE, FLUSHALL, INFO (a few fields), QUIT;
// COMMAND, HELLO (2 or 3: RESP3 from then on), CLIENT (SETNAME and the like
// accepted), SELECT 0 and CONFIG GET save|appendonly|maxmemory answer what
// redis-cli and redis-benchmark ask when they start. Each command's arity,
// flags and key positions come from Redis's command table
// (runtime/frame/resp/commands, generated from redis-server's COMMAND
// INFO). Unknown commands, wrong arities and malformed requests get
// Redis's error texts (a protocol error closes the connection after the
// replies before it, as Redis does).
//
// Multi-key commands follow Redis Cluster: MGET, MSET, DEL and EXISTS take
// keys of one hash slot (a {hash tag} puts keys in one slot), and run at
// once on its loop, so that an MSET is never seen half applied nor half
// refused; keys of several slots get Redis Cluster's CROSSSLOT error.
//
// Expiry is lazy (a read of an expired key deletes it) plus a sweep on
// each loop every -sweep that samples keys with an expiry, as Redis's
// active expiry does. Memory: -maxmemory bounds what the keys account for
// (their bytes plus a fixed overhead each), shared equally by the loops.
// As in Redis, the check comes before a command flagged denyoom runs:
// once a loop's memory is over its share, under -maxmemory-policy
// noeviction (the default, as Redis's) such a command gets Redis's -OOM
// error, and under allkeys-random random keys of that loop are evicted
// first (docs/decisions/0024-redis-kv-and-proxy.md).
//
// What percore provides and this program uses: frame.View with
// resp.Parser (the input, parsed in place, its progress kept across
// reads), percore.PerLoop and Config.LoopSetup (each loop's keys),
// Loop.Owner and percore.OpPool (the other loops' keys, through
// cross-loop calls that allocate nothing), Loop.Runtime (every loop, for
// DBSIZE, FLUSHALL and INFO), ordered.Queue (the
// replies in order) and Conn.Reserve/Commit (GET's reply written into the
// outbound queue). testdata/handkept/main.go is issue 14's one-loop server
// written without them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/resp"
)

// config is what the flags set.
type config struct {
	serverflag.Flags
	maxRequest int
	maxMemory  int64
	policy     string
	sweep      time.Duration
	logger     *slog.Logger
}

func main() {
	var cfg config
	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:6380")
	flag.IntVar(&cfg.maxRequest, "max-request", 1<<20, "longest request (and argument) in bytes")
	maxMemory := flag.String("maxmemory", "0", "most memory the keys may account for, in bytes or with a suffix as Redis reads one: k, m, g (1000s), kb, mb, gb (1024s) (0: no limit)")
	flag.StringVar(&cfg.policy, "maxmemory-policy", "noeviction", "at -maxmemory: noeviction (writes get -OOM) or allkeys-random (evict random keys)")
	flag.DurationVar(&cfg.sweep, "sweep", 100*time.Millisecond, "how often each loop samples keys with an expiry and deletes the expired ones")
	flag.Parse()
	cfg.Flags = *sf
	var err error
	if cfg.maxMemory, err = parseBytes(*maxMemory); err != nil {
		fmt.Fprintln(os.Stderr, "kv:", err)
		os.Exit(2)
	}
	cfg.logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "kv:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	rt, err := start(cfg)
	if err != nil {
		return err
	}
	// Signals are caught before the line that says it listens: whoever reads
	// it may stop the server at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	fmt.Printf("kv: %d loops listening on %s\n", len(rt.Loops()), rt.Addr())
	ms, err := cfg.ServeMetrics(rt)
	if err != nil {
		rt.Close()
		return err
	}
	if ms != nil {
		defer ms.Close()
	}
	defer stop()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rt.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// start starts the server's loops.
func start(cfg config) (*percore.Runtime, error) {
	rcfg := percore.Config{Addr: cfg.Addr, Logger: cfg.logger}
	cfg.Apply(&rcfg)
	if rcfg.Cores == nil {
		var err error
		// The runtime's own choice, made here so that each loop
		// knows its share of -maxmemory.
		if rcfg.Cores, err = cpu.Cores(); err != nil {
			return nil, err
		}
		rcfg.Cores = rcfg.Cores[:min(len(rcfg.Cores), goruntime.GOMAXPROCS(0))]
	}
	s, err := newServer(cfg, len(rcfg.Cores))
	if err != nil {
		return nil, err
	}
	rcfg.LoopSetup = s.setup
	rt, err := percore.New(rcfg, s.handler())
	if err != nil {
		return nil, err
	}
	return rt, nil
}

// newServer returns a server for cfg, on loops loops. Its Runtime needs
// s.setup as Config.LoopSetup.
func newServer(cfg config, loops int) (*server, error) {
	switch {
	case cfg.maxRequest < 64:
		return nil, fmt.Errorf("max request %d too short", cfg.maxRequest)
	case cfg.policy != "noeviction" && cfg.policy != "allkeys-random":
		return nil, fmt.Errorf("maxmemory policy %q: want noeviction or allkeys-random", cfg.policy)
	case cfg.maxMemory < 0:
		return nil, fmt.Errorf("maxmemory %d is negative", cfg.maxMemory)
	case loops < 1:
		return nil, fmt.Errorf("%d loops", loops)
	}
	if cfg.sweep <= 0 {
		cfg.sweep = 100 * time.Millisecond
	}
	return &server{maxRequest: cfg.maxRequest,
		lim:       resp.Limits{MaxBulk: cfg.maxRequest, MaxInline: min(cfg.maxRequest, resp.DefaultMaxInline)},
		maxMemory: cfg.maxMemory, evict: cfg.policy == "allkeys-random", sweep: cfg.sweep,
		nLoop: loops, started: time.Now(), nCommands: len(supported)}, nil
}

// osPid is the process id INFO reports.
var osPid = os.Getpid()

// parseBytes reads a size as Redis's configuration does (memtoull): a
// number of bytes, or with a suffix in any case: k, m and g are powers of
// 1000, kb, mb and gb powers of 1024 ("1k" is 1,000 bytes, "1kb" 1,024).
func parseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	unit := int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, unit = strings.TrimSuffix(t, u.suffix), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("memory size %q: want bytes, or a number with kb, mb or gb", s)
	}
	return n * unit, nil
}

// handler is the server's percore.Handler: its input, parsed in place.
func (s *server) handler() percore.Handler {
	return frame.View(s, frame.SplitConfig{MaxBuffered: s.maxRequest})
}
