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

	"github.com/percore/percore/cpu"
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
// checks that a full descriptor table with nobody waiting is no failure,
// that with connections waiting the loop neither exits nor spins and logs
// the episode once, and that it accepts them once others close and then
// ends the episode.
func TestAcceptBackoffOnFdExhaustion(t *testing.T) {
	if b := os.Getenv(fdChildEnv); b != "" {
		fdChild(b)
		return
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		// Without a connection cap io_uring accepts are multishot; with
		// one they are single and re-armed after each connection, which
		// at a full descriptor table fails at once with nobody waiting.
		for _, maxConns := range []int{0, 1000} {
			t.Run(fmt.Sprintf("MaxConns=%d", maxConns), func(t *testing.T) {
				testAcceptBackoff(t, fmt.Sprintf("%s,%d", b, maxConns))
			})
		}
	})
}

// testAcceptBackoff runs TestAcceptBackoffOnFdExhaustion against one child,
// configured by child ("backend,MaxConns").
func testAcceptBackoff(t *testing.T, child string) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptBackoffOnFdExhaustion$")
	cmd.Env = append(os.Environ(), fdChildEnv+"="+child)
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
	// Closing stdin makes the child close its runtime (with whatever is
	// armed on the listener then) and exit 0.
	t.Cleanup(func() {
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil && !t.Failed() {
				t.Errorf("child: %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("child did not close its runtime and exit within 10 s")
			pctest.Recv(t, exited, "exit of the killed child") // reap it
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
	// The child's answers arrive as lines; reads are bounded (Next) and
	// the child is reaped once both its outputs end.
	answers := pctest.NewInbox[string]()
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			answers.Put(sc.Text())
		}
	}()
	go func() {
		<-logDone
		<-outDone
		exited <- cmd.Wait()
	}()
	addr := answers.Next(t, "address from the child")
	// acceptErrors asks the child for its AcceptErrors count.
	acceptErrors := func() int {
		t.Helper()
		if _, err := io.WriteString(stdin, "stats\n"); err != nil {
			t.Fatal(err)
		}
		line := answers.Next(t, "stats from the child")
		n, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("child's stats %q: %v", line, err)
		}
		return n
	}
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
	// The descriptor table is now full, and every accept the loop
	// tries fails; with nobody waiting that is not a failure.
	if n := acceptErrors(); n != 0 {
		t.Fatalf("%d accept errors at the limit with no connection waiting, want 0", n)
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
			exited <- err // for the cleanup
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
	if n := acceptErrors(); n == 0 {
		t.Fatal("no accept errors counted for the episode")
	}
	logMu.Lock()
	defer logMu.Unlock()
	if n := countContaining(logs, "accept failing"); n != 1 {
		t.Fatalf("%d accept-failure log lines, want one per episode:\n%s", n, strings.Join(logs, "\n"))
	}
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
// leaves room for fdChildConns connections. It prints its address, answers
// each "stats" line on its stdin with its AcceptErrors count, and serves
// until its stdin closes.
func fdChild(config string) {
	backend, caps, _ := strings.Cut(config, ",")
	b, err := percore.ParseBackend(backend)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	maxConns, err := strconv.Atoi(caps)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// New descriptors take the lowest free numbers, and the limit bounds
	// the numbers, not the count (an inherited descriptor may sit far
	// above it). So the limit is one past the free number that the loop's
	// own three (ring or epoll, eventfd, listener) and fdChildConns
	// connections reach. It is set before the loop starts: io_uring reads
	// the limit when an accept is prepared, not when it runs.
	open := leakcheck.OpenFDs()
	fd, free := 0, 0
	for ; ; fd++ {
		if _, used := open[fd]; !used {
			if free++; free == 3+fdChildConns {
				break
			}
		}
	}
	limit := uint64(fd + 1)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cores, _ := cpu.Cores()
	rt, err := percore.New(percore.Config{Backend: b, Addr: "127.0.0.1:0", Cores: cores[:1], MaxConns: maxConns,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}, echoHandler{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(rt.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "stats" {
			fmt.Println(rt.Stats().AcceptErrors)
		}
	}
	rt.Close()
	os.Exit(0)
}
