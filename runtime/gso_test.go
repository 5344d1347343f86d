//go:build linux

package runtime_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// burstReplier answers a request [n, size(2), tail(2)] with n replies of
// size bytes and, if tail > 0, one of tail bytes, reply i filled with
// byte i. A request of n == 0 is the interleaved one: replies of 100
// bytes to the sender (A) and to other (B) in the order A B A B A A A B B
// B.
type burstReplier struct {
	mu    sync.Mutex
	other netip.AddrPort
	buf   [70000]byte
}

var interleaved = []bool{true, false, true, false, true, true, true, false, false, false} // true: to the sender

func (r *burstReplier) OnPacket(p *percore.PacketConn, data []byte, from netip.AddrPort) {
	if len(data) < 5 {
		return
	}
	n := int(data[0])
	size := int(binary.BigEndian.Uint16(data[1:3]))
	tail := int(binary.BigEndian.Uint16(data[3:5]))
	if n == 0 {
		r.mu.Lock()
		other := r.other
		r.mu.Unlock()
		for i, toA := range interleaved {
			to := other
			if toA {
				to = from
			}
			b := r.buf[:100]
			for j := range b {
				b[j] = byte(i)
			}
			_ = p.WriteTo(b, to)
		}
		return
	}
	for i := range n {
		b := r.buf[:size]
		for j := range b {
			b[j] = byte(i)
		}
		_ = p.WriteTo(b, from)
	}
	if tail > 0 {
		b := r.buf[:tail]
		for j := range b {
			b[j] = byte(n)
		}
		_ = p.WriteTo(b, from)
	}
}

func burstRequest(n, size, tail int) []byte {
	b := []byte{byte(n), 0, 0, 0, 0}
	binary.BigEndian.PutUint16(b[1:3], uint16(size))
	binary.BigEndian.PutUint16(b[3:5], uint16(tail))
	return b
}

func readReply(t *testing.T, c *net.UDPConn, buf []byte, size int, fill byte, what string) {
	t.Helper()
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if n != size || !bytes.Equal(buf[:n], bytes.Repeat([]byte{fill}, size)) {
		t.Fatalf("%s: %d bytes of %d, want %d of %d", what, n, buf[0], size, fill)
	}
}

// With UDPGSO a handler's same-size replies to one sender go out as
// segmented sends (Stats.PacketsSegmented, exactly: one request per turn)
// and reach a plain receiver one datagram at a time, in order and whole;
// replies to two destinations interleaved are batched only where they
// run to one destination. Off, nothing is segmented.
func TestUDPGSO(t *testing.T) {
	type burst struct{ n, size, tail, sends int }
	bursts := []burst{
		{n: 10, size: 1000, tail: 300, sends: 1},
		{n: 100, size: 600, tail: 0, sends: 2},  // 64 segments, then 36
		{n: 60, size: 1400, tail: 10, sends: 2}, // 46 (64,400 bytes), then 14 and the tail
		{n: 1, size: 512, tail: 0, sends: 0},    // a lone datagram: no cmsg
		{n: 2, size: 200, tail: 0, sends: 1},
	}
	for _, gso := range []bool{true, false} {
		name := "off"
		if gso {
			name = "on"
		}
		t.Run(name, func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				r := &burstReplier{}
				rt := startUDP(t, b, "127.0.0.1:0", r, percore.Config{UDPGSO: gso})
				a := udpClient(t, rt)
				bc := udpClient(t, rt)
				r.mu.Lock()
				r.other = bc.LocalAddr().(*net.UDPAddr).AddrPort()
				r.mu.Unlock()
				buf := make([]byte, 70000)
				total, wantSeg := 0, 0
				for _, g := range bursts {
					if _, err := a.Write(burstRequest(g.n, g.size, g.tail)); err != nil {
						t.Fatal(err)
					}
					for j := range g.n {
						readReply(t, a, buf, g.size, byte(j), "burst reply")
					}
					if g.tail > 0 {
						readReply(t, a, buf, g.tail, byte(g.n), "burst tail")
						total++
					}
					total += g.n
					wantSeg += g.sends
				}
				if _, err := a.Write(burstRequest(0, 0, 0)); err != nil {
					t.Fatal(err)
				}
				for i, toA := range interleaved {
					c := bc
					if toA {
						c = a
					}
					readReply(t, c, buf, 100, byte(i), "interleaved reply")
				}
				total += len(interleaved)
				wantSeg += 2 // A A A, then B B B
				pctest.WaitFor(t, "the counters", func() bool { return rt.Stats().PacketsOut == uint64(total) })
				s := rt.Stats()
				if s.PacketErrors != 0 || s.PacketDrops != 0 {
					t.Fatalf("stats %+v", s)
				}
				if !gso {
					wantSeg = 0
				}
				if s.PacketsSegmented != uint64(wantSeg) {
					t.Fatalf("%d segmented sends, want %d", s.PacketsSegmented, wantSeg)
				}
			})
		})
	}
}

// With UDPGSO on, a round trip of a request and three replies allocates
// nothing.
func TestUDPGSOAllocs(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := startUDP(t, b, "127.0.0.1:0", &burstReplier{}, percore.Config{UDPGSO: true})
		c := udpClient(t, rt)
		req := burstRequest(3, 512, 0)
		buf := make([]byte, 1024)
		var err error
		roundTrip := func() {
			if _, e := c.Write(req); e != nil {
				err = e
				return
			}
			for range 3 {
				if _, e := c.Read(buf); e != nil {
					err = e
				}
			}
		}
		for range 200 {
			roundTrip()
		}
		allocs := testing.AllocsPerRun(1000, roundTrip)
		if err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Fatalf("%v allocations per round trip, want 0", allocs)
		}
		if rt.Stats().PacketsSegmented == 0 {
			t.Fatal("no segmented sends")
		}
	})
}

// mtuReplier answers "far" with three datagrams of 1400 bytes to
// 10.9.9.9, which the test's network namespace routes with an MTU of 1000
// (the kernel refuses a segmented send there with EINVAL: that path's
// limit, not the socket's), and anything else with three to the sender.
type mtuReplier struct{}

func (mtuReplier) OnPacket(p *percore.PacketConn, data []byte, from netip.AddrPort) {
	to := from
	if string(data) == "far" {
		to = netip.MustParseAddrPort("10.9.9.9:9")
	}
	b := bytes.Repeat([]byte{7}, 1400)
	for range 3 {
		_ = p.WriteTo(b, to)
	}
}

// A segmented send that one destination refuses (EINVAL: a path MTU below
// the segment size; a link-local destination without its zone is the same
// case on kernels that refuse it) is that destination's: its datagrams go
// out one by one, and GSO stays on for the socket's other destinations.
// It runs in a network namespace of its own, where lo has a route with a
// small MTU.
func TestUDPGSOStaysOnAfterOneDestinationsError(t *testing.T) {
	if os.Getenv(netnsEnv) == "" {
		runInNetns(t, "ip link set lo up && ip route add 10.9.9.9/32 dev lo mtu 1000")
		return
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := startUDP(t, b, "127.0.0.1:0", mtuReplier{}, percore.Config{UDPGSO: true})
		c := udpClient(t, rt)
		if _, err := c.Write([]byte("far")); err != nil {
			t.Fatal(err)
		}
		// The refused batch, then its three datagrams one by one.
		pctest.WaitFor(t, "the refused batch, sent again", func() bool {
			s := rt.Stats()
			return s.PacketErrors == 1 && s.PacketsOut == 3
		})
		if _, err := c.Write([]byte("near")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2000)
		for range 3 {
			readReply(t, c, buf, 1400, 7, "reply")
		}
		pctest.WaitFor(t, "the counters", func() bool { return rt.Stats().PacketsOut == 6 })
		if s := rt.Stats(); s.PacketsSegmented != 1 {
			t.Fatalf("%d segmented sends after one destination's error, want 1 (GSO still on)", s.PacketsSegmented)
		}
	})
}

// netnsEnv marks the test binary running in a network namespace of its
// own (runInNetns).
const netnsEnv = "PERCORE_TEST_NETNS"

// runInNetns runs t again in a child test binary, in a new network
// namespace set up by the shell commands setup, and fails t if the child
// fails. It needs unshare(1) and ip(8), and the privilege to make a
// namespace (root, or CAP_SYS_ADMIN); without them it skips.
func runInNetns(t *testing.T, setup string) {
	t.Helper()
	if out, err := exec.Command("unshare", "-n", "sh", "-c", setup).CombinedOutput(); err != nil {
		t.Skipf("needs a network namespace of its own (unshare -n, ip, root): %v: %s", err, bytes.TrimSpace(out))
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-n", "sh", "-c", setup+` && exec "$0" "$@"`, exe,
		"-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in its network namespace: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("in its network namespace, the test did not pass:\n%s", out)
	}
	t.Logf("in its network namespace:\n%s", out)
}
