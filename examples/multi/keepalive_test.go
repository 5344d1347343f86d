//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// startServer starts the test server with its stderr in a file of dir and
// returns its first ready line, the channel of the later ones and the
// command.
func startServer(t *testing.T, b percore.Backend, dir string, env ...string) (server, <-chan string, *exec.Cmd, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "stderr")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	cmd := exec.Command(exe, "-addr", "127.0.0.1:0", "-udp", "127.0.0.1:0", "-unix", filepath.Join(dir, "m.sock"),
		"-backend", b.String(), "-cores", "0", "-grace", "10s")
	cmd.Env = append(append(os.Environ(), serverEnv+"=1"), env...)
	cmd.Stderr = logf // a file: a pipe would keep Wait waiting for the new process, which inherits it
	// A pipe of the test's own: StdoutPipe's would close when the first
	// process is waited for, and the later ones write their ready lines
	// to it.
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	readies := readyLines(out, 64)
	first := parseReady(t, pctest.Recv(t, readies, "the server's ready line"))
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return first, readies, cmd, logPath
}

// gone waits until process pid has exited.
func gone(t *testing.T, pid int) {
	t.Helper()
	pctest.WaitFor(t, fmt.Sprintf("process %d to exit", pid), func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
}

// The run: 20 clients that keep each connection for 5 echo
// requests and then reconnect, TCP and Unix, while the server restarts on
// SIGHUP, one restart after the other. No request fails: the connections
// move to the new process instead of being closed under their clients.
func TestRestartKeptAlive(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		dir, err := os.MkdirTemp("/tmp", "pck")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		cur, readies, cmd, logPath := startServer(t, b, dir)
		var pids []int
		t.Cleanup(func() {
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		var requests, failures atomic.Int64
		var firstErr atomic.Value
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 20 {
			network, address := "tcp", cur.tcp
			if i%2 == 1 {
				network, address = "unix", cur.unixAt
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
					if err := keptAlive(network, address, fmt.Sprintf("%d/%d", i, n), 5); err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
					}
					requests.Add(5)
				}
			}()
		}
		const restarts = 5
		for r := range restarts {
			before := requests.Load()
			pctest.WaitFor(t, "requests before the restart", func() bool { return requests.Load() > before+500 })
			if err := syscall.Kill(cur.pid, syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			var line string
			select {
			case line = <-readies:
			case <-time.After(30 * time.Second):
				log, _ := os.ReadFile(logPath)
				t.Fatalf("restart %d: no ready line in 30s:\n%s", r, log)
			}
			next := parseReady(t, line)
			pids = append(pids, next.pid)
			if r == 0 {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("the first process: %v", err)
				}
			} else {
				gone(t, cur.pid)
			}
			cur = next
		}
		after := requests.Load()
		pctest.WaitFor(t, "requests after the last restart", func() bool { return requests.Load() > after+500 })
		close(stop)
		wg.Wait()
		if n := failures.Load(); n != 0 {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("%d of %d kept-alive connections failed across %d restarts; first: %v\n%s", n, requests.Load()/5, restarts, firstErr.Load(), log)
		}
		log, _ := os.ReadFile(logPath)
		if !bytes.Contains(log, []byte("multi: handed over")) {
			t.Fatalf("no hand-over logged:\n%s", log)
		}
		t.Logf("%d requests on kept-alive connections across %d restarts", requests.Load(), restarts)
	})
}

// keptAlive sends k requests on one connection and checks each echo.
func keptAlive(network, address, tag string, k int) error {
	c, err := net.DialTimeout(network, address, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 64)
	for j := range k {
		msg := fmt.Appendf(nil, "%s#%d", tag, j)
		if _, err := c.Write(msg); err != nil {
			return fmt.Errorf("request %d of %s: %w", j, tag, err)
		}
		if _, err := io.ReadFull(c, got[:len(msg)]); err != nil {
			return fmt.Errorf("reply %d of %s: %w", j, tag, err)
		}
		if !bytes.Equal(got[:len(msg)], msg) {
			return fmt.Errorf("reply %q to %q", got[:len(msg)], msg)
		}
	}
	return nil
}

// A second SIGHUP while a restart runs starts no second copy: it is
// refused with a log line, and the one restart completes.
func TestSecondSIGHUPRefused(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "pcs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	hold := filepath.Join(dir, "go")
	first, readies, cmd, logPath := startServer(t, percore.Epoll, dir, holdEnv+"="+hold)
	// Hold connections so that the hand-over has work to do.
	var conns []net.Conn
	for range 50 {
		c, err := net.DialTimeout("tcp", first.tcp, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	logHas := func(s string) func() bool {
		return func() bool {
			log, _ := os.ReadFile(logPath)
			return bytes.Contains(log, []byte(s))
		}
	}
	if err := syscall.Kill(first.pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The new process waits for the hold file: the restart is under way
	// until the test creates it.
	pctest.WaitFor(t, "the restart to begin", logHas("starting a new process"))
	if err := syscall.Kill(first.pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	pctest.WaitFor(t, "the second SIGHUP refused", logHas("signal ignored"))
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	second := parseReady(t, pctest.Recv(t, readies, "the new process's ready line"))
	t.Cleanup(func() { syscall.Kill(second.pid, syscall.SIGKILL) })
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the old process: %v", err)
	}
	select {
	case line := <-readies:
		t.Fatalf("a second new process: %s", line)
	default:
	}
	for i, c := range conns {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		msg := fmt.Appendf(nil, "c%d", i)
		got := make([]byte, len(msg))
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("connection %d after the restart: %q, %v", i, got, err)
		}
	}
}

// The old process killed (SIGKILL) as the new one becomes ready, wherever
// its hand-over has got to then (usually before the first batch): the new
// process lives on and serves what arrived, and every other client sees
// its connection end; none is left hanging. (The kill after a given batch,
// deterministically: runtime's TestHandoverOldProcessDies.)
func TestRestartOldKilled(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		dir, err := os.MkdirTemp("/tmp", "pcx")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		first, readies, cmd, logPath := startServer(t, b, dir)
		const n = 1000
		conns := make([]net.Conn, n)
		for i := range conns {
			c, err := net.DialTimeout("tcp", first.tcp, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
			conns[i] = c
		}
		if err := syscall.Kill(first.pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		second := parseReady(t, pctest.Recv(t, readies, "the new process's ready line"))
		t.Cleanup(func() { syscall.Kill(second.pid, syscall.SIGKILL) })
		cmd.Process.Kill()
		cmd.Wait()
		served, ended := 0, 0
		for i, c := range conns {
			msg := fmt.Appendf(nil, "c%d", i)
			got := make([]byte, len(msg))
			_, err := c.Write(msg)
			if err == nil {
				_, err = io.ReadFull(c, got)
			}
			switch {
			case err == nil && bytes.Equal(got, msg):
				served++
			case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
				ended++
			default:
				t.Fatalf("connection %d: %q, %v", i, got, err)
			}
		}
		if err := syscall.Kill(second.pid, 0); err != nil {
			t.Fatalf("the new process: %v", err)
		}
		log, _ := os.ReadFile(logPath)
		t.Logf("%d served by the new process, %d ended with the old one", served, ended)
		if !bytes.Contains(log, []byte("adopted connections from the old process")) {
			t.Fatalf("the new process did not end its adoption:\n%s", log)
		}
	})
}

// The new process runs out of descriptors during the hand-over (its
// limit is 64): the kernel passes it part of a batch, it adopts those,
// and the old process keeps the rest and closes them the protocol's way
// (an echo has no goodbye: a close once idle), counted and logged. Every
// client is answered by the new process or sees its connection end.
func TestRestartNewOutOfDescriptors(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		dir, err := os.MkdirTemp("/tmp", "pcn")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		first, readies, cmd, logPath := startServer(t, b, dir, nofileEnv+"=64")
		const n = 300
		conns := make([]net.Conn, n)
		for i := range conns {
			c, err := net.DialTimeout("tcp", first.tcp, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
				t.Fatal(err)
			}
			conns[i] = c
		}
		if err := syscall.Kill(first.pid, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		second := parseReady(t, pctest.Recv(t, readies, "the new process's ready line"))
		t.Cleanup(func() { syscall.Kill(second.pid, syscall.SIGKILL) })
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the old process: %v", err)
		}
		served, ended := 0, 0
		for i, c := range conns {
			msg := fmt.Appendf(nil, "c%d", i)
			got := make([]byte, len(msg))
			_, err := c.Write(msg)
			if err == nil {
				_, err = io.ReadFull(c, got)
			}
			switch {
			case err == nil && bytes.Equal(got, msg):
				served++
			case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
				ended++
			default:
				t.Fatalf("connection %d: %q, %v", i, got, err)
			}
		}
		log, _ := os.ReadFile(logPath)
		m := regexp.MustCompile(`multi: handed over" connections=(\d+) declined=0 failed=(\d+)`).FindSubmatch(log)
		if m == nil {
			t.Fatalf("no hand-over line:\n%s", log)
		}
		handed, _ := strconv.Atoi(string(m[1]))
		failed, _ := strconv.Atoi(string(m[2]))
		if served == 0 || ended == 0 || handed != served || failed != ended || handed+failed != n {
			t.Fatalf("served %d ended %d; the old process: handed %d failed %d\n%s", served, ended, handed, failed, log)
		}
		if !bytes.Contains(log, []byte("received part of a batch")) {
			t.Fatalf("the new process did not log its partial batch:\n%s", log)
		}
		t.Logf("%d moved, %d closed by the old process", served, ended)
	})
}
