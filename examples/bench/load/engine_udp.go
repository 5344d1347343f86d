//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
)

// The UDP mode: -addr udp://host:port makes the percore engines send
// datagrams to a UDP echo server, with the same workload and the same
// check of every reply as the TCP echo (cross-checks
// examples/bench/baseline/udpc/udp_load.c, bench-transports.sh).
//
// Each "connection" is a UDP socket of its own on a percore loop, keeping
// -pipeline datagrams of -bytes in flight. Datagram k of a connection
// carries sequence number slot+k*pipeline in its first 8 bytes and the
// connection's pattern after them, so every reply names its slot: a reply
// corrupted, another connection's, or one for a request already answered
// (a duplicate) is a mismatch. A request unanswered for udpTimeout is
// counted lost and its slot sends the next sequence number; a reply that
// still arrives for it later is counted late, not a mismatch. UDP may
// reorder: replies are matched by slot, not by arrival order.
//
// The runtime opens UDP sockets only as listeners, and hands a loop its
// socket (a PacketConn) only in a callback. So the engine runs one runtime
// of one loop per CPU (every socket of a runtime is then that loop's),
// each listening on one udp://…:0 socket per connection, and a datagram
// sent to each socket from an ordinary socket (the kick) gives the loop
// its PacketConn and starts the connection; every datagram after that is
// sent with PacketConn.WriteTo from the loop's thread.

// udpTimeout is how long a datagram waits for its reply before it counts
// as lost; 200 ms, as udp_load.c.
const udpTimeout = 200 * time.Millisecond

// udpScan is how often each loop looks for datagrams past udpTimeout.
const udpScan = 50 * time.Millisecond

// isUDP reports whether addr names a UDP echo server.
func isUDP(addr string) bool { return strings.HasPrefix(addr, "udp://") }

// udpEngine runs the workload over UDP on percore loops.
type udpEngine struct {
	backend percore.Backend
}

// udpEngineFor returns the UDP engine for -engine name.
func udpEngineFor(name string) (Engine, error) {
	switch name {
	case "percore", "":
		return udpEngine{}, nil
	case "percore-epoll":
		return udpEngine{backend: percore.Epoll}, nil
	}
	return nil, fmt.Errorf("-addr udp:// runs on the percore engines (percore, percore-epoll), not %q", name)
}

// Run implements Engine.
func (e udpEngine) Run(ctx context.Context, wl Workload, rec *Recorder) error {
	if wl.Bytes < seqBytes {
		return fmt.Errorf("udp engine: -bytes must be at least %d (the sequence number)", seqBytes)
	}
	server, err := resolveUDP(strings.TrimPrefix(wl.Addr, "udp://"))
	if err != nil {
		return fmt.Errorf("udp engine: %w", err)
	}
	bind, loopback := "udp4://0.0.0.0:0", netip.AddrFrom4([4]byte{127, 0, 0, 1})
	if server.Addr().Is6() {
		bind, loopback = "udp6://[::]:0", netip.IPv6Loopback()
	}
	kicker, err := net.ListenUDP("udp", &net.UDPAddr{IP: loopback.AsSlice()})
	if err != nil {
		return fmt.Errorf("udp engine: %w", err)
	}
	defer kicker.Close()
	kickFrom := kicker.LocalAddr().(*net.UDPAddr).AddrPort()

	cores, err := cpu.Cores()
	if err != nil {
		return fmt.Errorf("udp engine: %w", err)
	}
	cores = cores[:min(len(cores), runtime.GOMAXPROCS(0), wl.Conns)]
	clients := make([]*udpClient, len(cores))
	sched := newSchedule(wl, time.Now())
	for i := range clients {
		clients[i] = &udpClient{wl: wl, server: server, kickFrom: kickFrom, w: rec.NewWorker()}
	}
	var conns []*udpConn
	for id := range wl.Conns {
		uc := clients[id%len(clients)]
		c := newUDPConn(uc, id)
		uc.conns = append(uc.conns, c)
		conns = append(conns, c)
	}
	var rts []*percore.Runtime
	defer func() {
		for _, rt := range rts {
			rt.Close()
		}
	}()
	for i, uc := range clients {
		listen := make([]string, len(uc.conns))
		for j := range listen {
			listen[j] = bind
		}
		rc := wl.loopConfig(e.backend)
		rc.Cores, rc.Listen, rc.PacketHandler = []int{cores[i]}, listen, uc
		rt, err := percore.New(rc, nil)
		if err != nil {
			return fmt.Errorf("udp engine: %w", err)
		}
		rts = append(rts, rt)
		uc.loop = rt.Loops()[0]
		for j, ln := range rt.Listeners() {
			uc.conns[j].local = netip.AddrPortFrom(loopback, uint16(ln.Addr.(*net.UDPAddr).Port))
		}
		if wl.open() {
			uc.pace = newLoopPacer(uc.loop, sched, uc.w, wl)
			for _, c := range uc.conns {
				uc.pace.p.add(c.bl.id, c)
			}
		}
		if err := uc.loop.Post(uc.scan); err != nil {
			return fmt.Errorf("udp engine: %w", err)
		}
		if uc.pace != nil {
			if err := uc.loop.Post(uc.pace.start); err != nil {
				return fmt.Errorf("udp engine: %w", err)
			}
		}
	}
	kick(ctx, kicker, conns)
	<-ctx.Done()
	for _, uc := range clients {
		if uc.pace != nil {
			_ = uc.loop.Post(uc.pace.stop)
		}
	}
	for _, rt := range rts {
		rt.Close()
	}
	rts = nil
	return nil
}

// kick sends a datagram to every connection's socket until each has
// started (its loop got the datagram) or ctx ends; loopback rarely drops
// one, but a lost kick must not leave a connection idle.
func kick(ctx context.Context, kicker *net.UDPConn, conns []*udpConn) {
	t := time.NewTicker(udpScan)
	defer t.Stop()
	b := []byte("kick")
	for {
		waiting := 0
		for _, c := range conns {
			if !c.started.Load() {
				waiting++
				_, _ = kicker.WriteToUDPAddrPort(b, c.local)
			}
		}
		if waiting == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// resolveUDP turns "host:port" into the server's address, as resolve does
// for TCP.
func resolveUDP(addr string) (netip.AddrPort, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("resolve %q: %w", addr, err)
	}
	ap := ua.AddrPort()
	ip := ap.Addr().Unmap()
	if !ip.IsValid() || ip.IsUnspecified() {
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if ap.Port() == 0 {
		return netip.AddrPort{}, errors.New("udp address needs a port")
	}
	return netip.AddrPortFrom(ip, ap.Port()), nil
}

// udpClient is one loop's connections. Everything in it but conns[i].started
// is touched only on that loop's thread.
type udpClient struct {
	loop     *percore.Loop
	wl       Workload
	server   netip.AddrPort
	kickFrom netip.AddrPort
	w        *Worker
	conns    []*udpConn // by listener index
	pace     *loopPacer // open loop only
}

var _ percore.PacketHandler = (*udpClient)(nil)

// OnPacket starts a connection on its kick and checks every reply.
func (uc *udpClient) OnPacket(p *percore.PacketConn, data []byte, from netip.AddrPort) {
	c := uc.conns[p.Listener().Index]
	from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	switch {
	case from == uc.server:
		c.reply(data)
	case from == uc.kickFrom:
		if c.p == nil {
			c.p = p
			c.started.Store(true)
			if uc.pace != nil {
				c.flush()
				break
			}
			for slot := range c.seq {
				c.send(slot, uint64(slot)+1)
			}
		}
	default:
		uc.w.Mismatch() // a datagram from neither the server nor the kicker
	}
}

// scan counts the datagrams past udpTimeout as lost and sends the next
// request in their slots; it runs every udpScan.
func (uc *udpClient) scan() {
	now := time.Now()
	for _, c := range uc.conns {
		if c.p == nil {
			continue
		}
		for slot, at := range c.sent {
			if c.busy[slot] && now.Sub(at) >= udpTimeout {
				uc.w.Lost()
				c.late[slot] = c.seq[slot]
				c.busy[slot] = false
				if uc.pace == nil {
					c.send(slot, c.seq[slot]+uint64(c.n))
				}
			}
		}
		if uc.pace != nil {
			c.flush()
		}
	}
	uc.loop.AfterFunc(udpScan, uc.scan)
}

// udpConn is one socket's traffic: n slots, each with one datagram in
// flight (closed loop: always; open loop: while one is unanswered).
// Request seq goes in slot (seq-1)%n.
type udpConn struct {
	uc      *udpClient
	pl      payload
	n       int
	p       *percore.PacketConn // nil until the kick arrives
	local   netip.AddrPort      // where the kick goes
	started atomic.Bool         // the kick arrived (read by kick)
	req     []byte
	seq     []uint64    // the sequence number in flight in each slot
	busy    []bool      // slot's request is unanswered (and not lost)
	late    []uint64    // the last one given up as lost, per slot (0: none)
	sent    []time.Time // when seq[slot] was sent
	start   []time.Time // when its latency began: sent, or due in open loop
	bl      backlog     // open loop: the requests fallen due and sent
	nextSeq uint64      // open loop: the next sequence number to send
}

func newUDPConn(uc *udpClient, id int) *udpConn {
	n := uc.wl.depth()
	pl := newPayload(uc.wl.Bytes, id)
	return &udpConn{
		uc: uc, pl: pl, n: n, req: pl.newBuffer(1), bl: backlog{id: id}, nextSeq: 1,
		seq: make([]uint64, n), busy: make([]bool, n), late: make([]uint64, n),
		sent: make([]time.Time, n), start: make([]time.Time, n),
	}
}

// release implements releaser: the connection's next request fell due.
func (c *udpConn) release() {
	c.bl.due++
	c.flush()
}

// flush sends, in open loop, the requests that fell due and wait, in
// order, while the slot of the next one is free.
func (c *udpConn) flush() {
	if c.p == nil {
		return
	}
	for c.bl.waiting() > 0 {
		slot := int((c.nextSeq - 1) % uint64(c.n))
		if c.busy[slot] {
			return
		}
		due := c.bl.take(c.uc.pace.p.s)
		c.send(slot, c.nextSeq)
		c.start[slot] = due
		c.nextSeq++
	}
}

// send sends request seq in slot. A failed send counts an error; the slot
// then times out and sends the next request.
func (c *udpConn) send(slot int, seq uint64) {
	c.pl.stamp(c.req, seq)
	c.seq[slot] = seq
	c.busy[slot] = true
	c.sent[slot] = time.Now()
	c.start[slot] = c.sent[slot]
	if err := c.p.WriteTo(c.req, c.uc.server); err != nil {
		c.uc.w.Error()
	}
}

// reply checks one datagram from the server and, when it answers its
// slot's request, sends the slot's next one.
func (c *udpConn) reply(data []byte) {
	w := c.uc.w
	if c.p == nil || len(data) < seqBytes {
		w.Mismatch()
		return
	}
	var seq uint64
	for i := range seqBytes {
		seq |= uint64(data[i]) << (8 * i)
	}
	if seq == 0 {
		w.Mismatch()
		return
	}
	slot := int((seq - 1) % uint64(c.n))
	switch {
	case seq == c.seq[slot] && c.busy[slot] && c.pl.check(data, seq):
		w.Done(time.Since(c.start[slot]))
		c.busy[slot] = false
		if c.uc.pace != nil {
			c.flush()
			c.uc.pace.poke()
			return
		}
		c.send(slot, seq+uint64(c.n))
	case seq == c.late[slot] && c.pl.check(data, seq):
		w.Late()
		c.late[slot] = 0
	default:
		// Corrupt, truncated, another connection's, one never sent, or
		// a duplicate of one already answered.
		w.Mismatch()
	}
}
