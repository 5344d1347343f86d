// Package pctest holds the helpers that percore's tests share: running a
// test once per backend, waiting for a condition with a deadline, running a
// function on a loop, dialing a test server, a plain net server to stand
// in for an upstream or a peer, and a logger that writes to the test log.
package pctest

import (
	"bytes"
	"log/slog"
	"net"
	"testing"
	"time"

	percore "github.com/percore/percore/runtime"
)

// Backends are the backends every runtime test runs under.
var Backends = []percore.Backend{percore.IOURing, percore.Epoll}

// EachBackend runs f once per backend, as a named subtest.
func EachBackend(t *testing.T, f func(t *testing.T, b percore.Backend)) {
	t.Helper()
	for _, b := range Backends {
		t.Run(b.String(), func(t *testing.T) { f(t, b) })
	}
}

// WaitFor polls cond until it holds, failing the test after 10 seconds. It
// waits for a condition; it is not a sleep used as synchronisation.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// OnLoop runs f on l's thread and waits for it, failing the test after 10
// seconds.
func OnLoop(t *testing.T, l *percore.Loop, f func()) {
	t.Helper()
	done := make(chan struct{})
	if err := l.Post(func() { defer close(done); f() }); err != nil {
		t.Fatalf("post: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("posted function did not run within 10s")
	}
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
