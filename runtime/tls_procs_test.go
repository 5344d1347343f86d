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

// TestProcsLoopsFromTheBase: a runtime started while another's TLS raise
// of GOMAXPROCS is live (an in-process hand-over) counts its loops from
// GOMAXPROCS as it was before the raise: it had counted them from the
// raised value, so that each hand-over added loops, and a plain runtime
// was left with more loops than Ps once the raise was put back.
func TestProcsLoopsFromTheBase(t *testing.T) {
	cores, err := cpu.Cores()
	if err != nil || len(cores) < 2 {
		t.Skip("needs 2 CPUs in the affinity mask")
	}
	prev := goruntime.GOMAXPROCS(1)
	t.Cleanup(func() { goruntime.GOMAXPROCS(prev) })
	tlsRuntime := func() *percore.Runtime {
		rt, err := percore.New(percore.Config{Backend: percore.Epoll, Listen: []string{"tls://127.0.0.1:0"},
			TLS: pctest.TestPKI().ServerTLS(), Logger: pctest.QuietLogger(t)}, &tlsEcho{})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	a := tlsRuntime()
	b := tlsRuntime() // the hand-over's new runtime
	plain, err := percore.New(percore.Config{Backend: percore.Epoll, Addr: "127.0.0.1:0", Logger: pctest.QuietLogger(t)}, echoHandler{})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	defer plain.Close()
	if na, nb := len(a.Report().CPUs), len(b.Report().CPUs); na != 1 || nb != 1 {
		t.Errorf("at GOMAXPROCS 1: the old runtime has %d loops, the new %d; want 1 each", na, nb)
	}
	if n, g := len(plain.Report().CPUs), goruntime.GOMAXPROCS(0); n > g {
		t.Errorf("a plain runtime started under the raise: %d loops, GOMAXPROCS %d once it was put back", n, g)
	}
}
