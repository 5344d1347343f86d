package pctest

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// VmRSSKiB returns the test process's resident set size (VmRSS of
// /proc/self/status) in KiB, for the memory measurements.
func VmRSSKiB(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
