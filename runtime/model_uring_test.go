package runtime

import (
	"fmt"
	"slices"
	"strings"
	"testing"
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
//     dispatch, when an error named its addresses: a descriptor made of
//     its own slot), and no entry names a slot after its close;
//   - with skipped sends (UringSkipSends), no callback runs while a
//     skipped send that the kernel sent whole in an earlier enter still
//     counts in its connection's queue (Conn.Buffered): dispatch accounts
//     for every one of them, their failures first, before any handler;
//   - with incremental buffers (UringIncrementalBuffers: a stand-in ring
//     whose buffers, larger than BufferSize, the kernel fills a part at a
//     time for any connection; model_uring_incbuf_test.go), each
//     completion's part is the next the kernel put in its buffer, read
//     once; a buffer is recycled only once the kernel ended it and the
//     loop read its parts; the loop holds exactly the parts its deferred
//     receives account for, and a filled buffer only while a part of it
//     waits; no OnData is given more than BufferSize;
//
// and at the end, once the peers' data is in, reading resumed and every
// connection closed: OnClose ran once for each, every byte a peer sent
// was delivered, a connection closed with Close sent everything written,
// no buffer (nor part of one) is held, every slot is free and the loop
// exits.
//
// Every seed runs under each of modelFeatureSets (13): with plain sends and
// with skipped sends, on descriptors and on direct descriptors, with plain
// and with incremental buffers (eight), and zero-copy sends and receive
// bundles with some of them. Run longer with -model.seeds and -model.steps; one seed with
// -model.seed; FuzzModelUringConn takes the sequence of choices as its
// input (its first choice picks the sends, its second the descriptors, its
// third the buffers).

func TestModelUringConn(t *testing.T) {
	seen := map[string]int{}
	eachModelSeed(t, func(t *testing.T, seed uint64, steps int) {
		for _, f := range modelFeatureSets {
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
			"descriptor installed", "slot shut down", "shutdown refused", "incremental shared buffer",
			"incremental part held", "incremental receive past BufferSize", "zero-copy send", "zero-copy partial",
			"zero-copy notification", "zero-copy fallback", "stopped with notifications to come",
			"forced stop abandons notifications", "bundle of several buffers", "bundle short of buffers",
			"single receive with bundles", "paused mid-bundle", "closed mid-bundle", "aborted mid-bundle",
			"budget spent mid-bundle", "bundle part held past its completion", "bundle read after its connection closed"} {
			if seen[what] == 0 {
				t.Errorf("no sequence reached %q", what)
			}
		}
	}
	t.Logf("reached: %v", seen)
}

// modelFeatureSets are the features each seed runs under: skipped sends,
// direct descriptors and incremental buffers, each on and off, and
// zero-copy sends with some of them.
var modelFeatureSets = func() []UringFeatures {
	var sets []UringFeatures
	for i := range 8 {
		var f UringFeatures
		if i&1 != 0 {
			f |= UringSkipSends
		}
		if i&2 != 0 {
			f |= UringDirectDescriptors
		}
		if i&4 != 0 {
			f |= UringIncrementalBuffers
		}
		sets = append(sets, f)
	}
	// Zero-copy sends alone, with skipped sends and direct descriptors,
	// and with everything: its interplay is with the send path and the
	// slots, and the sets stay few (each seed runs them all).
	z := UringZeroCopySend
	// Bundles alone and with skipped sends and direct descriptors (not
	// with incremental buffers, which win over them: UringBundles).
	return append(sets, z, z|UringSkipSends|UringDirectDescriptors,
		z|UringSkipSends|UringDirectDescriptors|UringIncrementalBuffers,
		UringBundles, UringBundles|UringSkipSends|UringDirectDescriptors)
}()

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
	// midBundle is set while OnData runs for a part with more of its
	// bundle after it (the record of what the sequences reach).
	midBundle bool
	// direct says the loop uses direct descriptors: its connections are
	// slots (uring_fixed.go).
	direct   bool
	installs int // descriptors installed for slots
	// installedFrom is the slot each installed descriptor was made of.
	installedFrom map[int]int
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
// sends, direct descriptors and incremental buffers (nil: as the input's
// first three choices say).
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
	// For half the sequences with zero-copy sends the kernel keeps their
	// notifications back from a step on (it holds the pages that long),
	// through the loop's stop: the six connections of a long sequence are
	// all closed before it settles, so a hold from the settling alone
	// would never find a send to hold.
	holdFrom := 0
	if m.d.feats&UringZeroCopySend != 0 && in.chance(1, 2) {
		holdFrom = 1 + in.intn(max(steps, 1))
	}
	for m.step = 1; m.step <= steps && !in.exhausted(); m.step++ {
		if m.step == holdFrom {
			m.holdNotifs = true
			m.log("the kernel keeps the zero-copy notifications back from here on")
		}
		m.randomStep()
		m.check()
	}
	m.step = -1
	m.settle()
	return m
}

func newConnModel(in *modelInput, feats *UringFeatures) *connModel {
	m := &connModel{in: in, k: newSimKernel(), seen: map[string]int{}, installedFrom: map[int]int{}}
	if feats == nil {
		var f UringFeatures
		if in.chance(1, 2) {
			f |= UringSkipSends
		}
		if in.chance(1, 2) {
			f |= UringDirectDescriptors
		}
		if in.chance(1, 2) {
			f |= UringIncrementalBuffers
		}
		if in.chance(1, 2) {
			f |= UringZeroCopySend
		}
		if in.chance(1, 2) {
			f |= UringBundles
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
	if *feats&UringIncrementalBuffers != 0 {
		// Larger buffers than BufferSize (as IncrementalBufferSize is),
		// each shared by several receives, a receive perhaps larger
		// than BufferSize.
		m.r.bufs = newSimBufs(m.k, len(m.r.bufs.mem), 40)
		m.r.bufs.r, m.d.bufs = m.r, m.r.bufs
		m.r.bufs.makeIncremental()
		m.d.useIncremental(m.r.bufs, len(m.r.bufs.mem))
		m.d.feats |= UringIncrementalBuffers
	}
	if *feats&UringZeroCopySend != 0 {
		m.d.feats |= UringZeroCopySend
		m.d.setupZeroCopy(m.r)
	}
	if *feats&UringBundles != 0 && *feats&UringIncrementalBuffers == 0 {
		// Buffers in ring order, receives that fill several
		// (model_uring_bundle_test.go); incremental buffers win, as in
		// the driver.
		m.r.bufs.makeBundles()
		m.r.bufs.bun.read = func(ud uint64) {
			slot, gen := uint32(ud), uint32(ud>>32)&genMask
			if int(slot) >= len(m.l.conns) || m.l.conns[slot] == nil || m.l.conns[slot].gen&genMask != gen || m.l.conns[slot].closed() {
				m.seen["bundle read after its connection closed"]++
			}
		}
		m.d.useBundles(m.r.bufs)
		m.d.feats |= UringBundles
	}
	m.k.onSubmit = m.submitted
	if m.direct {
		// A slot's shutdown (a ring entry, not a system call) that the
		// submission queue refuses now and then: retried next turn.
		m.k.refuse = func(op *simOp) bool {
			if op.kind != kindShutdown || !in.chance(1, 3) {
				return false
			}
			m.seen["shutdown refused"]++
			m.log("the submission queue refuses a shutdown of slot %d", op.fd)
			return true
		}
	}
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
		if m.midBundle && !outside {
			m.seen["paused mid-bundle"]++
		}
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
		if m.midBundle && !outside {
			m.seen["closed mid-bundle"]++
		}
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
		if m.midBundle && !outside {
			m.seen["aborted mid-bundle"]++
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
