package runtime_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/percore/percore/internal/pctest"
)

// idleServer is TestTLSIdleMemory's server in a child process (-tls.idle.mode
// exec): a program that serves the idle client's request with the idle
// reply on the address it prints ("listening ADDR"), and answers "count",
// "gc" and "free" on its input (examples/bench/baseline/tlsnbio). It runs
// where the test runs (taskset and GOMAXPROCS are inherited), and its
// memory is read from /proc as the test reads its own.
type idleServer struct {
	t    testing.TB
	pid  int
	addr string
	in   io.Writer
	out  *bufio.Reader
}

func startIdleServer(t testing.TB, path string) *idleServer {
	t.Helper()
	if path == "" {
		t.Fatal("-tls.idle.mode exec needs -tls.idle.exec PROGRAM")
	}
	_, cert, key := pctest.TestPKI().PEMFiles(t)
	cmd := exec.Command(path, "-addr", "127.0.0.1:0", "-cert", cert, "-key", key)
	in, out := startPiped(t, cmd)
	s := &idleServer{t: t, pid: cmd.Process.Pid, in: in, out: out}
	addr, ok := strings.CutPrefix(s.line(), "listening ")
	if !ok {
		t.Fatalf("%s did not say where it listens", path)
	}
	s.addr = addr
	return s
}

func (s *idleServer) line() string {
	l, err := s.out.ReadString('\n')
	if err != nil {
		s.t.Fatalf("idle server: %v", err)
	}
	return strings.TrimSpace(l)
}

func (s *idleServer) ask(cmd string) string {
	fmt.Fprintln(s.in, cmd)
	return s.line()
}

func (s *idleServer) count() int {
	n, err := strconv.Atoi(s.ask("count"))
	if err != nil {
		s.t.Fatalf("idle server count: %v", err)
	}
	return n
}

func (s *idleServer) gc()   { s.ask("gc") }
func (s *idleServer) free() { s.ask("free") }

// rss is the child's VmRSS in KiB.
func (s *idleServer) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid))
	if err != nil {
		s.t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	s.t.Fatal("no VmRSS in the idle server's status")
	return 0
}
