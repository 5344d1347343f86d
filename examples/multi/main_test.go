//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// serverEnv makes the test binary the server itself (with the arguments
// it was started with), so that its SIGHUP restart runs this same binary.
const serverEnv = "MULTI_TEST_SERVER"

// holdEnv names a file a new process of the test server waits for before
// it starts.
const holdEnv = "MULTI_TEST_HOLD"

// nofileEnv is the descriptor limit of a new process of the test server.
const nofileEnv = "MULTI_TEST_NOFILE"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		if hold := os.Getenv(holdEnv); hold != "" && os.Getenv("PERCORE_LISTEN_PARENT") != "" {
			// A new process of TestSecondSIGHUPRefused: it starts once
			// the test says so, to hold the restart open.
			for _, err := os.Stat(hold); err != nil; _, err = os.Stat(hold) {
				time.Sleep(time.Millisecond)
			}
		}
		if n, _ := strconv.Atoi(os.Getenv(nofileEnv)); n > 0 && os.Getenv("PERCORE_LISTEN_PARENT") != "" {
			// A new process of TestRestartNewOutOfDescriptors: few
			// descriptors, so that it cannot take every connection.
			l := syscall.Rlimit{Cur: uint64(n), Max: uint64(n)}
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
				panic(err)
			}
		}
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	leakcheck.Main(m)
}

// server is one process of the test server: its pid and listeners.
type server struct {
	pid              int
	tcp, udp, unixAt string
	tls              string
}

// startPiped starts the test server (exe and args) with its output on a
// pipe and returns it, its ready lines, and the record of the new process
// a restart makes (the test fills it in): both are killed at the end.
func startPiped(t *testing.T, exe string, args ...string) (*exec.Cmd, <-chan string, *server) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), serverEnv+"=1")
	cmd.Stderr = nil // /dev/null: a pipe would keep Wait waiting for the new process, which inherits it
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	second := new(server)
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if second.pid != 0 {
			syscall.Kill(second.pid, syscall.SIGKILL)
		}
	})
	return cmd, readyLines(out, 2), second
}

// readyLines passes on the "ready" lines the test server writes to out,
// holding up to n of them.
func readyLines(out io.Reader, n int) <-chan string {
	readies := make(chan string, n)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") {
				readies <- sc.Text()
			}
		}
	}()
	return readies
}

func parseReady(t *testing.T, line string) server {
	t.Helper()
	var s server
	for _, f := range strings.Fields(line)[1:] {
		switch {
		case strings.HasPrefix(f, "pid="):
			s.pid, _ = strconv.Atoi(f[4:])
		case strings.HasPrefix(f, "tcp://"):
			s.tcp = f[6:]
		case strings.HasPrefix(f, "tls://"):
			s.tls = f[6:]
		case strings.HasPrefix(f, "udp://"):
			s.udp = f[6:]
		case strings.HasPrefix(f, "unix://"):
			s.unixAt = f[7:]
		}
	}
	if s.pid == 0 || (s.tcp == "" && s.tls == "") || (s.tls == "" && (s.udp == "" || s.unixAt == "")) {
		t.Fatalf("ready line %q", line)
	}
	return s
}

// The restart the example shows: clients on TCP and Unix connect, send and
// read in a loop while SIGHUP makes the server hand its sockets to a new
// process and exit. No request fails and no connect is refused. UDP
// answers before and after.
func TestRestartOnSIGHUP(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		dir, err := os.MkdirTemp("/tmp", "pcm")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd, readies, second := startPiped(t, exe, "-addr", "127.0.0.1:0", "-udp", "127.0.0.1:0", "-unix", filepath.Join(dir, "m.sock"),
			"-backend", b.String(), "-cores", "0", "-grace", "5s")
		first := parseReady(t, pctest.Recv(t, readies, "the server's ready line"))

		udpEcho(t, first.udp, "before")
		var requests, failures atomic.Int64
		var firstErr atomic.Value
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 6 {
			network, address := "tcp", first.tcp
			if i%2 == 1 {
				network, address = "unix", first.unixAt
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					if err := request(network, address, fmt.Sprintf("%d/%d", i, n)); err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					requests.Add(1)
				}
			}()
		}
		pctest.WaitFor(t, "requests before the restart", func() bool { return requests.Load() > 300 })
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		*second = parseReady(t, pctest.Recv(t, readies, "the new process's ready line"))
		if second.pid == first.pid || second.tcp != first.tcp || second.unixAt != first.unixAt {
			t.Fatalf("after the restart: %+v, before: %+v", *second, first)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the old process: %v", err)
		}
		after := requests.Load()
		pctest.WaitFor(t, "requests after the old process exited", func() bool { return requests.Load() > after+300 })
		close(stop)
		wg.Wait()
		if n := failures.Load(); n != 0 {
			t.Fatalf("%d of %d requests failed across the restart; first: %v", n, requests.Load(), firstErr.Load())
		}
		udpEcho(t, first.udp, "after")
		if err := syscall.Kill(second.pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		pctest.WaitFor(t, "the new process to exit", func() bool {
			return errors.Is(syscall.Kill(second.pid, 0), syscall.ESRCH)
		})
		second.pid = 0
		t.Logf("%d requests; %d after the old process exited", requests.Load(), requests.Load()-after)
	})
}

// request sends msg on a new connection and checks the echo.
func request(network, address, msg string) error {
	c, err := net.DialTimeout(network, address, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, []byte(msg)) {
		return fmt.Errorf("reply %q to %q", got, msg)
	}
	return nil
}

func udpEcho(t *testing.T, addr, msg string) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != msg {
		t.Fatalf("udp echo %q: %q, %v", msg, buf[:n], err)
	}
}
