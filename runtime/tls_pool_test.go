package runtime_test

import (
	"crypto/tls"
	"net"
	"os"
	goruntime "runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// handshakeSeen records what a server handshake's callback saw on its
// pool thread: the thread's policy and CPUs, and ClientHelloInfo.Conn's
// addresses.
type handshakeSeen struct {
	mu            sync.Mutex
	policy        uint32
	nice          int32
	cpus          []int
	local, remote net.Addr
}

func (h *handshakeSeen) config(t *testing.T) *tls.Config {
	cfg := pctest.TestPKI().ServerTLS()
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			t.Error(err)
			return nil, err
		}
		cpus, err := cpu.Thread()
		if err != nil {
			t.Error(err)
		}
		h.mu.Lock()
		h.policy, h.nice, h.cpus = a.Policy, a.Nice, cpus
		h.local, h.remote = hello.Conn.LocalAddr(), hello.Conn.RemoteAddr()
		h.mu.Unlock()
		return nil, nil
	}
	return cfg
}

// TestTLSPoolThreads: a runtime's handshakes compute on threads at nice
// 19 (tlsconn.PoolConfig.Sched's default), on the CPUs of the
// process that no loop uses (all of them when every CPU has a loop), and
// crypto/tls sees the connection's addresses; New raised GOMAXPROCS to
// the loops plus the pool's MaxCPU and says so in its Report.
func TestTLSPoolThreads(t *testing.T) {
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		prev := goruntime.GOMAXPROCS(1) // below the loop and a handshake: New raises it
		t.Cleanup(func() {
			// Setting GOMAXPROCS stops Go from following the CPU
			// quota: give the default back where it was the default.
			if os.Getenv("GOMAXPROCS") == "" && prev == goruntime.NumCPU() {
				goruntime.SetDefaultGOMAXPROCS()
			} else {
				goruntime.GOMAXPROCS(prev)
			}
		})
		h := &handshakeSeen{}
		rt, addr, _ := startTLS(t, b, percore.Config{Cores: cores[:1], TLS: h.config(t)}, &tlsEcho{})
		if got := goruntime.GOMAXPROCS(0); got != 2 || rt.Report().GOMAXPROCS != 2 {
			t.Errorf("GOMAXPROCS %d, reported %d; want 2 (a loop and MaxCPU 1)", got, rt.Report().GOMAXPROCS)
		}
		defer func() {
			rt.Close()
			if got := goruntime.GOMAXPROCS(0); got != 1 {
				t.Errorf("GOMAXPROCS %d after Close, want 1 back", got)
			}
		}()
		c := tlsDial(t, addr, pctest.TestPKI().ClientTLS())
		defer c.Close()
		if _, err := roundTrip(c, []byte("ping")); err != nil {
			t.Fatal(err)
		}
		want := cores[1:]
		if len(want) == 0 {
			want = cores
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.policy != unix.SCHED_NORMAL || h.nice != 19 {
			t.Errorf("handshake thread's policy %d nice %d, want SCHED_NORMAL (%d) at 19", h.policy, h.nice, unix.SCHED_NORMAL)
		}
		if cpu.FormatList(h.cpus) != cpu.FormatList(want) {
			t.Errorf("handshake thread on CPUs %s, want %s", cpu.FormatList(h.cpus), cpu.FormatList(want))
		}
		if h.local == nil || h.local.String() != addr || h.remote == nil || h.remote.String() != c.LocalAddr().String() {
			t.Errorf("ClientHelloInfo.Conn's addresses %v, %v; want %s, %s", h.local, h.remote, addr, c.LocalAddr())
		}
	})
}
