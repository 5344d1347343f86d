package runtime_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"golang.org/x/sys/unix"
)

const fdChildEnv = "PERCORE_FD_CHILD"

// fdChildConns is how many connections the child's descriptor limit
// leaves room for.
const fdChildConns = 5

// TestAcceptBackoffOnFdExhaustion runs an echo server in a child process
// whose RLIMIT_NOFILE leaves room for five connections, opens ten, and
// checks that the loop neither exits nor spins, logs the episode once, and
// accepts the waiting connections once others close.
func TestAcceptBackoffOnFdExhaustion(t *testing.T) {
	if b := os.Getenv(fdChildEnv); b != "" {
		fdChild(b)
		return
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptBackoffOnFdExhaustion$")
		cmd.Env = append(os.Environ(), fdChildEnv+"="+b.String())
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		t.Cleanup(func() {
			stdin.Close()
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
			}
		})

		var logMu sync.Mutex
		var logs []string
		failing := make(chan struct{}, 1)
		again := make(chan struct{}, 1)
		logDone := make(chan struct{})
		go func() {
			defer close(logDone)
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				logMu.Lock()
				logs = append(logs, sc.Text())
				logMu.Unlock()
				if strings.Contains(sc.Text(), "accept failing") {
					select {
					case failing <- struct{}{}:
					default:
					}
				}
				if strings.Contains(sc.Text(), "accepting again") {
					select {
					case again <- struct{}{}:
					default:
					}
				}
			}
		}()
		addr, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			t.Fatalf("child gave no address: %v", err)
		}
		go func() { <-logDone; exited <- cmd.Wait() }()
		addr = strings.TrimSpace(addr)

		// Phase 1: as many connections as the limit allows, all served.
		var first []net.Conn
		for range fdChildConns {
			c := pctest.Dial(t, addr)
			if got, err := roundTrip(c, []byte("1")); err != nil || string(got) != "1" {
				t.Fatalf("connection within the limit: %q %v", got, err)
			}
			first = append(first, c)
		}
		// Phase 2: more; they complete the handshake into the backlog
		// and wait there while accept fails with EMFILE.
		var second []net.Conn
		for range fdChildConns {
			c := pctest.Dial(t, addr)
			if _, err := c.Write([]byte("2")); err != nil {
				t.Fatal(err)
			}
			second = append(second, c)
		}
		// awaitLog waits for a log line the scanner signals on ch.
		awaitLog := func(ch <-chan struct{}, what string) {
			t.Helper()
			select {
			case <-ch:
			case err := <-exited:
				t.Fatalf("child exited waiting for %s: %v", what, err)
			case <-time.After(15 * time.Second):
				logMu.Lock()
				defer logMu.Unlock()
				t.Fatalf("no %s; the child said:\n%s", what, strings.Join(logs, "\n"))
			}
		}
		awaitLog(failing, "accept-failure log line")
		// The loop does not spin: over half a second of the episode the
		// child uses well under a quarter of a CPU (a spinning loop uses
		// all of one).
		before := cpuTicks(t, cmd.Process.Pid)
		window := time.Now()
		time.Sleep(500 * time.Millisecond) // the measurement window
		used := float64(cpuTicks(t, cmd.Process.Pid)-before) / 100 / time.Since(window).Seconds()
		if used > 0.25 {
			t.Fatalf("child used %.0f%% of a CPU during the episode", used*100)
		}
		// Closing the first connections frees descriptors, one at a time
		// as the loop sees each close: the waiting ones are accepted and
		// answered, and the episode ends once accepting stops failing.
		for _, c := range first {
			c.Close()
		}
		for _, c := range second {
			got := make([]byte, 1)
			if _, err := io.ReadFull(c, got); err != nil || string(got) != "2" {
				t.Fatalf("waiting connection after recovery: %q %v", got, err)
			}
		}
		awaitLog(again, "end of the episode")
		logMu.Lock()
		defer logMu.Unlock()
		if n := countContaining(logs, "accept failing"); n != 1 {
			t.Fatalf("%d accept-failure log lines, want one per episode:\n%s", n, strings.Join(logs, "\n"))
		}
	})
}

func countContaining(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// cpuTicks returns a process's utime+stime in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st
}

// fdChild is the child's side: an echo server whose descriptor limit
// leaves room for fdChildConns connections. It prints its address and
// serves until its stdin closes.
func fdChild(backend string) {
	b, err := percore.ParseBackend(backend)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// New descriptors take the lowest free numbers below the limit, so
	// the limit is what is open now, plus the loop's own three (ring or
	// epoll, eventfd, listener), plus room for the connections. It is set
	// before the loop starts: io_uring reads the limit when an accept is
	// prepared, not when it runs.
	limit := uint64(len(leakcheck.OpenFDs()) + 3 + fdChildConns)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cores, _ := cpuCores()
	rt, err := percore.New(percore.Config{Backend: b, Addr: "127.0.0.1:0", Cores: cores[:1],
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}, echoHandler{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(rt.Addr())
	io.Copy(io.Discard, os.Stdin)
	rt.Close()
	os.Exit(0)
}
