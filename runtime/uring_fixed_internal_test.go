package runtime

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The table is the connection cap where there is one (within the
// descriptor limit), else the loop's share of what the limit leaves; the
// margin's backlog is the configured one, capped by somaxconn as
// listen(2) caps it.
func TestFixedTableSizeAndBacklog(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	limit := int(min(lim.Cur, maxFixedFiles))
	if got := fixedTableSize(8, 4); got != 8 {
		t.Errorf("MaxConns 8: a table of %d", got)
	}
	if got := fixedTableSize(limit+5, 1); got != limit {
		t.Errorf("MaxConns past the limit: a table of %d, want the limit %d", got, limit)
	}
	one, two := fixedTableSize(0, 1), fixedTableSize(0, 2)
	if one <= 0 || one >= limit || two > one/2+1 || two < one/2-8 {
		t.Errorf("no cap: a table of %d for one loop, %d for each of two (limit %d)", one, two, limit)
	}
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		t.Skipf("somaxconn: %v", err)
	}
	somax, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if got := listenerBacklog(0); got != somax {
		t.Errorf("backlog 0: %d, want somaxconn %d", got, somax)
	}
	if got := listenerBacklog(somax + 1); got != somax {
		t.Errorf("backlog past somaxconn: %d, want %d", got, somax)
	}
	if somax > 16 {
		if got := listenerBacklog(16); got != 16 {
			t.Errorf("backlog 16: %d", got)
		}
	}
}
