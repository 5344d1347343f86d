package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/examples/bench/gwproto"
	"github.com/percore/percore/examples/bench/gwproto/gwtest"
)

// TestProtocol runs the gateway in process, or, under the race detector,
// as a program built without it: nbio's accept goroutine and its pollers
// share each connection's address without synchronisation the detector
// can see (nbio marks its own functions //go:norace; the write it reports
// is net's, in Accept), so a race-enabled nbio fails every test on nbio's
// account. The test code itself still runs with the detector.
func TestProtocol(t *testing.T) {
	start := inProcess
	if raceEnabled {
		start = subprocess(t)
	}
	gwtest.Run(t, start)
}

func inProcess(t *testing.T, f gwproto.Flags) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, f) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func subprocess(t *testing.T) gwtest.Start {
	if testing.Short() {
		t.Skip("-race -short: building wsnbio without the race detector is not short")
	}
	bin := filepath.Join(t.TempDir(), "wsnbio")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return func(t *testing.T, f gwproto.Flags) string {
		cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-secret", f.Secret, "-ping-interval", f.PingInterval.String(),
			"-queue", "256", "-write-timeout", f.WriteTimeout.String())
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("wsnbio exited: %v", err)
				}
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				t.Errorf("wsnbio did not exit within 20s of SIGINT")
			}
		})
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, addr, ok := strings.Cut(sc.Text(), "listening on "); ok {
				go func() { // keep draining its stderr
					for sc.Scan() {
					}
				}()
				return addr
			}
		}
		t.Fatalf("wsnbio did not say where it listens: %v", sc.Err())
		return ""
	}
}
