package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

const (
	cleanRun = `{"kind":"run","server":"netpoll","scenario":"c50","repeat":1,"server_exit":0,"load":{"conns":50,"bytes":64,"pipeline":1,"requests":1000,"rps":200,"server_cpu_us_per_req":10}}`
	badRun   = `{"kind":"run","server":"stdnet","scenario":"c50","repeat":1,"server_exit":0,"load":{"conns":50,"bytes":64,"pipeline":1,"requests":0,"rps":0,"errors":7}}`
)

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		extra    []string
		wantCode int
		wantOut  string
	}{
		{"clean runs pass the check", cleanRun + "\n", []string{"-check"}, 0, "netpoll"},
		{"failed runs fail the check", cleanRun + "\n" + badRun + "\n", []string{"-check"}, 1, "stdnet"},
		{"failed runs without the check", cleanRun + "\n" + badRun + "\n", nil, 0, "stdnet"},
		{"garbage", "nope\n", nil, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "runs.jsonl")
			if err := os.WriteFile(in, []byte(tt.raw), 0o644); err != nil {
				t.Fatal(err)
			}
			md, tsv := filepath.Join(dir, "r.md"), filepath.Join(dir, "s.tsv")
			args := append([]string{"-in", in, "-md", md, "-tsv", tsv}, tt.extra...)
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != tt.wantCode {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantOut) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantOut, stdout.String())
			}
			if tt.wantCode == 2 {
				return
			}
			for _, f := range []string{md, tsv} {
				if b, err := os.ReadFile(f); err != nil || len(b) == 0 {
					t.Errorf("%s: %v (%d bytes)", f, err, len(b))
				}
			}
		})
	}
}

// TestBenchScriptPlans runs scripts/bench.sh --dry-run, which checks its
// settings and prints the plan without building or running anything.
func TestBenchScriptPlans(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	tests := []struct {
		name     string
		env      []string
		wantCode int
		want     string
	}{
		{"quick", []string{"BENCH=quick"}, 0, "c1000-64B"},
		{"full", []string{"BENCH=full"}, 0, "idle10k-c50"},
		{"smoke", []string{"BENCH=smoke"}, 0, "smoke-c50-64B"},
		{"subset of servers", []string{"SERVERS=stdnet gnet"}, 0, "servers: stdnet gnet"},
		{"unknown mode", []string{"BENCH=huge"}, 2, "quick, full or smoke"},
		{"no such server", []string{"SERVERS=nope"}, 2, "no server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("bash", "../bench.sh", "--dry-run")
			cmd.Env = append(os.Environ(), tt.env...)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.wantCode || !strings.Contains(string(out), tt.want) {
				t.Errorf("exit status %d (want %d), output lacks %q or is:\n%s", code, tt.wantCode, tt.want, out)
			}
		})
	}
}

// TestBenchScriptRecordsAServerThatDoesNotListen runs scripts/bench.sh in
// smoke mode with the server pinned to a CPU that does not exist, so that it
// never listens: the run must go on to the report, which records the run
// without requests and fails it, instead of aborting without a table.
func TestBenchScriptRecordsAServerThatDoesNotListen(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the load generator and a server")
	}
	for _, tool := range []string{"bash", "go", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	const badCPU = "8191"
	if _, err := os.Stat("/sys/devices/system/cpu/cpu" + badCPU); err == nil {
		t.Skipf("this machine has a cpu %s: no CPU to pin the server to that it cannot use", badCPU)
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "../bench.sh")
	cmd.Env = append(os.Environ(), "BENCH=smoke", "SERVERS=stdnet", "SERVER_CPUS="+badCPU, "OUT="+out)
	b, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("bench.sh: %v, want exit status 1; output:\n%s", err, b)
	}
	for _, want := range []string{"stdnet did not start listening", "FAILED run smoke-c50-64B stdnet #1: no request completed", "bench.sh: FAILED"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("output lacks %q:\n%s", want, b)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out, "runs-smoke.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"server":"stdnet","scenario":"smoke-c50-64B","repeat":1,`; !strings.Contains(string(raw), want) || !strings.Contains(string(raw), `"load":{}`) {
		t.Errorf("runs-smoke.jsonl lacks the run (%s ... \"load\":{}):\n%s", want, raw)
	}
}
