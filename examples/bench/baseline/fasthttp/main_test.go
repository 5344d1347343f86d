package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
)

// TestMain is leakcheck.Main but for two goroutines of fasthttp's own:
// it updates its cached Date from a process-wide goroutine that it starts
// with its first server and never stops, and a stopped server's worker
// pool cleaner exits only after its MaxIdleWorkerDuration (10 s).
func TestMain(m *testing.M) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // start the Go poller before the baseline, as leakcheck.Main does
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln.Close()
	fds, goroutines := leakcheck.OpenFDs(), runtime.NumGoroutine()
	code := m.Run()
	if err := leakcheck.Check(fds, goroutines+2, leakcheck.Settle); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// TestPlaintext: keep-alive and pipelined plaintext requests are answered,
// and the server stops when asked.
func TestPlaintext(t *testing.T) {
	pctest.CheckPlaintext(t, func(ctx context.Context, ready func(string)) error {
		return serve(ctx, "127.0.0.1:0", func(a net.Addr) { ready(a.String()) })
	})
}
