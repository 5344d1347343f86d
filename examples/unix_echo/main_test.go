//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/examples/internal/serverflag"
	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// socketPath returns a path in a new directory under /tmp (t.TempDir's
// can pass the 108 bytes a socket path may have), removed at cleanup.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "pcu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "echo.sock")
}

// start runs the server at path with one loop and the backend, returning
// the bound address; stop shuts it down and checks that the shutdown
// succeeded (cleanup stops it too).
func start(t *testing.T, b percore.Backend, path, mode string) (addr string, stop func()) {
	t.Helper()
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		o := options{Flags: serverflag.Flags{Addr: path, Cores: cores[:1], Backend: b}, mode: mode}
		done <- run(ctx, o, func(a net.Addr) { ready <- a })
	}()
	select {
	case a := <-ready:
		addr = a.String()
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
		if err := pctest.Recv(t, done, "run's return after the shutdown"); err != nil {
			t.Errorf("run returned %v after the shutdown", err)
		}
	}
	t.Cleanup(stop)
	return addr, stop
}

// roundTrip sends msg on a new connection to addr and checks it comes back.
func roundTrip(t *testing.T, addr, msg string) {
	t.Helper()
	c, err := net.Dial("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != msg {
		t.Fatalf("got %q back, want %q", got, msg)
	}
}

// Connections to a path and to an abstract name are echoed, the socket
// file gets the -mode bits, and the shutdown removes the file.
func TestEchoes(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		t.Run("path", func(t *testing.T) {
			path := socketPath(t)
			addr, stop := start(t, b, path, "0600")
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
				t.Errorf("socket file mode %v, want a socket with 0600", fi.Mode())
			}
			for i := range 5 {
				roundTrip(t, addr, fmt.Sprintf("hello %d", i))
			}
			stop()
			if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("after the shutdown: %v, want the socket file gone", err)
			}
		})
		t.Run("abstract", func(t *testing.T) {
			addr, _ := start(t, b, fmt.Sprintf("@percore-unix-echo-test-%d-%s", os.Getpid(), b), "")
			roundTrip(t, addr, "hello")
		})
	})
}

// A stale socket file (no server behind it) is replaced and served; a live
// server's is refused, with the reason, and left working.
func TestLeftOverSocketFile(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		t.Run("stale", func(t *testing.T) {
			path := socketPath(t)
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close() // the file stays, with nothing listening
			addr, _ := start(t, b, path, "")
			roundTrip(t, addr, "served")
		})
		t.Run("live", func(t *testing.T) {
			path := socketPath(t)
			addr, _ := start(t, b, path, "")
			err := run(context.Background(), options{Flags: serverflag.Flags{Addr: path, Backend: b}}, nil)
			if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "another server") {
				t.Errorf("second run: %v, want EADDRINUSE naming another server", err)
			}
			roundTrip(t, addr, "still served")
		})
	})
}

// A bad -backend or -cores is refused when the flags are parsed, a bad
// -mode when the server starts.
func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		parseErr bool // refused by the flag set; otherwise by run
	}{
		{"mode", []string{"-mode", "rw"}, false},
		{"backend", []string{"-backend", "nope"}, true},
		{"cores", []string{"-cores", "x"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("unix_echo", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o, err := parse(fs, append([]string{"-addr", socketPath(t)}, tt.args...))
			if tt.parseErr {
				if err == nil {
					t.Errorf("parse(%q) succeeded", tt.args)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tt.args, err)
			}
			if err := run(context.Background(), o, nil); err == nil {
				t.Error("run succeeded")
			}
		})
	}
}
