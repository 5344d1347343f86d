package scripts_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// benchLatency runs scripts/bench-latency.sh with args and env added to
// the environment, and returns its exit status and output.
func benchLatency(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	cmd := exec.Command("bash", append([]string{"bench-latency.sh"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestBenchLatencyHelp(t *testing.T) {
	t.Parallel()
	code, out := benchLatency(t, nil, "--help")
	if code != 0 {
		t.Fatalf("--help: exit status %d:\n%s", code, out)
	}
	for _, want := range []string{"Usage: scripts/bench-latency.sh [--dry-run]", "FRACTIONS", "What it changes", "Undo:", "vegeta"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "set -euo") {
		t.Errorf("--help printed the script's code:\n%s", out)
	}
}

// TestBenchLatencyPlans checks --dry-run: it validates the settings and
// prints every command it would run, in order, and runs none.
func TestBenchLatencyPlans(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	tests := []struct {
		name     string
		env      []string
		wantCode int
		want     []string
		dontWant []string
	}{
		{"defaults", nil, 0, []string{
			"-conns 50 -bytes 64 -max-inflight 16 -warmup 1 -seconds 3 -json -server-pid 0 -rates 10%,50%,80%,90%,100%",
			"liburing-echo 127.0.0.1:", "/netpoll -addr", "/gnet -addr", "/stdnet -addr", "-backend epoll",
			"-conns 1000 -http /plaintext -http-body Hello, World!", "nginx -c", "/fasthttp -addr", "/gnethttp -addr",
			"-engine resp -bytes 64 -resp-get 50 -resp-keys 10000", "redis-server --port",
			"-rate 80000", // the floors, at 80% of the (dry-run) capacity of 100000
			"vegeta attack -rate 5000/s -max-connections 50", "-rate 20000",
			"benchplot -latency -in",
		}, nil},
		{"one protocol, own steps", []string{"PROTOCOLS=echo", "CONNS=8", "FRACTIONS=25 75", "ECHO_SERVERS=percore-uring netpoll", "REPEATS=2"},
			0, []string{"-conns 8 -bytes 64", "-rates 25%,75%", "repeats 1..2"}, []string{"nginx", "vegeta", "redis", "liburing", "-conns 50"}},
		{"floors only of what was measured", []string{"PROTOCOLS=echo", "CONNS=8", "ECHO_SERVERS=percore-uring stdnet"},
			0, []string{"no capacity of netpoll"}, []string{"-rate 80000"}},
		{"batch of later repeats", []string{"PROTOCOLS=resp", "CONNS=50", "REPEATS=1", "REPEAT_FROM=3"}, 0, []string{"repeats 3..3"}, []string{"vegeta"}},
		{"no floors, no vegeta", []string{"PROTOCOLS=http", "CONNS=50", "FLOORS=0", "VEGETA=0"}, 0, []string{"-rates 10%"}, []string{"-rate 80000", "vegeta"}},
		{"more load flags", []string{"PROTOCOLS=echo", "CONNS=8", "ECHO_SERVERS=percore-uring netpoll", "LOAD_ARGS=-spin 1ms"},
			0, []string{"-server-pid 0 -spin 1ms -rates 10%", "-server-pid 0 -spin 1ms -rate 80000"}, nil},
		{"summary only", []string{"SUMMARY_ONLY=1"}, 0, []string{"benchplot -latency"}, []string{"./load", "-rates"}},
		{"unknown protocol", []string{"PROTOCOLS=echo ftp"}, 2, []string{"unknown protocol ftp"}, nil},
		{"unknown server", []string{"PROTOCOLS=http", "HTTP_SERVERS=percore apache"}, 2, []string{"unknown http server apache"}, nil},
		{"bad connection count", []string{"CONNS=50 lots"}, 2, []string{"'lots' is not a positive whole number"}, nil},
		{"zero fraction", []string{"FRACTIONS=0 50"}, 2, []string{"'0' is not a positive whole number"}, nil},
		{"bad window", []string{"WINDOW=3s"}, 2, []string{"WARMUP and WINDOW are seconds"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, got := benchLatency(t, append([]string{"OUT=" + out}, tt.env...), "--dry-run")
			if code != tt.wantCode {
				t.Fatalf("exit status %d, want %d:\n%s", code, tt.wantCode, got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.dontWant {
				if strings.Contains(got, w) {
					t.Errorf("output has %q:\n%s", w, got)
				}
			}
		})
	}
	if entries, err := os.ReadDir(out); err != nil || len(entries) != 0 {
		t.Errorf("--dry-run wrote into OUT: %v %v", entries, err)
	}
	if code, got := benchLatency(t, nil, "--fast"); code != 2 || !strings.Contains(got, "unknown argument --fast") {
		t.Errorf("an unknown argument: exit status %d, output:\n%s", code, got)
	}
}

// TestBenchLatencyRuns runs the script for real, small: two echo servers at
// two steps, a few hundred milliseconds each, and checks what it records
// and summarises (not the numbers).
func TestBenchLatencyRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds servers, the load generator and benchplot")
	}
	for _, tool := range []string{"bash", "go", "taskset", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	out := t.TempDir()
	code, got := benchLatency(t, []string{"OUT=" + out, "PROTOCOLS=echo", "ECHO_SERVERS=percore-epoll netpoll", "CONNS=4",
		"REPEATS=1", "FRACTIONS=20 50", "WARMUP=0.1", "WINDOW=0.3", "BASE_PORT=28950", "CLIENT_CPUS=0", "SERVER_CPUS=0"})
	if code != 0 {
		t.Fatalf("exit status %d:\n%s", code, got)
	}
	f, err := os.Open(filepath.Join(out, "latency-runs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			Kind, Server string
			Conns        int
			Load         struct {
				Step string
				Rate float64
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		key := r.Kind + " " + r.Server + " " + r.Load.Step
		if r.Kind != "sweep" {
			key = r.Kind + " " + r.Server
		}
		seen[key] = true
	}
	for _, want := range []string{"sweep percore-epoll capacity", "sweep percore-epoll 20%", "sweep percore-epoll 50%",
		"sweep netpoll capacity", "sweep netpoll 50%", "floor-netpoll percore-epoll", "floor-netpoll netpoll"} {
		if !seen[want] {
			t.Errorf("latency-runs.jsonl lacks a run %q (has %v)", want, seen)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "latency-summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## echo, 4 connections", "Where p99 crosses 1 ms", "The floors", "| echo | 4 | percore-epoll |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("latency-summary.md lacks %q:\n%s", want, md)
		}
	}
	if st, err := os.Stat(filepath.Join(out, "latency-echo.png")); err != nil || st.Size() == 0 {
		t.Errorf("no chart: %v", err)
	}
}
