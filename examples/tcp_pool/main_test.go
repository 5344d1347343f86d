package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/examples/internal/serverflag"
	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// lineClient is a client of the front with a deadline on every exchange.
type lineClient struct {
	c net.Conn
	r *bufio.Reader
}

func dialFront(t *testing.T, s *server) *lineClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.rt.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &lineClient{c: c, r: bufio.NewReader(c)}
}

// ask sends lines (pipelined) and returns the answers.
func (lc *lineClient) ask(lines ...string) ([]string, error) {
	lc.c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := lc.c.Write([]byte(strings.Join(lines, ""))); err != nil {
		return nil, err
	}
	var answers []string
	for range lines {
		a, err := lc.r.ReadString('\n')
		if err != nil {
			return answers, err
		}
		answers = append(answers, a)
	}
	return answers, nil
}

func startFront(t *testing.T, b percore.Backend, upstream string, max int) *server {
	t.Helper()
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	s, err := start(config{
		Flags: serverflag.Flags{Addr: "127.0.0.1:0", Cores: cores, Backend: b}, upstream: upstream,
		max: max, wait: 5 * time.Second, timeout: 5 * time.Second, maxLine: 1024,
		logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

func TestEndToEnd(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := pctest.Serve(t, pctest.LineEcho)
		const max, clients, requests = 2, 8, 40
		s := startFront(t, b, up.Addr(), max)
		loops := len(s.rt.Loops())

		// Requests succeed, pipelined too, with at most max
		// upstream connections per loop.
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for i := range clients {
			lc := dialFront(t, s)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range requests {
					lines := []string{fmt.Sprintf("client %d request %d\n", i, j),
						fmt.Sprintf("client %d request %d bis\n", i, j)}
					got, err := lc.ask(lines...)
					if err != nil {
						errs <- err
						return
					}
					for k := range lines {
						if got[k] != lines[k] {
							errs <- fmt.Errorf("asked %q, got %q", lines[k], got[k])
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("%d loops, %d upstream connections accepted", loops, up.Accepted())
		if n := up.Accepted(); n > max*loops || n == 0 {
			t.Errorf("the upstream accepted %d connections; want 1 to %d (%d per loop)", n, max*loops, max)
		}

		// A dead upstream gives error replies, not a hang.
		lc := dialFront(t, s)
		up.Kill()
		for i := range 5 {
			got, err := lc.ask(fmt.Sprintf("while down %d\n", i))
			if err != nil {
				t.Fatalf("while the upstream is down: %v", err)
			}
			if !strings.HasPrefix(got[0], "ERR ") {
				t.Fatalf("while the upstream is down: answer %q, want ERR", got[0])
			}
			t.Logf("while down: %q", got[0])
		}

		// Restarted, it serves again, and the front was not restarted.
		if err := up.Start(); err != nil {
			t.Fatalf("restart the upstream on %s: %v", up.Addr(), err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := lc.ask("back\n")
			if err != nil {
				t.Fatal(err)
			}
			if got[0] == "back\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the front did not recover: %q", got[0])
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestProtocolLimits(t *testing.T) {
	up := pctest.Serve(t, pctest.LineEcho)
	s := startFront(t, percore.Epoll, up.Addr(), 1)
	lc := dialFront(t, s)
	got, err := lc.ask(strings.Repeat("x", 2000) + "\n")
	if err != nil || got[0] != "ERR request line too long\n" {
		t.Fatalf("a line over -max-line: %q, %v", got, err)
	}
}

// heldEcho is a line echo upstream that tells got every line it receives
// and holds its reply until release is closed.
type heldEcho struct {
	*pctest.Server
	got     chan string
	release chan struct{}
}

func startHeldEcho(t *testing.T) *heldEcho {
	t.Helper()
	e := &heldEcho{got: make(chan string, 16), release: make(chan struct{})}
	e.Server = pctest.Serve(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			e.got <- line
			<-e.release
			if _, err := c.Write([]byte(line)); err != nil {
				return
			}
		}
	})
	// Cleanups run last first: this releases the handlers before the
	// server's cleanup waits for them.
	t.Cleanup(func() {
		select {
		case <-e.release:
		default:
			close(e.release)
		}
	})
	return e
}

// TestShutdownAnswersAPendingRequest: a request waiting for its upstream
// reply when a graceful Shutdown begins still gets its answer, before the
// shutdown's deadline; only then do the client and upstream connections
// close.
func TestShutdownAnswersAPendingRequest(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := startHeldEcho(t)
		s := startFront(t, b, up.Addr(), 1)
		addr := s.rt.Addr().String()
		lc := dialFront(t, s)
		lc.c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := lc.c.Write([]byte("pending\n")); err != nil {
			t.Fatal(err)
		}
		pctest.Recv(t, up.got, "request at the upstream")

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut := make(chan error, 1)
		go func() { shut <- s.rt.Shutdown(ctx) }()
		// The shutdown has begun on every loop once none accepts.
		pctest.WaitFor(t, "the listeners to close", func() bool {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return true
			}
			c.Close()
			return false
		})
		close(up.release)

		if got, err := lc.r.ReadString('\n'); got != "pending\n" || err != nil {
			t.Fatalf("answer %q, %v; want the upstream's reply", got, err)
		}
		if _, err := lc.r.ReadByte(); err != io.EOF {
			t.Errorf("after the answer: %v, want the front's close (EOF)", err)
		}
		select {
		case err := <-shut:
			if err != nil {
				t.Errorf("Shutdown: %v, want nil (done before its deadline)", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Shutdown did not return")
		}
	})
}

// TestBannerSaysTheLimitInForce: -max 0 is the pool's default, and the
// banner says so instead of "at most 0".
func TestBannerSaysTheLimitInForce(t *testing.T) {
	up := pctest.Serve(t, pctest.LineEcho)
	for _, tc := range []struct {
		name string
		max  int
		want string
	}{
		{"default", 0, "at most 10 upstream connections"},
		{"explicit", 3, "at most 3 upstream connections"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startFront(t, percore.Epoll, up.Addr(), tc.max)
			if got := s.banner(config{upstream: up.Addr()}); !strings.Contains(got, tc.want) {
				t.Errorf("banner %q does not say %q", got, tc.want)
			}
		})
	}
}

// TestMetrics: with -metrics the front serves its loops' and its pool's
// counters on a side port.
func TestMetrics(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := pctest.Serve(t, pctest.LineEcho)
		cores, err := cpu.Cores()
		if err != nil {
			t.Fatal(err)
		}
		cfg := config{
			Flags: serverflag.Flags{Addr: "127.0.0.1:0", Cores: cores[:1], Backend: b, Metrics: "127.0.0.1:0"}, upstream: up.Addr(),
			max: 2, wait: 5 * time.Second, timeout: 5 * time.Second, maxLine: 1024,
			logger: slog.New(slog.DiscardHandler),
		}
		s, err := start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.close)
		if got := s.banner(cfg); !strings.Contains(got, "metrics on http://"+s.metrics.Addr().String()+"/metrics") {
			t.Errorf("the banner does not say where the metrics are: %s", got)
		}
		if got, err := dialFront(t, s).ask("hello\n"); err != nil || got[0] != "hello\n" {
			t.Fatalf("ask: %q, %v", got, err)
		}
		url := "http://" + s.metrics.Addr().String() + "/metrics"
		var body string
		pctest.WaitFor(t, "a scrape that shows the request", func() bool {
			body = pctest.HTTPGet(t, url)
			return strings.Contains(body, "\npercore_pool_connections_created_total{pool=\"upstream\"} 1\n") &&
				strings.Contains(body, "\npercore_accepts_total{cpu=")
		})
		for _, want := range []string{
			"\npercore_pool_gets_total{pool=\"upstream\",result=\"waited\"} 1\n",
			"\npercore_pool_connections{pool=\"upstream\"} 1\n",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	})
}
