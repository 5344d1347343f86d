//go:build linux

// Command echo is percore's thread-per-core echo server: one loop per CPU,
// each with its own io_uring (or epoll) and its own SO_REUSEPORT listener,
// echoing every byte back from the loop's thread.
//
//	go run ./examples/echo -addr 127.0.0.1:7000 -cores 0-1
//	go run ./examples/echo -addr 127.0.0.1:7000 -metrics 127.0.0.1:9100
//
// With -metrics it serves its loops' counters to Prometheus at /metrics and
// the Go profiles at /debug/pprof/ on that address (package
// runtime/metrics).
package main

import (
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
	"github.com/percore/percore/examples/internal/serverflag"
	"github.com/percore/percore/ring"
	percore "github.com/percore/percore/runtime"
)

// echo writes back what it reads; Write copies, so the receive buffer can
// go back to the kernel as soon as OnData returns.
type echo struct{}

func (echo) OnData(c *percore.Conn, data []byte) { c.Write(data) }

// The handler's callbacks, checked by the compiler
// (docs/decisions/0018-input-buffering.md): echo has only OnData.
var _ percore.Handler = echo{}

func main() {
	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:7000")
	tf := serverflag.RegisterTLS(flag.CommandLine)
	incoming := flag.Bool("incoming-cpu", false, "set SO_INCOMING_CPU on each loop's listener")
	stats := flag.Bool("stats", false, "print a one-line stats summary every second")
	ringFlags := flag.String("ring-flags", "default", "io_uring setup flags: default, none, or a list of single_issuer,defer_taskrun,coop_taskrun,sqpoll")
	waitBatch := flag.Int("wait-batch", 0, "io_uring: wait for up to this many completions per wake-up (0: off)")
	waitMin := flag.Duration("wait-min", 0, "io_uring: the longest extra wait of -wait-batch (0: 20µs)")
	bufferCount := flag.Int("buffer-count", 0, "io_uring: receive buffers per loop, a power of two (0: 512; with -uring-features incremental_buffers, a quarter of their bytes make the 64 KiB buffers)")
	budget := flag.Int("turn-budget", 0, "bytes one connection may have handled per loop turn (0: 64 KiB, -1: no budget)")
	probe := flag.Bool("probe", false, "start the loops without a listener, print what the runtime found (backend, reason, ring, kernel, cpus) and exit; exit status 3 when io_uring is unavailable here, 1 on any other error")
	flag.Parse()
	if *probe {
		sf.Addr = ""
	}
	err := run(*probe, sf, tf, *ringFlags, *waitBatch, *waitMin, *budget, *bufferCount, *incoming, *stats)
	if err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		if errors.Is(err, ring.ErrUnavailable) {
			os.Exit(3) // scripts tell "not here" from "broken" by it
		}
		os.Exit(1)
	}
}

func run(probe bool, sf *serverflag.Flags, tf *serverflag.TLSFlags, ringFlags string, waitBatch int, waitMin time.Duration, budget, bufferCount int, incoming, stats bool) error {
	cfg := percore.Config{Addr: sf.Addr, IncomingCPU: incoming, WaitBatch: waitBatch, WaitMin: waitMin, TurnBudget: budget,
		BufferCount: bufferCount,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, nil))}
	sf.Apply(&cfg)
	if !probe {
		if err := tf.Apply(&cfg); err != nil {
			return err
		}
	}
	flags, err := percore.ParseRingFlags(ringFlags)
	if err != nil {
		return err
	}
	cfg.RingFlags = &flags
	if probe {
		rt, err := percore.New(cfg, nil)
		if err != nil {
			return err
		}
		fmt.Println(rt.Report())
		return rt.Close()
	}
	rt, err := percore.New(cfg, echo{})
	if err != nil {
		return err
	}
	fmt.Println(rt.Report())
	var list []int
	for _, l := range rt.Loops() {
		fmt.Printf("loop %d: cpu %d, irq mask %s\n", l.ID(), l.CPU(), cpu.IRQMask(l.CPU()))
		list = append(list, l.CPU())
	}
	fmt.Printf("host tuning for these loops: sudo scripts/tune-nic.sh --cpus %s\n", cpu.FormatList(list))
	ms, err := sf.ServeMetrics(rt)
	if err != nil {
		rt.Close()
		return err
	}
	if ms != nil {
		defer ms.Close()
		fmt.Printf("metrics on http://%s/metrics, profiles on http://%s/debug/pprof/\n", ms.Addr(), ms.Addr())
	}
	// Signals are caught before the line that says it listens: whoever reads
	// it may stop the server at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	fmt.Printf("listening on %s\n", rt.Addr())

	defer stop()
	if stats {
		go printStats(ctx, rt)
	}
	<-ctx.Done()
	stop()
	fmt.Fprintln(os.Stderr, "echo: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rt.Shutdown(sctx); err != nil && err != context.DeadlineExceeded {
		return err
	}
	return nil
}

func printStats(ctx context.Context, rt *percore.Runtime) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	prev := rt.Stats()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := rt.Stats()
		var b strings.Builder
		fmt.Fprintf(&b, "open %d accepts/s %d in %d B/s out %d B/s turns/s %d completions/s %d syscalls/s %d bundles/s %d bundle-buffers/s %d",
			s.Open, s.Accepts-prev.Accepts, s.BytesIn-prev.BytesIn, s.BytesOut-prev.BytesOut,
			s.Turns-prev.Turns, s.Completions-prev.Completions, s.Syscalls-prev.Syscalls,
			s.Bundles-prev.Bundles, s.BundleBuffers-prev.BundleBuffers)
		fmt.Fprintln(os.Stderr, b.String())
		prev = s
	}
}
