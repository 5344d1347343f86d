//go:build linux

// Command ws_gateway is the reference gateway of issue 27 on runtime/httpd
// and runtime/frame/ws: it speaks the protocol of examples/bench/gwproto
// (GET /ws?user=U&token=T with T the hex HMAC-SHA256 of U under -secret,
// 401 before the upgrade otherwise; text frames SUB topic and UNSUB topic,
// acknowledged; POST /publish?topic=T fans the body out to every
// subscriber on every loop, encoded once, and answers how many took it;
// binary frames echoed, or with -upstream relayed to a TCP service over
// persistent pooled connections, upstream.go), pings silent clients and closes those that miss
// two intervals, and drops what a subscriber that does not read cannot
// take (Conn.TryReserve at the outbound cap, -queue messages of
// -message-bytes) before the write timeout closes it.
//
// On SIGHUP it restarts without a reconnect (handover.go,
// docs/decisions/0059): a new copy of itself takes the listening sockets
// and every client between messages, with its subscriptions; a publish
// during the restart is held, not lost; a client that cannot move gets
// close 1012 (service restart). A SIGHUP while a restart runs is refused
// with a log line. SIGINT and SIGTERM shut down (clients get 1001).
//
// Memory: each io_uring loop provides 64 receive buffers of 16 KiB
// (-recv-buffers; the runtime's default is 512, sized for throughput), and
// once a storm of upgrades settles the gateway returns the heap's free
// pages to the kernel (-return-after, settle.go: the runtime's
// Config.ReturnAfterStorm, which has the loops shed what they kept of the
// storm first, httpd's spare states and the ws Pool's spares included).
// With both, a 64-byte client (its ws.Conn keeps a decoder's progress
// only mid-message, decision 0074; its user's name is in its loop's array
// of names, 0079) and the runtime's 144-byte Conn (0078), an idle
// subscribed client costs about 370 B of RSS at 18,000 on one loop
// (docs/performance.md, "WebSocket gateway, floors, part 8").
//
//	go run ./examples/ws_gateway -addr 127.0.0.1:8080 -secret S -metrics 127.0.0.1:9100
//	kill -HUP <pid>      # a new process takes over; the old one exits
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/percore/percore/examples/internal/restart"
	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
	"github.com/percore/percore/runtime/metrics"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// defaultRecvBuffers is -recv-buffers' default: 64 receive buffers (1 MiB)
// per io_uring loop instead of the runtime's 512 (8 MiB). The kernel fills
// them in ring order, so a storm of upgrades touches most of them, and
// that memory stays resident; a gateway whose clients are mostly idle
// never has 64 receives' worth of input waiting in one turn.
const defaultRecvBuffers = 64

// defaultSpareStates is -spare-states' default: httpd's own (64 a loop).
// Fewer spares save half a megabyte a loop by arithmetic, but the RSS at
// 18,000 idle clients on one loop did not show it (8, 64 and none within
// the run-to-run spread: docs/performance.md, "WebSocket gateway, floors,
// part 4" and "part 5"; since decision 0080 the loops let go of them at
// the return after a storm anyway), and with 8 a storm of upgrades drops most of the
// states it takes (part 5's exact profile: 78 MB allocated for 18,000
// upgrades and 26 collections, against 0.5 MB and 5 with 64): collections
// the storm's live clients pay for.
const defaultSpareStates = 0

// options are the flags beyond serverflag's four.
type options struct {
	secret                     string
	pingInterval, writeTimeout time.Duration
	headTimeout                time.Duration
	queue, messageBytes        int
	maxConns                   int
	recvBuffers                int
	spareStates                int
	returnAfter                uint64
	upstream                   string
	grace                      time.Duration
	pidFile                    string
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.secret, "secret", "percore", "the token secret: a client's token is the hex HMAC-SHA256 of its user under it")
	fs.DurationVar(&o.pingInterval, "ping-interval", 30*time.Second, "ping a client silent this long; close one silent twice as long")
	fs.DurationVar(&o.writeTimeout, "write-timeout", 10*time.Second, "close a client whose queued messages make no progress this long")
	fs.DurationVar(&o.headTimeout, "head-timeout", 10*time.Second, "close a connection whose upgrade request is not whole this long after its first byte (half-open upgrades)")
	fs.IntVar(&o.queue, "queue", 256, "the outbound cap, in messages of -message-bytes: a publish past it is dropped for that subscriber")
	fs.IntVar(&o.messageBytes, "message-bytes", 1024, "the message size -queue counts in (the cap is -queue times this, in bytes)")
	fs.StringVar(&o.upstream, "upstream", "", "relay binary messages to this TCP service (length-prefixed, with the client's id; upstream.go) instead of echoing them")
	fs.DurationVar(&o.grace, "grace", 5*time.Second, "how long a shutdown or a restart's hand-over waits for connections (and a new process holds publishes for the old one at most)")
	fs.StringVar(&o.pidFile, "pidfile", "", "write this process's PID to this file once it serves (after a restart, the new process's)")
	fs.IntVar(&o.maxConns, "max-conns", 0, "open connections per loop past which accepting waits (the kernel's backlog holds the rest); 0: no cap")
	fs.IntVar(&o.recvBuffers, "recv-buffers", defaultRecvBuffers, "receive buffers of 16 KiB each io_uring loop provides the kernel (Config.BufferCount, a power of two): few, as a mostly idle gateway needs (64 took about 100 B a connection off the idle RSS at 18,000 and lost no echo or fan-out; docs/performance.md); 0: the runtime's default (512, sized for throughput)")
	fs.IntVar(&o.spareStates, "spare-states", defaultSpareStates, "states of upgraded connections (7.7 KB each) httpd keeps on each loop for the next upgrades (httpd.Config.SpareStates); 0: httpd's default (64, this flag's too); negative: none")
	fs.Uint64Var(&o.returnAfter, "return-after", 1000, "after a storm of at least this many upgrades (new connections: Config.ReturnAfterStorm), once a second sees at most a tenth of its busiest second's connections and bytes (at most once a minute), have the loops shed the storm's spares, collect and return the heap's free pages to the kernel (settle.go); 0: never")
}

func main() {
	var o options
	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:8080")
	o.register(flag.CommandLine)
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(sf, o, logger); err != nil {
		fmt.Fprintln(os.Stderr, "ws_gateway:", err)
		os.Exit(1)
	}
}

func run(sf *serverflag.Flags, o options, logger *slog.Logger) error {
	// A restart's pipes and sockets, when a gateway that restarts
	// started this one (handover.go).
	child := restart.Inherited()
	files, err := percore.ListenFiles()
	if err != nil {
		return err
	}
	files, handoff := percore.HandoffFile(files)
	if handoff != nil {
		defer handoff.Close()
	}
	gw, err := start(sf, o, logger, files)
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		return err
	}
	var ms *metrics.Server // nil without -metrics
	if ms, err = sf.ServeMetrics(gw.rt, newCollector(gw.g)); err != nil {
		gw.close()
		return err
	}
	defer func() {
		if ms != nil {
			ms.Close()
		}
	}()
	if handoff != nil {
		// Publishes wait until the old process has let go of its
		// subscribers: each reaches all of them here.
		gw.g.holdUntil(child.Released(), o.grace)
		if err := gw.rt.Adopt(handoff); err != nil {
			gw.close()
			return err
		}
	}
	// The signals are caught before the line that says the gateway
	// listens: whoever reads it may stop the gateway at once.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	fmt.Fprintf(os.Stderr, "ws_gateway: %d loops (%s), listening on %s\n", len(gw.rt.Loops()), gw.rt.Loops()[0].Backend(), gw.rt.Addr())
	if err := writePID(o.pidFile); err != nil {
		logger.Error("ws_gateway: -pidfile", "err", err)
	}
	child.Ready()
	var next *restart.Parent // the new process, once one serves
	for sig := range sigs {
		if sig != syscall.SIGHUP {
			break
		}
		logger.Info("ws_gateway: SIGHUP: starting a new process")
		if ms != nil {
			ms.Close() // the new process serves the metrics address
			ms = nil
		}
		if next, err = restart.Begin(gw.rt, os.Args[1:], os.Stdout, os.Stderr, sigs, logger); err == nil {
			break
		}
		logger.Error("ws_gateway: restart failed; still serving", "err", err)
		if ms, err = sf.ServeMetrics(gw.rt, newCollector(gw.g)); err != nil {
			logger.Error("ws_gateway: metrics", "err", err)
		}
	}
	go func() {
		for sig := range sigs {
			logger.Warn("ws_gateway: a restart or shutdown is under way; signal ignored", "signal", sig)
		}
	}()
	sctx, cancel := context.WithTimeout(context.Background(), o.grace)
	defer cancel()
	if next == nil {
		gw.rt.Shutdown(sctx) // clients are sent 1001 and closed; publishes in flight are answered
		gw.close()
		return nil
	}
	began := time.Now()
	logger.Info("ws_gateway: a new process serves; handing over connections", "pid", next.Pid)
	deadline, _ := sctx.Deadline()
	gw.g.beginHandover(next, gw.rt.Addr().String(), deadline)
	err = gw.rt.HandOver(sctx, next.Handoff)
	next.Close()
	st := gw.rt.Stats()
	logger.Info("ws_gateway: handed over", "connections", st.HandedOff, "declined", st.HandoffDeclined,
		"failed", st.HandoffFailed, "took", time.Since(began).Round(time.Microsecond), "err", err)
	gw.close()
	return nil
}

// writePID writes this process's PID to path (nothing for ""), whole:
// a reader sees the old PID or the new one.
func writePID(path string) error {
	if path == "" {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// running is a started gateway.
type running struct {
	g   *gateway
	srv *httpd.Server
	rt  *percore.Runtime
}

func start(sf *serverflag.Flags, o options, logger *slog.Logger, inherited []*os.File) (*running, error) {
	if o.queue <= 0 || o.messageBytes <= 0 {
		return nil, fmt.Errorf("-queue and -message-bytes must be positive")
	}
	g := newGateway(o.secret, o.pingInterval)
	g.ho.log = logger
	if o.upstream != "" {
		m, err := upstream.New(o.upstream)
		if err != nil {
			return nil, fmt.Errorf("-upstream: %w", err)
		}
		if g.upstream, err = pool.New[*upstream.Conn](m, pool.Config{MaxSize: 1, ConnectionTimeout: 2 * time.Second}); err != nil {
			return nil, err
		}
	}
	srv := httpd.New(httpd.Config{HeadTimeout: o.headTimeout, IdleTimeout: 2 * o.pingInterval, Logger: logger,
		AdoptUpgraded: g.adopt, SpareStates: o.spareStates}, g.routes())
	cfg := percore.Config{Addr: sf.Addr, Logger: logger, LoopSetup: g.setup, MaxConns: o.maxConns, BufferCount: o.recvBuffers,
		MaxOutbound: o.queue * o.messageBytes, WriteTimeout: o.writeTimeout, ReturnAfterStorm: returnAfterStorm(o.returnAfter)}
	sf.Apply(&cfg)
	if len(inherited) > 0 {
		cfg.Addr, cfg.Inherited = "", inherited
	}
	rt, err := percore.New(cfg, srv.Handler())
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &running{g: g, srv: srv, rt: rt}, nil
}

func (r *running) close() {
	r.rt.Close()
	r.srv.Close()
	if r.g.upstream != nil {
		r.g.upstream.Close()
	}
}
