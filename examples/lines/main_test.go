package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/examples/internal/serverflag"
	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// start runs the server on 127.0.0.1:0 with one loop and the backend, and
// stops it (checking that the graceful shutdown succeeds) at cleanup.
func start(t *testing.T, backend string, idle time.Duration) (addr string, stop func()) {
	t.Helper()
	addr, _, stop = startWith(t, backend, func(o *options) { o.idleTimeout = idle })
	return addr, stop
}

// startWith is start with options of the test's own; it also returns the
// metrics server's address ("" without o.Metrics).
func startWith(t *testing.T, backend string, set func(*options)) (addr, metricsAddr string, stop func()) {
	t.Helper()
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	b, err := percore.ParseBackend(backend)
	if err != nil {
		t.Fatal(err)
	}
	o := options{
		Flags:           serverflag.Flags{Addr: "127.0.0.1:0", Cores: cores[:1], Backend: b},
		shutdownTimeout: 5 * time.Second,
	}
	set(&o)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]net.Addr, 1)
	done := make(chan error, 1)
	log := pctest.QuietLogger(t)
	go func() { done <- run(ctx, o, log, func(a, m net.Addr) { ready <- [2]net.Addr{a, m} }) }()
	select {
	case a := <-ready:
		addr = a[0].String()
		if a[1] != nil {
			metricsAddr = a[1].String()
		}
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run returned %v after the shutdown", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("run did not return within 30s of the shutdown")
		}
	}
	t.Cleanup(stop)
	return addr, metricsAddr, stop
}

func eachBackend(t *testing.T, f func(t *testing.T, backend string)) {
	for _, b := range []string{"uring", "epoll"} {
		t.Run(b, func(t *testing.T) {
			if b == "uring" {
				pctest.NeedURing(t)
			}
			f(t, b)
		})
	}
}

// closedBy reads until the server closes c and returns what it read. A
// close with unread bytes in the server's receive queue is a reset, which
// counts as closed too.
func closedBy(t *testing.T, c net.Conn) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := b.ReadFrom(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("waiting for the close after %q: %v", b.String(), err)
	}
	return b.String()
}

func TestProtocol(t *testing.T) {
	tests := []struct {
		name, send, want string
	}{
		{"ping", "ping\n", "pong\n"},
		{"ping with crlf", "ping\r\n", "pong\n"},
		{"echo", "echo hello world\n", "hello world\n"},
		{"echo nothing", "echo \n", "\n"},
		{"echo without text", "echo\n", "unknown command\n"},
		{"unknown", "PING\n", "unknown command\n"},
		{"empty line", "\n", "unknown command\n"},
		{"pipelined", "ping\necho a\nx\n", "pong\na\nunknown command\n"},
		{"longest line", "echo " + strings.Repeat("a", maxLine-5) + "\n", strings.Repeat("a", maxLine-5) + "\n"},
	}
	eachBackend(t, func(t *testing.T, backend string) {
		addr, _ := start(t, backend, 0)
		c := pctest.Dial(t, addr)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := io.WriteString(c, tt.send); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(tt.want))
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatalf("read %q: %v", got, err)
				}
				if string(got) != tt.want {
					t.Fatalf("sent %q, got %q, want %q", tt.send, got, tt.want)
				}
			})
		}
	})
}

func TestLineTooLong(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		addr, _ := start(t, backend, 0)
		c := pctest.Dial(t, addr)
		io.WriteString(c, "ping\n"+strings.Repeat("a", maxLine+1)+"\n")
		if got, want := closedBy(t, c), "pong\nerror: line too long\n"; got != want {
			t.Fatalf("got %q, want %q and a close", got, want)
		}
	})
}

// TestIdleTimeout: a silent connection is closed; one that talked is
// closed once it falls silent. Only the close is asserted, not its timing.
// The timeout is a second: the talking client must get its ping in before
// it, on a machine that may stall the test for a while.
func TestIdleTimeout(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		addr, _ := start(t, backend, time.Second)
		silent := pctest.Dial(t, addr)
		talked := pctest.Dial(t, addr)
		io.WriteString(talked, "ping\n")
		if got := closedBy(t, silent); got != "" {
			t.Fatalf("the silent connection read %q before its close", got)
		}
		if got := closedBy(t, talked); got != "pong\n" {
			t.Fatalf("the talking connection read %q before its close, want the pong", got)
		}
	})
}

// TestShutdown: a shutdown closes the open connections after their
// replies, refuses new ones, and run returns without error.
func TestShutdown(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		addr, stop := start(t, backend, 0)
		c := pctest.Dial(t, addr)
		io.WriteString(c, "ping\n")
		r := bufio.NewReader(c)
		if line, err := r.ReadString('\n'); err != nil || line != "pong\n" {
			t.Fatalf("read %q, %v", line, err)
		}
		stop()
		if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
			t.Fatalf("after the shutdown read %q, %v; want a clean close", rest, err)
		}
		if c2, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
			c2.Close()
			t.Fatal("a new connection was accepted after the shutdown")
		}
	})
}

// TestHandlerOnRuntime serves newHandler from a runtime of the test's own,
// as a program embedding the protocol would.
func TestHandlerOnRuntime(t *testing.T) {
	rt := pctest.Start(t, percore.Config{Logger: slog.New(slog.DiscardHandler)}, newHandler())
	c := pctest.Dial(t, rt.Addr().String())
	io.WriteString(c, "echo embedded\n")
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "embedded\n" {
		t.Fatalf("read %q, %v", line, err)
	}
}

// TestMetrics: with -metrics the server serves its loops' counters and the
// profiles on a side port.
func TestMetrics(t *testing.T) {
	eachBackend(t, func(t *testing.T, backend string) {
		addr, maddr, _ := startWith(t, backend, func(o *options) { o.Metrics = "127.0.0.1:0" })
		c := pctest.Dial(t, addr)
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "pong\n" {
			t.Fatalf("ping: %q, %v", got, err)
		}
		pctest.WaitFor(t, "a scrape that counts the accept", func() bool {
			return accepted.MatchString(pctest.HTTPGet(t, "http://"+maddr+"/metrics"))
		})
		if body := pctest.HTTPGet(t, "http://"+maddr+"/debug/pprof/"); !strings.Contains(body, "goroutine") {
			t.Errorf("/debug/pprof/ lists no goroutine profile:\n%s", body)
		}
	})
}

// accepted matches the one loop's accept counter after one connection.
var accepted = regexp.MustCompile(`\npercore_accepts_total\{cpu="\d+",loop="0"\} 1\n`)
