//go:build linux

package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// walBinary builds this command once per test process.
func walBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "wal-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "wal")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	t.Cleanup(func() {}) // the binary's directory goes with the process (see TestZZRemoveBinary)
	return binPath
}

// TestZZRemoveBinary removes the built binary after the other tests.
func TestZZRemoveBinary(t *testing.T) {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// server is one run of the wal binary.
type server struct {
	cmd    *exec.Cmd
	addr   string
	stderr *strings.Builder
	mu     *sync.Mutex
	done   chan error
}

// startServer runs the binary on the log in dir and waits until it
// listens.
func startServer(t *testing.T, dir string, backend percore.Backend, args ...string) *server {
	t.Helper()
	cmd := exec.Command(walBinary(t), append([]string{"-dir", dir, "-addr", "127.0.0.1:0", "-backend", backend.String()}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, stderr: &strings.Builder{}, mu: &sync.Mutex{}, done: make(chan error, 1)}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		wg.Wait()
		s.done <- cmd.Wait()
	}()
	select {
	case line := <-lines:
		m := regexp.MustCompile(`listening on (\S+)`).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unexpected first line %q", line)
		}
		s.addr = m[1]
	case err := <-s.done:
		t.Fatalf("wal exited before listening: %v\n%s", err, s.stderrText())
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("wal did not listen within 10 s")
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

func (s *server) stderrText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// stop ends the server with sig and waits for it.
func (s *server) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		t.Fatal("wal did not exit within 10 s")
	}
}

// acked is what one client was told was durable: its records' payloads by
// LSN, in the order it sent them.
type acked struct {
	lsns     []uint64
	payloads []string
}

// client sends records "c<id>-<n>" one at a time until the connection
// fails or stop closes, recording each acknowledgement.
func client(addr string, id int, stop <-chan struct{}, first chan<- struct{}) acked {
	var a acked
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return a
	}
	defer c.Close()
	var frame []byte
	ack := make([]byte, 8)
	for n := 0; ; n++ {
		select {
		case <-stop:
			return a
		default:
		}
		p := fmt.Sprintf("c%d-%d", id, n)
		frame = binary.BigEndian.AppendUint32(frame[:0], uint32(len(p)))
		frame = append(frame, p...)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(frame); err != nil {
			return a
		}
		if _, err := io.ReadFull(c, ack); err != nil {
			return a
		}
		a.lsns = append(a.lsns, binary.BigEndian.Uint64(ack))
		a.payloads = append(a.payloads, p)
		if first != nil {
			close(first)
			first = nil
		}
	}
}

// TestCrashConsistency runs clients against the server, kills it with
// SIGKILL at a random moment (seeded, so a failure repeats), and checks
// that every record it acknowledged is in the recovered log, intact, at
// its LSN and in each client's order, and that the log holds nothing a
// client did not send. The last run restarts the server on the log and
// appends after the recovered records.
func TestCrashConsistency(t *testing.T) {
	seed := uint64(20261201)
	if s := os.Getenv("WAL_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rng := rand.New(rand.NewPCG(seed, uint64(b)))
		const runs, clients = 4, 16
		for run := range runs {
			dir := t.TempDir()
			args := []string{"-depth", strconv.Itoa(1 + run%2)}
			if run%2 == 1 {
				args = append(args, "-segment-size", "4096") // rotate many times
			}
			s := startServer(t, dir, b, args...)
			stop := make(chan struct{})
			first := make(chan struct{})
			results := make([]acked, clients)
			var wg sync.WaitGroup
			for i := range clients {
				wg.Add(1)
				f := first
				if i != 0 {
					f = nil
				}
				go func() { defer wg.Done(); results[i] = client(s.addr, i, stop, f) }()
			}
			pctest.Recv(t, first, "first acknowledgement")
			delay := time.Duration(5+rng.IntN(150)) * time.Millisecond
			time.Sleep(delay) // the random moment of the crash, not synchronisation
			s.stop(t, os.Kill)
			close(stop)
			wg.Wait()

			var log []string
			rec, err := recoverLog(dir, func(p []byte) { log = append(log, string(p)) })
			if err != nil {
				t.Fatalf("run %d (seed %d): recover: %v", run, seed, err)
			}
			total := 0
			for id, a := range results {
				total += len(a.lsns)
				for i, lsn := range a.lsns {
					if lsn >= uint64(len(log)) || log[lsn] != a.payloads[i] {
						got := "<missing>"
						if lsn < uint64(len(log)) {
							got = log[lsn]
						}
						t.Fatalf("run %d (seed %d, killed after %v): client %d's acknowledged record %q at LSN %d is %s in the recovered log of %d records",
							run, seed, delay, id, a.payloads[i], lsn, got, len(log))
					}
					if i > 0 && lsn <= a.lsns[i-1] {
						t.Fatalf("run %d: client %d acknowledged LSN %d after %d", run, id, lsn, a.lsns[i-1])
					}
				}
			}
			// Every record in the log is one a client sent, each
			// client's in the order sent.
			next := make(map[int]int)
			for i, p := range log {
				var id, n int
				if _, err := fmt.Sscanf(p, "c%d-%d", &id, &n); err != nil || n != next[id] {
					t.Fatalf("run %d: record %d is %q, want client %d's record %d", run, i, p, id, next[id])
				}
				next[id]++
			}
			if total == 0 {
				t.Fatalf("run %d: nothing was acknowledged", run)
			}
			t.Logf("run %d: killed after %v; %d acknowledged, %d recovered, %d segments, torn %q", run, delay, total, len(log), rec.segments, rec.torn)
			if run == runs-1 {
				restartAndAppend(t, dir, b, uint64(len(log)))
			}
		}
	})
}

// restartAndAppend starts the server on a recovered log and checks that
// the next record gets the next LSN, and that a graceful stop reports it.
func restartAndAppend(t *testing.T, dir string, b percore.Backend, records uint64) {
	t.Helper()
	s := startServer(t, dir, b)
	if want := fmt.Sprintf("recovered %d records", records); !waitStderr(s, want) {
		t.Errorf("restart did not report %q: %s", want, s.stderrText())
	}
	stop := make(chan struct{})
	first := make(chan struct{})
	var a acked
	done := make(chan struct{})
	go func() { defer close(done); a = client(s.addr, 99, stop, first) }()
	pctest.Recv(t, first, "acknowledgement after the restart")
	close(stop)
	<-done
	if len(a.lsns) == 0 || a.lsns[0] != records {
		t.Errorf("first LSN after the restart %v, want %d", a.lsns, records)
	}
	s.stop(t, os.Interrupt)
	if !waitStderr(s, "records=") {
		t.Errorf("no counters at shutdown: %s", s.stderrText())
	}
}

// waitStderr waits until the server's stderr holds want (it is written
// before the server listens, but read by another goroutine).
func waitStderr(s *server, want string) bool {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(s.stderrText(), want) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// send writes one record and returns the LSN its acknowledgement carries.
func send(t *testing.T, c net.Conn, payload string) uint64 {
	t.Helper()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
	frame = append(frame, payload...)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, 8)
	if _, err := io.ReadFull(c, ack); err != nil {
		t.Fatalf("acknowledgement of a %d-byte record: %v", len(payload), err)
	}
	return binary.BigEndian.Uint64(ack)
}

// TestLowerMaxRecordKeepsTheLog (issue 23, fault 6): records accepted under
// one -max-record stay in the log when the server restarts with a lower
// one, in the last segment and in an earlier one: the checksum says a
// record is whole, and the limit bounds new records only. Before, recovery
// cut the log at the first record over today's limit (losing it and every
// record after it), or refused to start when it lay in an earlier segment.
func TestLowerMaxRecordKeepsTheLog(t *testing.T) {
	big := strings.Repeat("B", 3000)
	tests := []struct {
		name string
		args []string // the first run's
	}{
		{"in the last segment", []string{"-max-record", "4096"}},
		{"in an earlier segment", []string{"-max-record", "4096", "-segment-size", "2048"}},
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				dir := t.TempDir()
				s := startServer(t, dir, b, tt.args...)
				c := pctest.Dial(t, s.addr)
				want := []string{"a", big, "c", "d", "e"}
				for i, p := range want {
					if lsn := send(t, c, p); lsn != uint64(i) {
						t.Fatalf("record %d acknowledged at LSN %d", i, lsn)
					}
				}
				c.Close()
				s.stop(t, os.Interrupt)

				s = startServer(t, dir, b, "-max-record", "1024")
				if !waitStderr(s, "recovered 5 records") {
					t.Fatalf("restart with -max-record 1024: %s", s.stderrText())
				}
				c = pctest.Dial(t, s.addr)
				if lsn := send(t, c, "f"); lsn != 5 {
					t.Errorf("the next record got LSN %d, want 5", lsn)
				}
				c.Close()
				s.stop(t, os.Interrupt)
				var log []string
				if _, err := recoverLog(dir, func(p []byte) { log = append(log, string(p)) }); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(log) != fmt.Sprint(append(want, "f")) {
					t.Fatalf("the log holds %d records, want the 6 acknowledged", len(log))
				}
			})
		}
	})
}
