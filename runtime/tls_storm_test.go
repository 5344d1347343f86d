package runtime_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	goruntime "runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// The storm's second probe (TestTLSStormLag): a plain TCP connection to
// the same loop, pinged from a child process every millisecond, one byte
// at a time. Its round trip is what a client of that loop sees, the waits
// outside the loop's dispatch included (for a P after yield's Gosched or a
// blocking enter), which LagMax does not time.

// tlsPingEnv makes the test binary the pinger: the address to ping.
const tlsPingEnv = "PERCORE_TLS_PING"

func init() {
	if addr := os.Getenv(tlsPingEnv); addr != "" {
		os.Exit(tlsPinger(addr))
	}
}

// stormHandler answers a TLS connection's request with the idle reply and
// echoes a plain one's bytes (the pinger's).
type stormHandler struct{ opened atomic.Int64 }

func (h *stormHandler) OnData(c *percore.Conn, data []byte) {
	if c.TLS() == nil {
		c.Write(data)
		return
	}
	c.Write([]byte(pctest.IdleTLSReply))
	h.opened.Add(1)
}

// tlsPinger pings addr every millisecond until its stdin closes, then
// prints the round trips' distribution.
func tlsPinger(addr string) int {
	goruntime.LockOSThread()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pinger:", err)
		return 1
	}
	var stop atomic.Bool
	go func() { io.Copy(io.Discard, os.Stdin); stop.Store(true) }()
	fmt.Println("ready")
	var rtts []time.Duration
	b := []byte{'p'}
	for !stop.Load() {
		t0 := time.Now()
		if _, err := c.Write(b); err != nil {
			break
		}
		if _, err := io.ReadFull(c, b); err != nil {
			break
		}
		rtts = append(rtts, time.Since(t0))
		time.Sleep(time.Millisecond) // the ping's period, not a synchronisation
	}
	slices.Sort(rtts)
	q := func(f float64) time.Duration {
		if len(rtts) == 0 {
			return 0
		}
		return rtts[min(len(rtts)-1, int(f*float64(len(rtts))))]
	}
	over := len(rtts) - sortSearch(rtts, time.Millisecond)
	fmt.Printf("ping n=%d p50=%v p99=%v p999=%v max=%v over1ms=%d\n", len(rtts), q(0.5), q(0.99), q(0.999), q(1), over)
	return 0
}

func sortSearch(s []time.Duration, d time.Duration) int {
	i, _ := slices.BinarySearch(s, d)
	return i
}

// startPinger runs the pinger on addr, on the CPU PERCORE_CLIENT_CPU
// names, under SCHED_FIFO (chrt) where it may be, so that its own wake-ups
// do not wait behind the storm's client on that CPU. The returned function
// stops it and returns its summary line.
func startPinger(t *testing.T, addr string) func() string {
	t.Helper()
	args := []string{os.Args[0], "-test.run=^$"}
	if cpu := os.Getenv("PERCORE_CLIENT_CPU"); cpu != "" {
		args = append([]string{"taskset", "-c", cpu}, args...)
	}
	for _, rt := range []bool{true, false} {
		a := args
		if rt {
			a = append([]string{"chrt", "-f", "1"}, args...)
		}
		cmd := exec.Command(a[0], a[1:]...)
		cmd.Env = append(os.Environ(), tlsPingEnv+"="+addr)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(stdout)
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			cmd.Wait()
			if rt {
				continue // no SCHED_FIFO here: an ordinary pinger
			}
			t.Fatalf("pinger: %q %v", line, err)
		}
		sched := "fifo"
		if !rt {
			sched = "other"
		}
		return func() string {
			stdin.Close()
			line, _ := r.ReadString('\n')
			cmd.Wait()
			return sched + " " + strings.TrimSpace(line)
		}
	}
	panic("unreachable")
}
