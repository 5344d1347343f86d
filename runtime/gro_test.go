//go:build linux

package runtime_test

import (
	"bytes"
	"net"
	"net/netip"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// packetRecorder keeps a copy of every datagram and echoes it.
type packetRecorder struct {
	mu  sync.Mutex
	got [][]byte
}

func (r *packetRecorder) OnPacket(p *percore.PacketConn, data []byte, from netip.AddrPort) {
	r.mu.Lock()
	r.got = append(r.got, bytes.Clone(data))
	r.mu.Unlock()
	_ = p.WriteTo(data, from)
}

func (r *packetRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// gsoBurst is one send of n datagrams of seg bytes and a last one of tail
// bytes, each filled with its own byte.
type gsoBurst struct{ seg, n, tail int }

func (g gsoBurst) datagrams(first byte) [][]byte {
	var ds [][]byte
	for i := range g.n {
		ds = append(ds, bytes.Repeat([]byte{first + byte(i)}, g.seg))
	}
	if g.tail > 0 {
		ds = append(ds, bytes.Repeat([]byte{first + byte(g.n)}, g.tail))
	}
	return ds
}

// gsoSend sends ds as one write on c with UDP_SEGMENT set to seg: the
// kernel keeps them one buffer to the receiving socket.
func gsoSend(t *testing.T, c *net.UDPConn, seg int, ds [][]byte) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, seg)
	}); err != nil || serr != nil {
		t.Fatalf("set UDP_SEGMENT: %v %v", err, serr)
	}
	if _, err := c.Write(bytes.Join(ds, nil)); err != nil {
		t.Fatalf("write %d datagrams as one: %v", len(ds), err)
	}
}

// A sender's coalesced bursts (UDP_SEGMENT) reach the handler one datagram
// at a time, in order and whole, with UDPGRO on (the kernel hands them
// over coalesced: Stats.PacketsCoalesced) and off (the kernel splits
// them); the replies reach the sender as separate datagrams.
func TestUDPGRO(t *testing.T) {
	bursts := []gsoBurst{
		{seg: 1000, n: 20, tail: 333},
		{seg: 1400, n: 46, tail: 0}, // 64,400 bytes: near the kernel's limit
		{seg: 64, n: 63, tail: 1},   // the most segments
		{seg: 512, n: 1, tail: 0},   // a lone datagram
	}
	for _, gro := range []bool{true, false} {
		name := "off"
		if gro {
			name = "on"
		}
		t.Run(name, func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				rec := &packetRecorder{}
				rt := startUDP(t, b, "127.0.0.1:0", rec, percore.Config{UDPGRO: gro})
				c := udpClient(t, rt)
				var want [][]byte
				buf := make([]byte, 70000)
				for i, g := range bursts {
					ds := g.datagrams(byte(i * 80))
					want = append(want, ds...)
					gsoSend(t, c, g.seg, ds)
					for j, d := range ds {
						n, err := c.Read(buf)
						if err != nil {
							t.Fatalf("burst %d: reply %d of %d: %v", i, j, len(ds), err)
						}
						if !bytes.Equal(buf[:n], d) {
							t.Fatalf("burst %d: reply %d is %d bytes of %d, want %d of %d", i, j, n, buf[0], len(d), d[0])
						}
					}
				}
				pctest.WaitFor(t, "every datagram at the handler", func() bool { return rec.count() >= len(want) })
				rec.mu.Lock()
				got := rec.got
				rec.mu.Unlock()
				if len(got) != len(want) {
					t.Fatalf("handler saw %d datagrams, want %d", len(got), len(want))
				}
				for i := range want {
					if !bytes.Equal(got[i], want[i]) {
						t.Fatalf("datagram %d: %d bytes of %d, want %d of %d", i, len(got[i]), got[i][0], len(want[i]), want[i][0])
					}
				}
				pctest.WaitFor(t, "the counters", func() bool {
					s := rt.Stats()
					return s.PacketsIn == uint64(len(want)) && s.PacketsOut == uint64(len(want))
				})
				s := rt.Stats()
				if s.PacketsTruncated != 0 || s.PacketErrors != 0 || s.PacketsLost != 0 {
					t.Fatalf("stats %+v", s)
				}
				// Every burst of more than one datagram arrives
				// coalesced with UDP_GRO, none without.
				if wantCoalesced := uint64(len(bursts) - 1); !gro {
					if s.PacketsCoalesced != 0 {
						t.Fatalf("%d coalesced receives without UDPGRO", s.PacketsCoalesced)
					}
				} else if s.PacketsCoalesced != wantCoalesced {
					t.Fatalf("%d coalesced receives, want %d", s.PacketsCoalesced, wantCoalesced)
				}
			})
		})
	}
}

// UDPGRO needs receive buffers that take what the kernel coalesces.
func TestUDPGRONeedsLargeBuffers(t *testing.T) {
	_, err := percore.New(percore.Config{
		Listen: []string{"udp://127.0.0.1:0"}, Cores: allCores(t)[:1], Logger: discard,
		PacketHandler: packetEcho{}, UDPGRO: true, PacketBufferSize: 1500,
	}, nil)
	if err == nil {
		t.Fatal("New took UDPGRO with 1500-byte packet buffers")
	}
}
