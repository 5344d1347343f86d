//go:build linux

// Command lines is a line-protocol server on percore, one loop per CPU:
//
//	ping           -> pong
//	echo TEXT      -> TEXT
//	anything else  -> unknown command
//
// Every reply ends with '\n'. A line longer than 1024 bytes gets "error:
// line too long" and the connection is closed; so is a connection silent
// for longer than -idle-timeout. SIGINT or SIGTERM shuts the server down
// gracefully: the listeners close at once and the connections are closed
// after their replies are sent.
//
//	go run ./examples/lines -addr 127.0.0.1:7001 -idle-timeout 30s
//
// With -metrics ADDR it serves its loops' counters to Prometheus at
// /metrics and the Go profiles at /debug/pprof/ on ADDR.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// maxLine is the protocol's line limit in bytes, '\r' included.
const maxLine = 1024

// options are the command's flags.
type options struct {
	serverflag.Flags
	idleTimeout     time.Duration
	shutdownTimeout time.Duration
}

func main() {
	var o options
	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:7001")
	flag.DurationVar(&o.idleTimeout, "idle-timeout", time.Minute, "close a connection silent for this long (0: never)")
	flag.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 5*time.Second, "how long a graceful shutdown may take")
	flag.Parse()
	o.Flags = *sf

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	err := run(ctx, o, log, func(addr, metrics net.Addr) {
		if metrics != nil {
			log.Info("lines: serving metrics", "url", "http://"+metrics.String()+"/metrics")
		}
		log.Info("lines: listening", "addr", addr.String())
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lines:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done, then shuts down gracefully. It calls ready
// with the listening address once the server accepts connections, and the
// metrics server's address (nil without -metrics).
func run(ctx context.Context, o options, log *slog.Logger, ready func(addr, metrics net.Addr)) error {
	// The runtime closes a connection silent for IdleTimeout and tells
	// OnClose why (percore.ErrIdleTimeout).
	cfg := percore.Config{Addr: o.Addr, Logger: log, IdleTimeout: o.idleTimeout}
	o.Apply(&cfg)
	rt, err := percore.New(cfg, newHandler())
	if err != nil {
		return err
	}
	var maddr net.Addr
	ms, err := o.ServeMetrics(rt)
	if err != nil {
		rt.Close()
		return err
	}
	if ms != nil {
		defer ms.Close()
		maddr = ms.Addr()
	}
	ready(rt.Addr(), maddr)

	<-ctx.Done()
	log.Info("lines: shutting down", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := rt.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// newHandler returns the protocol's handler: lines of at most maxLine
// bytes.
func newHandler() percore.Handler {
	return frame.Lines(&server{
		pong:    []byte("pong\n"),
		unknown: []byte("unknown command\n"),
		tooLong: []byte("error: line too long\n"),
	}, frame.LineConfig{MaxLine: maxLine})
}

// The callbacks frame.Lines forwards to server, checked by the compiler:
// a misspelled OnShutdown would fail to build instead of never running.
var (
	_ frame.Handler           = (*server)(nil)
	_ frame.ErrorHandler      = (*server)(nil)
	_ percore.ShutdownHandler = (*server)(nil)
)

// server answers the protocol's lines. Its replies are prepared once, so
// that answering allocates nothing.
type server struct {
	pong, unknown, tooLong []byte
}

func (s *server) OnFrame(c *percore.Conn, line []byte) {
	switch {
	case string(line) == "ping":
		c.Write(s.pong)
	case bytes.HasPrefix(line, []byte("echo ")):
		frame.WriteLine(c, line[len("echo "):])
	default:
		c.Write(s.unknown)
	}
}

// OnFrameError answers a line over the limit; frame.Lines then closes the
// connection.
func (s *server) OnFrameError(c *percore.Conn, err error) { c.Write(s.tooLong) }

// OnShutdown closes the connection: between lines it has nothing in
// flight, and Close sends queued replies first.
func (s *server) OnShutdown(c *percore.Conn) { c.Close() }
