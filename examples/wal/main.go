//go:build linux

// Command wal is a write-ahead-log server on one percore loop. Clients
// send records framed by a 4-byte big-endian length; the server appends
// each to its log and answers with the record's log sequence number
// (LSN, 8 bytes big-endian) once the record is durable, in the order the
// records arrived.
//
// Group commit: the records that arrive while a write and its fdatasync
// are in flight gather into the next group, which becomes one write and
// one fdatasync (an IOSQE_IO_LINK chain on io_uring) as soon as the one in
// flight completes (-depth allows more groups in flight, acknowledged in
// order). Each record is framed on disk with its length and a CRC-32C;
// at start the server scans the log, keeps every intact record (the
// checksum says whether it is whole: -max-record bounds new records only,
// so lowering it loses nothing already acknowledged), cuts a torn tail,
// and says what it found. The log rotates to a new segment past
// -segment-size. -sync=false acknowledges after the write alone, for
// comparison.
//
//	go run ./examples/wal -dir /var/lib/wal -addr 127.0.0.1:7400
//
// SIGINT or SIGTERM shuts it down and prints its counters (records per
// group is records per fdatasync with -sync).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wal:", err)
		os.Exit(1)
	}
}

func run() error {
	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:7400")
	dir := flag.String("dir", "", "the log's directory (required)")
	sync := flag.Bool("sync", true, "acknowledge a record only after fdatasync (false: after the write)")
	depth := flag.Int("depth", 1, "groups written and synced at once, at most")
	segSize := flag.Int64("segment-size", 64<<20, "rotate to a new segment past this many bytes")
	prealloc := flag.Bool("prealloc", true, "fallocate each segment to -segment-size")
	maxRecord := flag.Int("max-record", 1<<20, "the largest new record accepted, in bytes (records already in the log are kept whatever their size)")
	flag.Parse()
	if *dir == "" {
		return fmt.Errorf("-dir is required")
	}
	if *depth < 1 {
		return fmt.Errorf("-depth %d: at least 1", *depth)
	}
	// The log is one loop's: -cores names its CPU, by default the first
	// the process may use.
	cores := sf.Cores
	if len(cores) == 0 {
		all, err := cpu.Cores()
		if err != nil {
			return err
		}
		cores = all[:1]
	}
	if len(cores) != 1 {
		return fmt.Errorf("-cores %s: the log is one loop's, give one CPU", cpu.FormatList(cores))
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	rec, err := recoverLog(*dir, nil)
	if err != nil {
		return fmt.Errorf("recover %s: %w", *dir, err)
	}
	fmt.Fprintln(os.Stderr, "wal:", rec)
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s := &walServer{log: logger, cfg: walConfig{
		dir: *dir, sync: *sync, depth: *depth, segSize: *segSize, prealloc: *prealloc,
		maxRecord: *maxRecord, maxGroup: 16 << 20,
	}}
	cfg := percore.Config{
		Addr: sf.Addr, Logger: logger,
		LoopSetup: func(l *percore.Loop) error { s.start(l, rec); return nil },
	}
	sf.Apply(&cfg)
	cfg.Cores = cores
	rt, err := percore.New(cfg, frame.LengthPrefixed(s, frame.LengthConfig{MaxFrame: *maxRecord}))
	if err != nil {
		return err
	}
	ms, err := sf.ServeMetrics(rt)
	if err != nil {
		rt.Close()
		return err
	}
	if ms != nil {
		defer ms.Close()
		fmt.Printf("wal: metrics on http://%s/metrics\n", ms.Addr())
	}
	// Signals are caught before the line that says it listens: whoever reads
	// it may stop the server at once.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	fmt.Printf("wal: listening on %s (%v, sync %v, depth %d)\n", rt.Addr(), rt.Loops()[0].Backend(), *sync, *depth)
	<-sig
	stats := make(chan string, 1)
	if rt.Loops()[0].Post(func() { stats <- s.stats() }) == nil {
		fmt.Fprintln(os.Stderr, "wal:", <-stats)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return rt.Shutdown(ctx)
}
