//go:build linux

// Package pctest holds the helpers that percore's tests share: running a
// test once per backend, waiting for a condition with a deadline, running a
// function on a loop, dialing a test server, a plain net server to stand
// in for an upstream or a peer, and a logger that writes to the test log.
package pctest

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/ring"
	percore "github.com/percore/percore/runtime"
)

// Backends are the backends every runtime test runs under.
var Backends = []percore.Backend{percore.IOURing, percore.Epoll}

// EachBackend runs f once per backend, as a named subtest. The io_uring
// subtest needs io_uring (see NeedURing).
func EachBackend(t *testing.T, f func(t *testing.T, b percore.Backend)) {
	t.Helper()
	for _, b := range Backends {
		t.Run(b.String(), func(t *testing.T) {
			if b == percore.IOURing {
				NeedURing(t)
			}
			f(t, b)
		})
	}
}

// RequireURingEnv names the variable that turns NeedURing's skip into a
// failure. .ci/run sets it: CI has io_uring, and a CI that skipped every
// io_uring test would pass without testing half the runtime.
const RequireURingEnv = "PERCORE_REQUIRE_URING"

var uring struct {
	once sync.Once
	err  error // why io_uring cannot be used here, or nil
}

// NeedURing skips t, saying why, where io_uring cannot be used: a kernel
// without it or without an opcode or flag the loops need, seccomp (Docker's
// default profile refuses io_uring_setup), or kernel.io_uring_disabled.
// With PERCORE_REQUIRE_URING set it fails t instead. The check starts one
// io_uring loop once per test process.
func NeedURing(t testing.TB) {
	t.Helper()
	uring.once.Do(func() {
		cores, err := cpu.Cores()
		if err != nil {
			return // the test reports it when it starts its runtime
		}
		rt, err := percore.New(percore.Config{Backend: percore.IOURing, Cores: cores[:1],
			Logger: slog.New(slog.DiscardHandler)}, nil)
		if err == nil {
			rt.Close()
			return
		}
		if errors.Is(err, ring.ErrUnavailable) {
			uring.err = err
		}
		// Any other error is the test's to report when it starts its own
		// runtime.
	})
	if uring.err == nil {
		return
	}
	if os.Getenv(RequireURingEnv) != "" {
		t.Fatalf("io_uring is unavailable here, and %s is set: %v", RequireURingEnv, uring.err)
	}
	t.Skipf("io_uring unavailable here (%v); set %s=1 to fail instead", uring.err, RequireURingEnv)
}

// waitLimit bounds every wait of these helpers: generous, since the
// machines are shared and noisy, and a test that reaches it has failed.
const waitLimit = 10 * time.Second

// WaitFor polls cond until it holds, failing the test after 10 seconds. It
// waits for a condition; it is not a sleep used as synchronisation.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Recv receives from ch, failing the test after 10 seconds; what names the
// value in the failure. A closed channel yields its zero value.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	var v T
	select {
	case v = <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("no %s within %v", what, waitLimit)
	}
	return v
}

// OnLoop runs f on l's thread and waits for it, failing the test after 10
// seconds.
func OnLoop(t testing.TB, l *percore.Loop, f func()) {
	t.Helper()
	done := make(chan struct{})
	if err := l.Post(func() { defer close(done); f() }); err != nil {
		t.Fatalf("post: %v", err)
	}
	Recv(t, done, "run of the posted function")
}

// HoldLoop holds l's thread (a posted function that waits) until the
// returned release is called, so that a test can let work pile up in the
// kernel for the loop. It returns once the loop is held, failing the test
// after 10 seconds. Call it after the runtime's start helper: the cleanup it
// registers releases the loop before the runtime's own cleanup closes it,
// also when the test fails while holding it. release is idempotent.
func HoldLoop(t testing.TB, l *percore.Loop) (release func()) {
	t.Helper()
	held, let := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(let) })
	t.Cleanup(release)
	if err := l.Post(func() { close(held); <-let }); err != nil {
		t.Fatalf("post: %v", err)
	}
	Recv(t, held, "hold of the loop")
	return release
}

// Dial connects to addr over TCP, within 5 seconds, and sets a deadline 30
// seconds ahead on every read and write, so that a test that waits for a
// reply fails instead of hanging. The connection is closed at cleanup.
func Dial(t testing.TB, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// QuietLogger writes warnings and errors to the test log (shown when the
// test fails or with -v), and drops the rest.
func QuietLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// UringFeaturesEnv names the variable that sets Config.UringFeatures
// (percore.ParseUringFeatures' names: "none", "skip_sends", ...) for every
// runtime Start starts without its own, so that the whole suite runs the
// io_uring driver without the features too: `PERCORE_URING_FEATURES=none
// go test ./...` is the path of a kernel that has none of them.
const UringFeaturesEnv = "PERCORE_URING_FEATURES"

// Start starts a runtime for a test and closes it at cleanup; it is every
// package's way to start one. Zero fields of cfg get the tests' defaults:
// one loop on the first CPU the test may use, a listener on 127.0.0.1:0
// when h is not nil, a logger that writes warnings and errors to the
// test log, and the io_uring features of PERCORE_URING_FEATURES
// (UringFeaturesEnv) when it is set. An io_uring runtime needs io_uring
// (NeedURing).
func Start(t testing.TB, cfg percore.Config, h percore.Handler) *percore.Runtime {
	t.Helper()
	if cfg.Backend == percore.IOURing {
		NeedURing(t)
	}
	if v := os.Getenv(UringFeaturesEnv); v != "" && cfg.UringFeatures == nil {
		f, err := percore.ParseUringFeatures(v)
		if err != nil {
			t.Fatalf("%s: %v", UringFeaturesEnv, err)
		}
		cfg.UringFeatures = &f
	}
	if cfg.Addr == "" && len(cfg.Listen) == 0 && len(cfg.Inherited) == 0 && h != nil {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Cores == nil {
		cores, err := cpu.Cores()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Cores = cores[:1]
	}
	if cfg.Logger == nil {
		cfg.Logger = QuietLogger(t)
	}
	rt, err := percore.New(cfg, h)
	if err != nil {
		t.Fatalf("start a runtime: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// LoopCores returns a CPU for each of n loops, the test's first n CPUs,
// and skips the test when it may use fewer: Config.Cores takes a CPU once
// (docs/decisions/0030-api-from-the-trial.md).
func LoopCores(t testing.TB, n int) []int {
	t.Helper()
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	if len(cores) < n {
		t.Skipf("needs %d CPUs for %d loops, has %s: Config.Cores takes a CPU once", n, n, cpu.FormatList(cores))
	}
	return cores[:n]
}
