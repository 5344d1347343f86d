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

// benchWS runs scripts/bench-ws.sh with env added to the environment.
func benchWS(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	cmd := exec.Command("bash", append([]string{"bench-ws.sh"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestBenchWSHelp(t *testing.T) {
	t.Parallel()
	code, out := benchWS(t, nil, "--help")
	if code != 0 {
		t.Fatalf("--help: exit status %d:\n%s", code, out)
	}
	for _, want := range []string{"Usage: scripts/bench-ws.sh [--dry-run]", "IDLE_CONNS", "SMOKE=1", "What it changes", "Undo:", "Bounded in time"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "set -euo") {
		t.Errorf("--help printed the script's code:\n%s", out)
	}
}

// TestBenchWSPlans checks --dry-run: it validates the settings, prints
// every command in its interleaved order, and runs none.
func TestBenchWSPlans(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	_, err := os.Stat("../examples/ws_gateway")
	haveGateway := err == nil
	tests := []struct {
		name     string
		env      []string
		wantCode int
		want     []string
		dontWant []string
	}{
		{"defaults", nil, 0, []string{
			"taskset -c 0 ", "/wsnbio -addr 127.0.0.1:28701 -secret bench-ws-secret -ping-interval 30s",
			"/wsgws -addr", "/wsgorilla -addr", "GOMAXPROCS=1",
			"taskset -c 1 ", "-mode idle -conns 18000 -settle 3s -json -server-pid",
			"-mode fanout -conns 18000 -publishes 1", "-mode fanout -conns 1000 -interval 10ms -seconds 10s",
			"-mode echo -conns 1000 -bytes 64 -warmup 1s -seconds 5s", "-mode storm -conns 15000",
			"3 repeats: ",
		}, nil},
		{"one row, two servers", []string{"ROWS=storm", "SERVERS=wsgws wsgorilla", "REPEATS=2", "STORM_CONNS=500", "PING=5s"}, 0,
			[]string{"-mode storm -conns 500", "-ping-interval 5s", "2 repeats: 4 runs"}, []string{"/wsnbio -addr", "-mode idle", "-mode echo"}},
		{"smoke", []string{"SMOKE=1"}, 0, []string{"-mode idle -conns 50 -settle 0.2s", "-mode echo -conns 10", "1 repeats: 15 runs"}, []string{"-conns 18000"}},
		{"bad count", []string{"IDLE_CONNS=lots"}, 2, []string{"IDLE_CONNS='lots' is not a positive whole number"}, nil},
		{"over the fd limit", []string{"FANOUT_CONNS=25000"}, 2, []string{"FANOUT_CONNS=25000: the fd limit"}, nil},
		{"unknown server", []string{"SERVERS=wsnbio apache"}, 2, []string{"unknown server apache"}, nil},
		{"unknown row", []string{"ROWS=idle flood"}, 2, []string{"unknown row flood"}, nil},
		{"bad ping", []string{"PING=30"}, 2, []string{"PING='30' is not a duration"}, nil},
		{"two server cpus", []string{"SERVER_CPUS=0-1"}, 2, []string{"must be one CPU"}, nil},
		{"bad backend", []string{"PERCORE_BACKEND=kqueue"}, 2, []string{"uring or epoll"}, nil},
		{"bad settle", []string{"SETTLE=3s"}, 2, []string{"SETTLE='3s' is not a number of seconds"}, nil},
	}
	if haveGateway {
		tests[0].want = append(tests[0].want, "/ws_gateway -addr", "-backend uring")
	} else {
		tests[0].want = append(tests[0].want, "examples/ws_gateway does not exist yet: percore is left out")
		tests = append(tests, struct {
			name     string
			env      []string
			wantCode int
			want     []string
			dontWant []string
		}{"only percore, not there", []string{"SERVERS=percore"}, 2, []string{"no server left"}, nil})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, got := benchWS(t, append([]string{"OUT=" + out}, tt.env...), "--dry-run")
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
	if code, got := benchWS(t, nil, "--fast"); code != 2 || !strings.Contains(got, "unknown argument --fast") {
		t.Errorf("an unknown argument: exit status %d, output:\n%s", code, got)
	}
}

// TestBenchWSRuns runs the script's smoke mode for real (every row, the
// three peers, a few connections) and checks what it records and
// summarises, not the numbers.
func TestBenchWSRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the peers and wsload")
	}
	for _, tool := range []string{"bash", "go", "taskset", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	out := t.TempDir()
	code, got := benchWS(t, []string{"OUT=" + out, "SMOKE=1", "BASE_PORT=29150", "CLIENT_CPUS=0", "SERVER_CPUS=0"})
	if code != 0 {
		t.Fatalf("exit status %d:\n%s", code, got)
	}
	f, err := os.Open(filepath.Join(out, "ws-runs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			Server, Row string
			Load        struct {
				Mode    string
				Conns   int
				Problem string
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		if r.Load.Conns == 0 || r.Load.Problem != "" {
			t.Errorf("run %s %s: %s", r.Server, r.Row, sc.Text())
		}
		seen[r.Row+" "+r.Server] = true
	}
	for _, row := range []string{"idle", "fanout1", "fanout", "echo", "storm"} {
		for _, s := range []string{"wsnbio", "wsgws", "wsgorilla"} {
			if !seen[row+" "+s] {
				t.Errorf("ws-runs.jsonl lacks %s %s (has %v)", row, s, seen)
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "ws-summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## idle", "## storm", "| wsgorilla | 50 | 1 |", "server RSS B/conn", "messages/s"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("ws-summary.md lacks %q:\n%s", want, md)
		}
	}
}
