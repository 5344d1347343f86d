package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEnsureToolsNeverStopsMakeTest runs ensure-tools.sh on a PATH that holds none of the tools,
// only a fake apt-get: whether apt-get works, fails (no network) or cannot be used (not root), the
// script exits 0 and names what is missing, so that make test goes on to lint and the tests.
func TestEnsureToolsNeverStopsMakeTest(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	script, err := filepath.Abs("ensure-tools.sh")
	if err != nil {
		t.Fatal(err)
	}
	const missing = "shellcheck ethtool iproute2 util-linux redis-tools redis-server curl"
	tests := []struct {
		name     string
		aptCode  int
		wantRoot string // stderr as root
	}{
		{"apt-get works", 0, ""},
		{"apt-get fails", 100, "ensure-tools.sh: could not install " + missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			log := filepath.Join(dir, "apt-get.log")
			fake := "#!/bin/sh\necho \"$*\" >>\"$APT_LOG\"\n[ \"$APT_CODE\" = 0 ] || echo 'E: fake apt-get failed' >&2\nexit \"$APT_CODE\"\n"
			if err := os.WriteFile(filepath.Join(dir, "apt-get"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bash, script)
			cmd.Env = []string{"PATH=" + dir, "APT_LOG=" + log, "APT_CODE=" + strconv.Itoa(tt.aptCode)}
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("ensure-tools.sh: %v; want exit 0\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			calls, _ := os.ReadFile(log)
			if os.Geteuid() != 0 {
				if want := "ensure-tools.sh: missing " + missing; !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
				if len(calls) != 0 {
					t.Errorf("apt-get ran without root: %s", calls)
				}
				return
			}
			if !strings.Contains(string(calls), "update") {
				t.Errorf("apt-get update did not run; calls:\n%s", calls)
			}
			if tt.aptCode == 0 && !strings.Contains(string(calls), "install -y -qq "+missing) {
				t.Errorf("apt-get install did not get %q; calls:\n%s", missing, calls)
			}
			if tt.aptCode != 0 && strings.Contains(string(calls), "install") {
				t.Errorf("apt-get install ran after a failed update; calls:\n%s", calls)
			}
			if !strings.Contains(stderr.String(), tt.wantRoot) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantRoot, stderr.String())
			}
			if tt.aptCode == 0 && strings.Contains(stderr.String(), "could not install") {
				t.Errorf("a working apt-get was reported as failed:\n%s", stderr.String())
			}
		})
	}
}
