//go:build linux

package runtime_test

import (
	"os"
	goruntime "runtime"
	"testing"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// TestTLSProcsHandOver: two TLS runtimes that overlap, as an in-process
// hand-over's old and new do: at GOMAXPROCS 1, A (a loop) raises it to 2,
// B's want (a loop and MaxCPU 1) is covered,
// and A's Close leaves the 2 that B runs with (and reports); B's Close
// puts 1 back. Before the process-wide record, A's Close put 1 back under
// B.
func TestTLSProcsHandOver(t *testing.T) {
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		prev := goruntime.GOMAXPROCS(1)
		t.Cleanup(func() {
			if os.Getenv("GOMAXPROCS") == "" && prev == goruntime.NumCPU() {
				goruntime.SetDefaultGOMAXPROCS()
			} else {
				goruntime.GOMAXPROCS(prev)
			}
		})
		rtA, _, _ := startTLS(t, b, percore.Config{Cores: cores[:1]}, &tlsEcho{})
		rtB, addr, _ := startTLS(t, b, percore.Config{Cores: cores[:1]}, &tlsEcho{})
		if got := rtB.Report().GOMAXPROCS; got != 2 {
			t.Errorf("B reports GOMAXPROCS %d, want 2", got)
		}
		rtA.Close()
		if got := goruntime.GOMAXPROCS(0); got != 2 {
			t.Fatalf("GOMAXPROCS %d once A closed, B still running; want B's 2", got)
		}
		c := tlsDial(t, addr, pctest.TestPKI().ClientTLS())
		if _, err := roundTrip(c, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		c.Close()
		rtB.Close()
		if got := goruntime.GOMAXPROCS(0); got != 1 {
			t.Errorf("GOMAXPROCS %d once both closed, want 1 back", got)
		}
	})
}
