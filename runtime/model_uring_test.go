package runtime

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The io_uring driver's connection path, driven as a model: a real Loop
// running its real run() on an io_uring driver over the stand-in kernel
// (model_sim_test.go: ring, provided buffers, eventfd, fake clock), with
// a small turn budget, few small buffers (so that a quarter is soon held
// and receives are copied out) and a small outbound cap. Seeded random
// sequences of steps: connections accepted; peers that send, end their
// streams or reset; receives the kernel completes with and without more
// to come, short, at the end of the stream, out of buffers (ENOBUFS);
// sends it completes in parts, or fails; cancels it runs before or after
// completing what they cancel; closes; and the handler (echoing what it
// gets) and posted functions pausing and resuming reading (a connection's
// own and another's, from inside and outside its callbacks), writing past
// the outbound cap, closing and aborting. The oracle:
//
//   - bytes reach OnData in the order the peer sent them, each once, and
//     never while reading is paused or after the connection closed; the
//     peer receives what the handler wrote, in order, each byte once;
//   - every provided buffer is the kernel's or the loop's, never both: a
//     buffer is read only while the loop holds it, recycled once, and the
//     loop holds exactly the buffers its held receives account for;
//   - a closed connection holds no receive; one with held receives that
//     is not paused is listed for the next turn; one that reads has a
//     receive armed; one with bytes queued has a send in flight;
//   - a connection's slot is freed only once the kernel holds nothing of
//     it (no entry with its user data queued or in flight);
//   - with direct descriptors (UringDirectDescriptors), every receive,
//     send and shutdown of an accepted connection names its slot
//     (IOSQE_FIXED_FILE) and its close is the slot's (and that of the
//     descriptor installed for it, inline and in the middle of a
//     dispatch, when an error named its addresses), and no entry names
//     a slot after its close;
//   - with skipped sends (UringSkipSends), no callback runs while a
//     skipped send that the kernel sent whole in an earlier enter still
//     counts in its connection's queue (Conn.Buffered): dispatch accounts
//     for every one of them, their failures first, before any handler;
//
// and at the end, once the peers' data is in, reading resumed and every
// connection closed: OnClose ran once for each, every byte a peer sent
// was delivered, a connection closed with Close sent everything written,
// no buffer is held, every slot is free and the loop exits.
//
// Every seed runs four times: with plain sends and with skipped sends, each
// on descriptors and on direct descriptors. Run longer with -model.seeds
// and -model.steps; one seed with -model.seed; FuzzModelUringConn takes
// the sequence of choices as its input (its first choice picks the sends,
// its second the descriptors).

func TestModelUringConn(t *testing.T) {
	seen := map[string]int{}
	eachModelSeed(t, func(t *testing.T, seed uint64, steps int) {
		for _, f := range []UringFeatures{0, UringSkipSends, UringDirectDescriptors, UringSkipSends | UringDirectDescriptors,
			UringZeroCopySend, UringZeroCopySend | UringSkipSends | UringDirectDescriptors} {
			label := fmt.Sprintf("seed %d, features %v", seed, f)
			m := runConnModel(t, label, seededInput(seed), steps, &f)
			for k, v := range m.seen {
				seen[k] += v
			}
		}
	})
	if *modelSeed == 0 && *modelSeeds >= 20 && !t.Failed() {
		for _, what := range []string{"deferred", "copied", "paused with held", "ENOBUFS", "multishot ended",
			"cancel after data", "partial send", "outbound cap", "closed while holding", "pause from outside",
			"reset", "end of stream", "skipped send", "skipped send EAGAIN", "skipped send short", "slot closed",
			"descriptor installed", "slot shut down", "zero-copy send", "zero-copy partial", "zero-copy notification",
			"zero-copy fallback", "stopped with notifications to come"} {
			if seen[what] == 0 {
				t.Errorf("no sequence reached %q", what)
			}
		}
	}
	t.Logf("reached: %v", seen)
}

func FuzzModelUringConn(f *testing.F) {
	for seed := uint64(1); seed <= 8; seed++ {
		in := seededInput(seed)
		data := make([]byte, 512)
		for i := range data {
			data[i] = byte(in.intn(256))
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		runConnModel(t, "fuzz input", &modelInput{data: data}, len(data), nil)
	})
}

// connModel is one sequence.
type connModel struct {
	in    *modelInput
	k     *simKernel
	l     *Loop
	r     *simRing
	d     *uringDriver
	conns []*mconn
	step  int
	trace []string
	seen  map[string]int
	// direct says the loop uses direct descriptors: its connections are
	// slots (uring_fixed.go).
	direct   bool
	installs int // descriptors installed for slots
	// pins are the buffers of zero-copy sends the kernel may still read
	// (model_uring_zc_test.go).
	pins []*zcPin
	// holdNotifs keeps the notifications of zero-copy sends back (the
	// kernel posts them late), so that the loop is stopped with some
	// still to come.
	holdNotifs bool
	// focus is the connection most steps are about for a while: traffic
	// comes in bursts per connection, and so do the interleavings that
	// matter (a receive held back, a pause, another receive, one turn).
	focus *mconn
}

// mconn is one connection as the model sees it: the peer's side and what
// the handler got.
type mconn struct {
	id, fd    int
	c         *Conn
	slot, gen uint32
	sent      []byte // what the peer sent
	given     int    // bytes of sent the kernel has put in receives
	delivered int    // bytes of sent OnData got
	end       int    // the peer ended its stream (1) or reset it (2) after sent
	endGiven  bool   // the kernel reported that end
	written   []byte // what the handler wrote
	received  []byte // what the peer received of it
	closes    int    // OnClose calls
	closeErr  error
	graceful  bool // the handler closed it with Close
	failed    bool // a send failed, or it was aborted
	freed     bool // its slot was seen freed
	// silent says the kernel sent a skipped send whole and posted nothing,
	// in an enter the loop has not yet dispatched the end of; silentSeq is
	// that send's number (uringConn.skipSeq).
	silent    bool
	silentSeq uint32
}

const maxModelConns = 6

// runConnModel runs one sequence with the features *feats of skipped
// sends and direct descriptors (nil: as the input's first two choices
// say).
func runConnModel(t *testing.T, label string, in *modelInput, steps int, feats *UringFeatures) *connModel {
	t.Helper()
	m := newConnModel(in, feats)
	defer func() {
		r := recover()
		if r != nil {
			if _, ok := r.(simFault); !ok {
				panic(r)
			}
		}
		if len(m.k.faults) > 0 {
			t.Fatalf("%s, step %d: %s\nthe last steps:\n\t%s", label, m.step, strings.Join(m.k.faults, "; "),
				strings.Join(m.trace, "\n\t"))
		}
	}()
	for m.step = 1; m.step <= steps && !in.exhausted(); m.step++ {
		m.randomStep()
		m.check()
	}
	m.step = -1
	m.settle()
	return m
}

func newConnModel(in *modelInput, feats *UringFeatures) *connModel {
	m := &connModel{in: in, k: newSimKernel(), seen: map[string]int{}}
	if feats == nil {
		var f UringFeatures
		if in.chance(1, 2) {
			f |= UringSkipSends
		}
		if in.chance(1, 2) {
			f |= UringDirectDescriptors
		}
		if in.chance(1, 2) {
			f |= UringZeroCopySend
		}
		feats = &f
	}
	budgets := []int{16, 24, 32, 48, -1}
	caps := []int{40, 64, 200, -1}
	cfg := Config{BufferCount: 8, BufferSize: 16, TurnBudget: budgets[in.intn(len(budgets))],
		MaxOutbound: caps[in.intn(len(caps))]}
	if cfg.MaxOutbound > 0 {
		cfg.OutboundLowWater = cfg.MaxOutbound / 2
	}
	if *feats&UringZeroCopySend != 0 {
		cfg.ZeroCopySendMin = []int{1, 24, 60}[in.intn(3)]
	}
	m.l, m.r, m.d = m.k.newLoop(0, cfg, connHandler{m})
	if *feats&UringSkipSends != 0 {
		m.d.feats |= UringSkipSends // uring_skip.go: sends the kernel runs inline
	}
	if *feats&UringDirectDescriptors != 0 {
		// A table without a limit: the stand-in kernel gives each
		// connection the slot numbered as its descriptor would be.
		m.d.feats |= UringDirectDescriptors
		m.d.fx.r, m.d.fx.size = m.r, 1<<30
		m.direct = true
	}
	if *feats&UringZeroCopySend != 0 {
		m.d.feats |= UringZeroCopySend
		m.d.setupZeroCopy(m.r)
	}
	m.k.onSubmit = m.submitted
	m.l.lns = []*loopListener{{info: &Listener{Network: "tcp"}, fd: simListenFd}}
	m.l.streams = 1
	if err := m.d.listen(0, simListenFd); err != nil {
		panic(err)
	}
	m.k.start(m.r)
	return m
}

func (m *connModel) log(format string, args ...any) {
	if len(m.trace) == 60 {
		m.trace = m.trace[1:]
	}
	m.trace = append(m.trace, fmt.Sprintf("%d: ", m.step)+fmt.Sprintf(format, args...))
}

func (m *connModel) faultf(format string, args ...any) {
	m.k.fault(format, args...)
	panic(simFault{})
}

// submitted sees each entry the loop hands the kernel (under k.mu): a
// close's descriptor is gone once it completes, and nothing may be
// submitted for a connection whose slot was freed.
func (m *connModel) submitted(r *simRing, op *simOp) bool {
	if op.kind == kindSendZC {
		m.zcSubmitted(op)
		return false
	}
	if op.kind <= kindConnect && op.kind >= kindRecv || op.kind == kindCloseSlot {
		if mc := m.byUserData(op.ud); mc != nil && mc.freed {
			m.k.fault("an entry of kind %d for connection %d after its slot was freed", op.kind, mc.id)
		}
	}
	switch {
	case !m.direct:
		if op.fixed || op.kind == kindCloseSlot {
			m.k.fault("an entry of kind %d on a slot without direct descriptors", op.kind)
		}
	case op.kind == kindRecv || op.kind == kindSend || op.kind == kindShutdown:
		if !op.fixed {
			m.k.fault("an entry of kind %d of a connection on a slot names a descriptor", op.kind)
		}
	case op.kind == kindClose && op.fd <= simInstalledFd:
		m.k.fault("the close of descriptor %d: the connections are slots (or installed descriptors)", op.fd)
	case op.kind == kindInstall && !op.fixed:
		m.k.fault("an install of descriptor %d, not of a slot", op.fd)
	case op.kind == kindCloseSlot:
		// The kernel closes a slot inline, at submit, but runs a
		// shutdown on its io-wq workers (io_shutdown_prep forces it
		// async), which resolve the slot only when they issue it: at a
		// later step (kernelStep). A slot closed under a shutdown in
		// flight may by then hold the next connection accepted into it.
		for _, o := range r.inflight {
			if o.kind == kindShutdown && o.fixed && o.fd == op.fd {
				m.k.fault("the close of slot %d submitted while a shutdown on it is in flight: the shutdown may reach the next connection on the slot", op.fd)
			}
		}
	}
	if op.kind == kindSend && op.nowait {
		m.sendNoWait(r, op)
		return true
	}
	if op.kind == kindInstall {
		// Inline, as the kernel runs it: a descriptor for the slot (a
		// connection's error names its addresses).
		m.installs++
		r.post(op.ud, int32(simInstalledFd+m.installs), 0)
		m.seen["descriptor installed"]++
		return true
	}
	return false
}

// sendNoWait runs a send that never waits as the kernel does, within the
// enter that submits it (under k.mu): all of it (posting nothing when its
// success is skipped), part of it (the short count: MSG_WAITALL makes it
// a failure, which is posted), none (-EAGAIN: the socket is full), or a
// failure of the connection.
func (m *connModel) sendNoWait(r *simRing, op *simOp) {
	in, mc := m.in, m.byUserData(op.ud)
	if mc == nil {
		r.post(op.ud, -int32(unix.EBADF), 0)
		return
	}
	n := len(op.p)
	switch x := in.intn(40); {
	case x == 0:
		r.post(op.ud, -int32(unix.EPIPE), 0)
		m.log("skipped send of connection %d fails", mc.id)
		mc.failed = true
		return
	case x < 8:
		r.post(op.ud, -int32(unix.EAGAIN), 0)
		m.log("skipped send of connection %d finds the socket full", mc.id)
		m.seen["skipped send EAGAIN"]++
		return
	case x < 16 && n > 1:
		n = 1 + in.intn(n-1)
		m.seen["skipped send short"]++
	default:
		m.seen["skipped send"]++
	}
	mc.received = append(mc.received, op.p[:n]...)
	if !bytes.HasPrefix(mc.written, mc.received) {
		m.k.fault("connection %d: the peer received bytes the handler did not write in that order (at %d)",
			mc.id, len(mc.received)-n)
	}
	if n < len(op.p) || !op.skip {
		r.post(op.ud, int32(n), 0)
	} else {
		// The loop's thread is in this enter: its state is read here.
		mc.silent, mc.silentSeq = true, mc.c.ur.skipSeq
	}
	m.log("skipped send of connection %d sends %d of %d", mc.id, n, len(op.p))
}

// byUserData returns the connection an entry's user data names.
func (m *connModel) byUserData(ud uint64) *mconn {
	if uint8(ud>>56) == kindSendZC {
		return m.zcConn(ud) // its record names the connection
	}
	slot, gen := uint32(ud), uint32(ud>>32)&genMask
	for _, mc := range m.conns {
		if mc.c != nil && mc.slot == slot && mc.gen == gen {
			return mc
		}
	}
	return nil
}

// pattern is the byte the peer of connection id sends at offset off.
func pattern(id, off int) byte { return byte(off*7 + id*31 + off/251) }

// open returns the connections OnClose has not run for.
func (m *connModel) open() []*mconn {
	var out []*mconn
	for _, mc := range m.conns {
		if mc.c != nil && mc.closes == 0 {
			out = append(out, mc)
		}
	}
	return out
}

func (m *connModel) pick(cs []*mconn) *mconn {
	if len(cs) == 0 {
		return nil
	}
	if m.focus != nil && slices.Contains(cs, m.focus) && m.in.chance(3, 4) {
		return m.focus
	}
	return cs[m.in.intn(len(cs))]
}

// randomStep takes one step.
func (m *connModel) randomStep() {
	in := m.in
	m.k.mu.Lock()
	locked := true
	unlock := func() {
		if locked {
			m.k.mu.Unlock()
			locked = false
		}
	}
	defer unlock()
	if m.focus == nil || in.chance(1, 10) {
		m.focus = m.pick(m.open())
	}
	switch x := in.intn(100); {
	case x < 8:
		if len(m.conns) < maxModelConns {
			m.accept()
		}
	case x < 25:
		if mc := m.pick(m.open()); mc != nil && mc.end == 0 {
			n := 1 + in.intn(40)
			for range n {
				mc.sent = append(mc.sent, pattern(mc.id, len(mc.sent)))
			}
			m.log("peer %d sends %d bytes", mc.id, n)
		}
	case x < 27:
		if mc := m.pick(m.open()); mc != nil && mc.end == 0 {
			mc.end = 1
			if in.chance(1, 4) {
				mc.end = 2
			}
			m.log("peer %d ends its stream (%d)", mc.id, mc.end)
		}
	case x < 58:
		m.kernelStep(false)
	case x < 64:
		// A burst: the kernel completes several before the loop runs.
		for range 4 + in.intn(10) {
			m.kernelStep(false)
		}
	case x < 72:
		unlock()
		m.outside()
	case x < 77:
		// One connection's burst in one turn: receives, something from
		// outside (a pause, a close), more receives, then the loop.
		if mc := m.focus; mc != nil && mc.closes == 0 && mc.end == 0 {
			for range 16 + in.intn(64) {
				mc.sent = append(mc.sent, pattern(mc.id, len(mc.sent)))
			}
		}
		for range 1 + in.intn(4) {
			m.kernelStep(false)
		}
		unlock()
		m.outside()
		m.k.mu.Lock()
		locked = true
		for range 1 + in.intn(3) {
			m.kernelStep(false)
		}
		unlock()
		if m.r.runnable() {
			m.run()
		}
	default:
		unlock()
		if m.r.runnable() {
			m.run()
		}
	}
}

// accept completes the loop's multishot accept with a new connection.
func (m *connModel) accept() {
	i := slices.IndexFunc(m.r.inflight, func(op *simOp) bool { return op.kind == kindAccept })
	if i < 0 {
		return
	}
	mc := &mconn{id: len(m.conns), fd: simConnFd + len(m.conns)}
	m.conns = append(m.conns, mc)
	m.r.post(m.r.inflight[i].ud, int32(mc.fd), cqeMore)
	m.log("accept connection %d", mc.id)
}

// outside posts to the loop an action on a connection, from outside its
// callbacks (as a proxy pauses a client while its upstream is behind).
func (m *connModel) outside() {
	mc := m.pick(m.open())
	if mc == nil {
		return
	}
	act := m.in.intn(6)
	m.log("posted: %s on connection %d", []string{"pause", "resume", "write", "close", "abort", "pause"}[act], mc.id)
	if m.l.Post(func() { m.act(mc, act, true) }) != nil {
		m.faultf("post refused")
	}
}

// act does one of the handler's actions on mc, on the loop's thread.
func (m *connModel) act(mc *mconn, act int, outside bool) {
	c := mc.c
	switch act {
	case 0, 5:
		if outside && held(c) > 0 {
			m.seen["pause from outside"]++
		}
		if held(c) > 0 {
			m.seen["paused with held"]++
		}
		c.PauseRead()
	case 1:
		c.ResumeRead()
	case 2:
		m.write(mc, 1+m.in.intn(80))
	case 3:
		if c.Buffered() > 0 || c.state&stClosing == 0 {
			mc.graceful = c.state&stClosed == 0 && !mc.failed
		}
		c.Close()
	case 6:
		// A lingering close: the write side shut once the queue is sent
		// (on a slot, with a ring entry the kernel resolves late).
		if c.Buffered() > 0 || c.state&stClosing == 0 {
			mc.graceful = c.state&stClosed == 0 && !mc.failed
		}
		c.CloseLinger()
	case 4:
		if held(c) > 0 {
			m.seen["closed while holding"]++
		}
		if !c.closed() {
			mc.failed = true
		}
		c.Abort()
	}
}

// write writes n bytes of the handler's own to mc.
func (m *connModel) write(mc *mconn, n int) {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(len(mc.written)+i) ^ 0x5a
	}
	if _, err := mc.c.Write(p); err == nil {
		mc.written = append(mc.written, p...)
	}
	if mc.c.Backpressured() {
		m.seen["outbound cap"]++
	}
}

// run lets the loop take its turns until it waits again.
func (m *connModel) run() {
	m.log("the loop runs (%d completions ready)", len(m.r.cq))
	m.k.resumeLoop(m.r)
	if len(m.k.faults) > 0 {
		panic(simFault{})
	}
	for _, mc := range m.conns {
		if mc.c != nil && !mc.freed && mc.c.loop.conns[mc.slot] != mc.c {
			mc.freed = true
		}
	}
}
