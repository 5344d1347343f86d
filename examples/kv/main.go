//go:build linux

// Command kv is a small Redis-protocol (RESP2) server on percore whose
// keys are owned by loops, shared-nothing: a key belongs to the loop
// Loop.Owner names, and a command for a key of another loop runs there
// through a cross-loop call (Loop.Call), its reply coming back in order on
// the client's connection, even when a pipeline mixes keys of several
// loops.
//
//	go run ./examples/kv -addr 127.0.0.1:6380
//	redis-cli -p 6380 SET k v
//	redis-benchmark -p 6380 -q -t set,get -P 16
//
// Commands: PING, ECHO, SET key value, GET, DEL and EXISTS (of several
// keys), INCR, QUIT; COMMAND, HELLO (protocol 2), CLIENT, SELECT 0 and
// CONFIG GET save|appendonly answer what redis-cli and redis-benchmark ask
// when they start. Unknown commands, wrong arities and malformed requests
// get Redis's error texts (a protocol error closes the connection, as
// Redis does).
//
// What percore provides and this program uses: frame.View with
// resp.Parse (the input, parsed in place), percore.PerLoop and
// Config.LoopSetup (each loop's keys), Loop.Owner and Loop.Call (the
// other loops' keys) and Conn.Reserve/Commit (GET's reply written into the
// outbound queue). testdata/handkept/main.go is the same server written
// without them.
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
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/resp"
)

// config is what the flags set.
type config struct {
	addr       string
	cores      string
	backend    string
	maxRequest int
	logger     *slog.Logger
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:6380", "listen address")
	flag.StringVar(&cfg.cores, "cores", "", "CPU list for the loops, e.g. 0-3 (default: the affinity mask, at most GOMAXPROCS of it)")
	flag.StringVar(&cfg.backend, "backend", "auto", "auto, uring or epoll")
	flag.IntVar(&cfg.maxRequest, "max-request", 1<<20, "longest request (and argument) in bytes")
	flag.Parse()
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
	fmt.Printf("kv: %d loops listening on %s\n", len(rt.Loops()), rt.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
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
	if cfg.maxRequest < 64 {
		return nil, fmt.Errorf("max request %d too short", cfg.maxRequest)
	}
	s := newServer(cfg.maxRequest)
	rcfg := percore.Config{Addr: cfg.addr, Logger: cfg.logger, LoopSetup: s.setup}
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
	return rt, nil
}

// newServer returns a server for requests of at most maxRequest bytes.
// Its Runtime needs s.setup as Config.LoopSetup.
func newServer(maxRequest int) *server {
	return &server{maxRequest: maxRequest,
		lim: resp.Limits{MaxBulk: maxRequest, MaxInline: min(maxRequest, resp.DefaultMaxInline)}}
}

// handler is the server's percore.Handler: its input, parsed in place.
func (s *server) handler() percore.Handler {
	return frame.View(s, frame.SplitConfig{MaxBuffered: s.maxRequest})
}
