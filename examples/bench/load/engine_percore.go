//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	percore "github.com/percore/percore/runtime"
	"golang.org/x/sys/unix"
)

// percoreEngine runs the workload on percore's own client side: one pinned
// loop per CPU the generator may use (taskset or -cores), each dialing its
// share of the connections and driving them from handlers on its thread,
// with no goroutine per connection and no allocation per request. It costs
// about what a percore server costs per request, so that a fast server is
// not hidden behind a slow client.
type percoreEngine struct {
	backend percore.Backend
}

// Run implements Engine. It resolves wl.Addr once, here: a loop dials only
// literal addresses (it never blocks on a name lookup).
func (e percoreEngine) Run(ctx context.Context, wl Workload, rec *Recorder) error {
	var addr netip.AddrPort
	var err error
	if !isUnix(wl.Addr) {
		if addr, err = resolve(wl.Addr); err != nil {
			return fmt.Errorf("percore engine: %w", err)
		}
	}
	rt, err := percore.New(wl.loopConfig(e.backend), nil)
	if err != nil {
		return fmt.Errorf("percore engine: %w", err)
	}
	defer rt.Close()
	loops := rt.Loops()
	clients := make([]*loopClient, len(loops))
	sched := newSchedule(wl, time.Now())
	for i, l := range loops {
		lc := &loopClient{loop: l, wl: wl, addr: addr, w: rec.NewWorker(), done: make(chan struct{})}
		lc.pace = newLoopPacer(l, sched, lc.w, wl)
		clients[i] = lc
	}
	for id := range wl.Conns {
		lc := clients[id%len(clients)]
		pc := newPercoreConn(lc, id)
		lc.conns = append(lc.conns, pc)
		if lc.pace != nil {
			lc.pace.p.add(id, pc)
		}
	}
	for _, lc := range clients {
		if err := lc.loop.Post(lc.start); err != nil {
			return fmt.Errorf("percore engine: %w", err)
		}
	}
	<-ctx.Done()
	for _, lc := range clients {
		if err := lc.loop.Post(lc.stop); err != nil {
			close(lc.done)
		}
	}
	for _, lc := range clients {
		<-lc.done
	}
	return nil
}

// resolve turns addr, "host:port", into the address to dial. A name is
// looked up once and its first address taken (IPv4 preferred); an empty or
// unspecified host means the local system, 127.0.0.1, as for net.Dial.
func resolve(addr string) (netip.AddrPort, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("resolve %q: %w", addr, err)
	}
	ap := ta.AddrPort()
	if ip := ap.Addr(); !ip.IsValid() || ip.IsUnspecified() {
		ap = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), ap.Port())
	}
	return ap, nil
}

// loopClient is one loop's share of the connections. Everything in it is
// touched only on that loop's thread.
type loopClient struct {
	loop     *percore.Loop
	wl       Workload
	addr     netip.AddrPort // wl.Addr, resolved
	w        *Worker
	conns    []*percoreConn
	pace     *loopPacer // open loop only
	stopping bool
	open     int
	done     chan struct{}
}

func (lc *loopClient) start() {
	if lc.pace == nil || !lc.wl.Reconnect { // open-loop churn dials when a request falls due
		for _, pc := range lc.conns {
			pc.dial()
		}
	}
	lc.pace.start()
}

// stop ends the run on this loop: no new requests, every connection closed.
func (lc *loopClient) stop() {
	lc.stopping = true
	lc.pace.stop()
	for _, pc := range lc.conns {
		if pc.c != nil {
			pc.c.Abort()
		}
	}
	lc.maybeDone()
}

func (lc *loopClient) maybeDone() {
	if lc.stopping && lc.open == 0 {
		select {
		case <-lc.done:
		default:
			close(lc.done)
		}
	}
}

// percoreConn drives one connection: it keeps Pipeline requests in flight
// (open loop: sends each request when it falls due, up to MaxInFlight in
// flight) and verifies every reply byte for byte as it arrives, across
// reads.
type percoreConn struct {
	lc      *loopClient
	p       payload
	n       int
	c       *percore.Conn
	reqs    []byte
	reply   []byte // the reply being assembled
	have    int
	bl      backlog     // open loop: the requests fallen due and sent
	sent    []time.Time // start time of request seq (send, or due in open loop), at seq%n
	nextSeq uint64      // next sequence number to send
	ackSeq  uint64      // next sequence number expected back
	dialing bool
	dialAt  time.Time // when the current connection's dial began (churn latency includes it)
	failed  bool      // this connection already counted a failure
}

func newPercoreConn(lc *loopClient, id int) *percoreConn {
	n := lc.wl.depth()
	p := newPayload(lc.wl.Bytes, id)
	return &percoreConn{
		lc: lc, p: p, n: n, bl: backlog{id: id},
		reqs:    p.newBuffer(n),
		reply:   make([]byte, p.size()),
		sent:    make([]time.Time, n),
		nextSeq: 1, ackSeq: 1,
	}
}

func (pc *percoreConn) dial() {
	lc := pc.lc
	if lc.stopping || pc.dialing {
		return
	}
	pc.dialing = true
	pc.dialAt = time.Now()
	lc.open++
	err := dialTo(lc, pc, func(c *percore.Conn, err error) {
		pc.dialing = false
		if err != nil {
			lc.open--
			if !lc.stopping {
				lc.w.Error()
				lc.loop.AfterFunc(retryDelay, pc.dial)
			}
			lc.maybeDone()
			return
		}
		pc.c = c
		if lc.stopping {
			c.Abort() // the run ended while it connected
			return
		}
		pc.have = 0
		pc.failed = false
		pc.ackSeq = pc.nextSeq
		if lc.pace != nil {
			pc.flush()
		} else {
			pc.send(pc.n)
		}
	})
	if err != nil {
		pc.dialing = false
		lc.open--
		lc.w.Error()
		lc.loop.AfterFunc(retryDelay, pc.dial)
	}
}

// release implements releaser: the connection's next request fell due.
// With -reconnect it opens the connection that will carry it, unless one
// is open (the request then waits for its predecessor's reply and close)
// or opening already.
func (pc *percoreConn) release() {
	pc.bl.due++
	if pc.lc.wl.Reconnect && pc.c == nil {
		if !pc.dialing {
			pc.dial()
		}
		return
	}
	pc.flush()
}

// flush sends, in open loop, the requests that fell due and wait, as many
// as the connection may have in flight.
func (pc *percoreConn) flush() {
	if pc.c == nil || pc.c.Closed() {
		return
	}
	inFlight := int(pc.nextSeq - pc.ackSeq)
	pc.send(min(pc.bl.waiting(), pc.n-inFlight))
}

// send sends k new requests in one write.
func (pc *percoreConn) send(k int) {
	if pc.lc.stopping || k <= 0 {
		return
	}
	size := pc.p.size()
	var now time.Time // closed loop: the send; open loop: each request's due time
	if pc.lc.pace == nil {
		now = time.Now()
	}
	if pc.lc.wl.Reconnect {
		now = pc.dialAt
	}
	for i := range k {
		seq := pc.nextSeq + uint64(i)
		req := pc.reqs[i*size : (i+1)*size]
		pc.p.stamp(req, seq)
		start := now
		if pc.lc.pace != nil {
			start = pc.bl.take(pc.lc.pace.p.s)
		}
		pc.sent[seq%uint64(pc.n)] = start
	}
	pc.nextSeq += uint64(k)
	pc.c.Write(pc.reqs[:k*size])
}

// The runtime's callbacks percoreConn implements, checked by the compiler.
var (
	_ percore.Handler      = (*percoreConn)(nil)
	_ percore.CloseHandler = (*percoreConn)(nil)
)

// OnData verifies replies as their bytes arrive and answers each complete
// one with a new request.
func (pc *percoreConn) OnData(c *percore.Conn, data []byte) {
	size := pc.p.size()
	done := 0
	for len(data) > 0 {
		k := copy(pc.reply[pc.have:], data)
		pc.have += k
		data = data[k:]
		if pc.have < size {
			break
		}
		pc.have = 0
		seq := pc.ackSeq
		pc.ackSeq++
		if !pc.p.check(pc.reply, seq) {
			// The stream is out of step: count the mismatch (not also
			// an error) and start over on a new connection.
			pc.lc.w.Mismatch()
			pc.failed = true
			c.Abort()
			return
		}
		pc.lc.w.Done(time.Since(pc.sent[seq%uint64(pc.n)]))
		done++
	}
	if done == 0 {
		return
	}
	if pc.lc.wl.Reconnect {
		// Close with a reset, so the client's ports do not pile up in
		// TIME_WAIT, and open the next connection.
		_ = unix.SetsockoptLinger(c.Fd(), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1})
		c.Abort()
		return
	}
	if pc.lc.pace != nil {
		pc.flush()
		pc.lc.pace.poke()
		return
	}
	pc.send(done)
}

// OnClose counts an unexpected close and reconnects.
func (pc *percoreConn) OnClose(c *percore.Conn, err error) {
	lc := pc.lc
	pc.c = nil
	lc.open--
	if lc.stopping {
		lc.maybeDone()
		return
	}
	// A close the engine did not ask for, or one with requests still
	// unanswered, is a connection failure.
	if !pc.failed && (err != nil || pc.ackSeq != pc.nextSeq) {
		lc.w.Error()
	}
	pc.nextSeq = pc.ackSeq // unanswered requests are not resent
	if lc.wl.Reconnect && lc.pace != nil && pc.bl.waiting() == 0 {
		return // the next connection opens when the next request falls due
	}
	pc.dial()
}
