package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// childEnv, when set, makes the test binary a child server (TestMain):
// it serves the sockets ListenFiles finds with an echo handler on the
// backend the variable names, prints "ready" and the listeners, and shuts
// down gracefully when its standard input closes.
const childEnv = "PERCORE_TEST_CHILD"

func childServer() int {
	b, err := percore.ParseBackend(os.Getenv(childEnv))
	if err != nil {
		fmt.Println("child:", err)
		return 2
	}
	files, err := percore.ListenFiles()
	if err != nil || len(files) == 0 {
		fmt.Println("child: no files:", err)
		return 2
	}
	if os.Getenv("LISTEN_FDS") != "" || os.Getenv("LISTEN_PID") != "" {
		fmt.Println("child: ListenFiles left the variables set")
		return 2
	}
	cores, _ := cpu.Cores()
	rt, err := percore.New(percore.Config{Backend: b, Inherited: files, Cores: cores[:1], PacketHandler: packetEcho{},
		TLS: childTLS(), Logger: discard}, echoHandler{})
	if err != nil {
		fmt.Println("child:", err)
		return 2
	}
	for _, f := range files {
		f.Close()
	}
	var names []string
	for i, ln := range rt.Listeners() {
		names = append(names, files[i].Name()+"="+ln.String())
	}
	fmt.Println("ready", strings.Join(names, " "))
	io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		fmt.Println("child: shutdown:", err)
		return 1
	}
	return 0
}

// child runs the test binary as a child server with files as its
// descriptors 3, 4, ...; wrap makes it a systemd-style start (LISTEN_PID
// set by a shell to the child's own PID). It returns the child's ready
// line and a function that stops it and returns its exit error.
func child(t *testing.T, b percore.Backend, files []*os.File, env []string, systemd bool) (ready string, stop func() error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if systemd {
		cmd = exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" -test.run=^$`, exe)
	} else {
		cmd = exec.Command(exe, "-test.run=^$")
	}
	cmd.Env = append(append(os.Environ(), childEnv+"="+b.String()), env...)
	cmd.ExtraFiles = files
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var werr error
	stop = func() error {
		once.Do(func() {
			stdin.Close()
			werr = cmd.Wait()
		})
		return werr
	}
	t.Cleanup(func() { stop() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	ready = pctest.Recv(t, lines, "the child's ready line")
	if !strings.HasPrefix(ready, "ready") {
		t.Fatalf("child: %s", ready)
	}
	return ready, stop
}

// Sockets passed as systemd does (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES,
// descriptors from 3): the child serves a TCP, a UDP and a Unix socket it
// never bound, and names them.
func TestSystemdActivation(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer tcp.Close()
		udp, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer udp.Close()
		path := filepath.Join(shortDir(t), "act.sock")
		ux, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer ux.Close()
		tf, _ := tcp.(*net.TCPListener).File()
		uf, _ := udp.(*net.UDPConn).File()
		xf, _ := ux.(*net.UnixListener).File()
		defer tf.Close()
		defer uf.Close()
		defer xf.Close()
		ready, stop := child(t, b, []*os.File{tf, uf, xf},
			[]string{"LISTEN_FDS=3", "LISTEN_FDNAMES=web:dns:ctl"}, true)
		for _, want := range []string{"web=tcp://" + tcp.Addr().String(), "dns=udp://" + udp.LocalAddr().String(), "ctl=unix://" + path} {
			if !strings.Contains(ready, want) {
				t.Fatalf("child's listeners %q: no %q", ready, want)
			}
		}
		// Close ours: only the child serves now.
		tcp.Close()
		udp.Close()
		ux.(*net.UnixListener).SetUnlinkOnClose(false)
		ux.Close()
		echoOnce(t, pctest.Dial(t, tcp.Addr().String()), "activated tcp")
		echoOnce(t, dialUnix(t, path), "activated unix")
		u, err := net.Dial("udp", udp.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		_ = u.SetDeadline(time.Now().Add(20 * time.Second))
		echoOnce(t, u, "activated udp")
		if err := stop(); err != nil {
			t.Fatalf("child: %v", err)
		}
	})
}

// In-process: a runtime serves sockets opened elsewhere, and its
// listeners say they were inherited.
func TestInheritedFiles(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tf, _ := tcp.(*net.TCPListener).File()
		tcp.Close() // the file keeps the socket
		rt := start(t, percore.Config{Backend: b, Inherited: []*os.File{tf}, Cores: allCores(t)}, echoHandler{})
		tf.Close() // New took its own duplicates
		ln := rt.Listeners()[0]
		if !ln.Inherited || !ln.Shared || ln.Network != "tcp" {
			t.Fatalf("listener %+v", ln)
		}
		for i := range 20 {
			echoOnce(t, pctest.Dial(t, ln.Addr.String()), fmt.Sprint("inherited ", i))
		}

		// What cannot be served is refused clearly: a file that is not
		// a socket, a stream socket that does not listen.
		notSock, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer notSock.Close()
		c := pctest.Dial(t, ln.Addr.String())
		cf, _ := c.File()
		defer cf.Close()
		for _, f := range []*os.File{notSock, cf} {
			if _, err := percore.New(percore.Config{Backend: b, Inherited: []*os.File{f}, Cores: allCores(t)[:1], Logger: discard}, echoHandler{}); err == nil {
				t.Errorf("New served %s", f.Name())
			}
		}
	})
}

// The zero-downtime restart: clients connect, send and read without a
// pause while the serving process hands its sockets (every loop's
// SO_REUSEPORT socket) to a new process and shuts down gracefully. Every
// request is answered and no connect fails: the sockets are never closed
// while anyone holds them, so nothing waiting in an accept queue is reset.
func TestRestartHandover(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		path := filepath.Join(shortDir(t), "restart.sock")
		old, err := percore.New(percore.Config{Backend: b, Addr: "127.0.0.1:0", Listen: []string{"unix://" + path},
			Cores: allCores(t), Logger: pctest.QuietLogger(t)}, echoHandler{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { old.Close() })
		addr := old.Addr().String()

		var requests, failures atomic.Int64
		var firstErr atomic.Value
		stopClients := make(chan struct{})
		var wg sync.WaitGroup
		client := func(network, address string, id int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stopClients:
					return
				default:
				}
				msg := fmt.Appendf(nil, "client %d request %d", id, i)
				c, err := net.DialTimeout(network, address, 5*time.Second)
				if err == nil {
					_ = c.SetDeadline(time.Now().Add(10 * time.Second))
					var got []byte
					got, err = roundTrip(c, msg)
					if err == nil && !bytes.Equal(got, msg) {
						err = fmt.Errorf("reply %q to %q", got, msg)
					}
					c.Close()
				}
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprint(err))
				}
				requests.Add(1)
			}
		}
		for i := range 4 {
			wg.Add(2)
			go client("tcp", addr, i)
			go client("unix", path, 100+i)
		}
		pctest.WaitFor(t, "requests before the restart", func() bool { return requests.Load() > 200 })

		files, err := old.ListenerFiles()
		if err != nil {
			t.Fatal(err)
		}
		if want := len(old.Loops()) + 1; len(files) != want {
			t.Fatalf("%d files, want %d (one per loop for TCP, one for Unix)", len(files), want)
		}
		_, stop := child(t, b, files, percore.HandoverEnv(files), false)
		for _, f := range files {
			f.Close()
		}
		before := requests.Load()
		if err := old.Shutdown(shutdownCtx(t, 20*time.Second)); err != nil {
			t.Fatalf("the old process's shutdown: %v", err)
		}
		pctest.WaitFor(t, "requests after the restart", func() bool { return requests.Load() > before+400 })
		close(stopClients)
		wg.Wait()
		if n := failures.Load(); n != 0 {
			t.Fatalf("%d of %d requests failed across the restart; first: %v", n, requests.Load(), firstErr.Load())
		}
		if err := stop(); err != nil {
			t.Fatalf("child: %v", err)
		}
		// An inherited Unix socket's file belongs to whoever bound it
		// (systemd, or the first process): it stays, stale, and the
		// next bind clears it.
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			t.Fatal("the socket still answers after the new process shut down")
		}
		t.Logf("%d requests, %d after the old process began to shut down", requests.Load(), requests.Load()-before)
	})
}

// HandoverEnv and ListenFiles agree, and ListenFiles ignores variables
// meant for another process.
func TestListenFilesIgnoresOthers(t *testing.T) {
	t.Setenv("LISTEN_PID", "1")
	t.Setenv("LISTEN_FDS", "2")
	files, err := percore.ListenFiles()
	if err != nil || files != nil {
		t.Fatalf("ListenFiles for pid 1: %v, %v", files, err)
	}
	if os.Getenv("LISTEN_FDS") != "" {
		t.Fatal("LISTEN_FDS left set")
	}
	t.Setenv("LISTEN_PID", fmt.Sprint(os.Getpid()))
	t.Setenv("LISTEN_FDS", "x")
	if _, err := percore.ListenFiles(); err == nil {
		t.Fatal("a malformed LISTEN_FDS is no error")
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := percore.HandoverEnv([]*os.File{f})
	if !slicesContains(env, "LISTEN_FDS=1") || !slicesContains(env, fmt.Sprintf("PERCORE_LISTEN_PARENT=%d", os.Getpid())) {
		t.Fatalf("HandoverEnv %v", env)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
