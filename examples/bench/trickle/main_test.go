//go:build linux

package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestTrickleAgainstRedis trickles a small command to a real redis-server
// with the pinger on, and reads the report: every byte written, Redis's
// error for the unknown command, some PINGs, and this process's own CPU
// time read the way a server's is.
func TestTrickleAgainstRedis(t *testing.T) {
	r := pctest.StartRedis(t)
	var out strings.Builder
	if err := run(&out, r.Addr(), os.Getpid(), 2000, 7, 1, 3, 0, time.Millisecond, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^bytes=14007 seg=7 gap_us=0 writes=2001 n=3 wall_ms=[0-9.]+ server_cpu_ms=[0-9.]+ pings=[1-9][0-9]* ping_p50_us=[0-9]+ ping_p99_us=[0-9]+ ping_max_us=[0-9]+ reply=-ERR\n$`)
	if !re.MatchString(out.String()) {
		t.Fatalf("report %q", out.String())
	}
}

// TestScriptPlans runs scripts/bench-trickle.sh --dry-run: the plan names
// every server, segment size and mode, and bad settings stop it.
func TestScriptPlans(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	tests := []struct {
		name string
		env  []string
		code int
		want []string
	}{
		{"defaults", nil, 0, []string{"-backend uring", "-backend epoll", "redis-server --port", "-seg 7 -gap 5us -warmup 1 -n 5 -ping-every 0", "-seg 64 -gap 5us -warmup 1 -n 5 -ping-every 1ms", "-args 140000"}},
		{"a base binary", []string{"SERVERS=base-uring", "KV_BASE=/bin/true", "REPEATS=1", "SEGS=7"}, 0, []string{"/bin/true -addr", "-backend uring"}},
		{"a base without its binary", []string{"SERVERS=base-epoll"}, 2, []string{"needs KV_BASE"}},
		{"an unknown server", []string{"SERVERS=nope"}, 2, []string{"unknown server nope"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("bash", "../../../scripts/bench-trickle.sh", "--dry-run")
			cmd.Env = append(os.Environ(), tt.env...)
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code {
				t.Fatalf("exit status %d, want %d:\n%s", code, tt.code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("the plan lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
