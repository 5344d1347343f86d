//go:build linux

package tlsconn_test

import (
	"bytes"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/runtime/tlsconn"
)

// sclient is an openssl s_client process talking to an eloop.
type sclient struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	out   bytes.Buffer // stdout and stderr
	done  chan struct{}
}

func (s *sclient) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

func (s *sclient) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

func (s *sclient) waitOutput(what string) { s.t.Helper(); s.waitCount(what, 1) }

// waitCount waits for what to appear n times. s_client takes a command
// only at the start of what it reads from its input at once, so a test
// waits for each command's effect before it sends more.
func (s *sclient) waitCount(what string, n int) {
	s.t.Helper()
	waitFor(s.t, "s_client to print "+what, func() bool {
		select {
		case <-s.done:
			return true
		default:
		}
		return strings.Count(s.output(), what) >= n
	})
	if strings.Count(s.output(), what) < n {
		s.t.Fatalf("s_client ended without %q:\n%s", what, s.output())
	}
}

func (s *sclient) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		s.t.Fatalf("write to s_client: %v", err)
	}
}

func (s *sclient) wait() {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("s_client did not exit:\n%s", s.output())
	}
}

func startSClient(t *testing.T, addr, caFile string, args ...string) *sclient {
	t.Helper()
	path, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed (apt-get install -y openssl)")
	}
	s := &sclient{t: t, done: make(chan struct{})}
	base := []string{"s_client", "-connect", addr, "-servername", "example.test", "-CAfile", caFile, "-verify_return_error"}
	s.cmd = exec.Command(path, append(base, args...)...)
	s.cmd.Stdout, s.cmd.Stderr = s, s
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.stdin.Close()
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// TestOpenSSLInterop: openssl s_client, a client nobody here wrote, against
// sessions on the test loop: both versions, ALPN, resumption by
// -sess_out/-sess_in, KeyUpdate by its k and K commands, and its R
// (renegotiation) refused with an alert.
func TestOpenSSLInterop(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testPKI(t).caCert.Raw})
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, tlsconn.PoolConfig{})
	l := newEloop(t, serverConfig(t), pool)

	for _, v := range []struct{ flag, name string }{{"-tls1_2", "TLSv1.2"}, {"-tls1_3", "TLSv1.3"}} {
		t.Run(v.name, func(t *testing.T) {
			sess := filepath.Join(dir, v.name+".sess")
			s := startSClient(t, l.addr, caFile, v.flag, "-alpn", "http/1.1", "-sess_out", sess)
			s.waitOutput("Verify return code: 0 (ok)")
			s.send("hello percore")
			s.waitOutput("hello percore\n") // s_client prints what it reads, not what it sends
			out := s.output()
			for _, want := range []string{"New, " + v.name, "ALPN protocol: http/1.1"} {
				if !strings.Contains(out, want) {
					t.Errorf("s_client output lacks %q:\n%s", want, out)
				}
			}
			if v.name == "TLSv1.3" {
				s.send("k") // KeyUpdate, update_requested
				s.waitOutput("KEYUPDATE")
				s.send("after k")
				s.waitOutput("after k\n")
				s.send("K") // update_not_requested
				s.waitCount("KEYUPDATE", 2)
				s.send("after K")
				s.waitOutput("after K\n")
			}
			s.stdin.Close()
			s.wait()

			r := startSClient(t, l.addr, caFile, v.flag, "-sess_in", sess)
			r.waitOutput("Verify return code")
			r.send("again")
			r.waitOutput("again\n")
			r.stdin.Close()
			r.wait()
			if !strings.Contains(r.output(), "Reused, "+v.name) {
				t.Fatalf("the session was not resumed:\n%s", r.output())
			}
		})
	}
	t.Run("renegotiation refused", func(t *testing.T) {
		s := startSClient(t, l.addr, caFile, "-tls1_2")
		s.waitOutput("Verify return code: 0 (ok)")
		s.send("R")
		s.wait()
		// crypto/tls's server answers a ClientHello after the handshake with
		// unexpected_message (only a client has a no_renegotiation to say).
		if out := s.output(); !strings.Contains(out, "RENEGOTIATING") || !strings.Contains(out, "alert unexpected message") {
			t.Fatalf("s_client's renegotiation was not refused with an alert:\n%s", out)
		}
	})
}
