package runtime

import (
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The stand-in kernel of the model tests (TestModelUring..., TestModelCalls...):
// io_uring instances, provided buffers and eventfds in memory, behind the
// driver's own seams (uringRing, recvBuffers, wakeFd) and a fake loop
// clock. Loops run their real run() on goroutines of their own; a loop
// that waits in the kernel (SubmitAndWait with nothing to reap) parks until
// the model resumes it, so that exactly one goroutine runs at a time and a
// sequence is reproducible from its seed. What the kernel does in between
// (complete a receive, part of a send, a cancel; deliver a MSG_RING) is the
// model's choice.

var (
	modelSeeds = flag.Int("model.seeds", 200, "seeded sequences each TestModel... test of the io_uring driver and the cross-loop calls runs")
	modelSteps = flag.Int("model.steps", 200, "steps in each sequence of those model tests")
	modelSeed  = flag.Uint64("model.seed", 0, "run only this seed of those model tests")
)

// eachModelSeed runs f for every seed of -model.seeds (or -model.seed
// alone), stopping at the first failure.
func eachModelSeed(t *testing.T, f func(t *testing.T, seed uint64, steps int)) {
	first, last := uint64(1), uint64(*modelSeeds)
	if *modelSeed != 0 {
		first, last = *modelSeed, *modelSeed
	}
	for seed := first; seed <= last && !t.Failed(); seed++ {
		f(t, seed, *modelSteps)
	}
}

// modelInput is where a model's choices come from: a seeded generator, or
// the bytes of a fuzz input (which end the sequence when they run out).
type modelInput struct {
	rng  *rand.Rand
	data []byte
	off  int
}

func seededInput(seed uint64) *modelInput {
	return &modelInput{rng: rand.New(rand.NewPCG(seed, 0x23))}
}

// intn returns a choice in [0, n).
func (in *modelInput) intn(n int) int {
	if in.rng != nil {
		return in.rng.IntN(n)
	}
	if in.off >= len(in.data) {
		in.off++
		return 0
	}
	b := in.data[in.off]
	in.off++
	return int(b) % n
}

// chance reports true with probability p/q; false once a fuzz input has
// run out (so that a sequence settles: no more refused pushes, failed
// MSG_RINGs, short sends).
func (in *modelInput) chance(p, q int) bool {
	if in.exhausted() {
		return false
	}
	return in.intn(q) < p
}

// exhausted reports whether a fuzz input has run out.
func (in *modelInput) exhausted() bool { return in.rng == nil && in.off >= len(in.data) }

// simFault stops a sequence at its first broken invariant.
type simFault struct{}

// simKernel holds the stand-in rings, buffers, eventfds and sockets. Its
// lock orders the loops' goroutines and the model's: only one runs at a
// time anyway, the lock makes that visible to the race detector and keeps
// eventfd writes from other goroutines (Post) safe.
type simKernel struct {
	mu     sync.Mutex
	rings  []*simRing
	now    time.Time
	events chan simEvent
	faults []string
	// msgFail, when it returns true, fails a MSG_RING as a full target
	// completion queue does (-EOVERFLOW).
	msgFail func() bool
	// closedFds are descriptors a close completed for: an entry for one
	// after that would reach whatever took its number.
	closedFds map[int]bool
	// onSubmit is the model's own handling of submitted entries
	// (sockets); entries it does not take wait in the ring's inflight.
	onSubmit func(r *simRing, op *simOp) bool
	// refuse, when it returns true, refuses the preparation of an
	// entry, as a submission queue the kernel takes nothing from does.
	refuse func(op *simOp) bool
}

// simEvent is a loop's report to the model: it parked in the kernel, or
// its thread exited.
type simEvent struct {
	r      *simRing
	exited bool
}

func newSimKernel() *simKernel {
	return &simKernel{now: time.Unix(1_000_000, 0), events: make(chan simEvent), closedFds: map[int]bool{}}
}

// fault records a broken invariant (under k.mu or on the model's thread).
func (k *simKernel) fault(format string, args ...any) {
	k.faults = append(k.faults, fmt.Sprintf(format, args...))
}

func (k *simKernel) clock() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.now
}

// The stand-in descriptors: past any limit (20000 here), so that a system
// call that reached one would fail with EBADF and touch nothing.
const (
	simRingFd   = 1<<24 + 1<<20
	simWakeFd   = 1<<24 + 2<<20
	simListenFd = 1<<24 + 3<<20
	simConnFd   = 1<<24 + 4<<20
	// simInstalledFd numbers the descriptors installed for slots (direct
	// descriptors: a connection's error names its addresses).
	simInstalledFd = 1<<24 + 5<<20
)

// simOp is a submitted entry the kernel has not finished.
type simOp struct {
	kind   uint8 // of its user data
	ud     uint64
	fd     int
	p      []byte // a send's bytes, read when it completes (as the kernel does)
	target uint64 // a cancel's
	multi  bool   // multishot (accept, receive)
	sel    bool   // a receive that selects a provided buffer
	nowait bool   // a send that never waits (PrepareSendNoWait)
	bundle bool   // a receive armed as a bundle (PrepareRecvMultishotBundle)
	skip   bool   // its success posts nothing (SkipSuccess)
	fixed  bool   // it names a slot of the fixed file table (FixedFile)
	zc     bool   // a zero-copy send (PrepareSendZC, model_uring_zc_test.go)
	notif  bool   // a zero-copy send's notification, still to come
	msgFd  int    // a MSG_RING's target ring
	msgRes uint32
	msgUD  uint64
}

// simRing is one loop's stand-in io_uring.
type simRing struct {
	k        *simKernel
	id       int
	l        *Loop
	bufs     *simBufs
	wake     *simEventFd
	sq       []*simOp
	cq       []ring.Completion
	inflight []*simOp
	closed   bool
	enters   uint64
	spins    int // enters without a wait since the last park

	parked  bool
	timeout time.Duration
	since   time.Time
	resume  chan struct{}
	exited  bool
	// wakeRead is the armed read of the loop's eventfd, if any.
	wakeRead *simOp
}

func (k *simKernel) newRing(bufCount, bufSize int) *simRing {
	r := &simRing{k: k, id: len(k.rings), resume: make(chan struct{})}
	r.bufs = newSimBufs(k, bufCount, bufSize)
	r.bufs.r = r
	r.wake = &simEventFd{r: r}
	k.rings = append(k.rings, r)
	return r
}

// newLoop makes a loop on an io_uring driver over the stand-ins, not
// started.
func (k *simKernel) newLoop(id int, cfg Config, h Handler) (*Loop, *simRing, *uringDriver) {
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.BufferCount = max(cfg.BufferCount, 8)
	cfg.BufferSize = max(cfg.BufferSize, 16)
	cfg = cfg.withDefaults()
	r := k.newRing(cfg.BufferCount, cfg.BufferSize)
	l := newLoop(cfg, id, 0, h, k.clock)
	l.now = k.now
	d := newUringDriverOn(l, l.env(), r, r.bufs, sys.NewWaker(r.wake), 8)
	d.msgRing = true
	l.d = d
	r.l = l
	if err := d.armWake(); err != nil {
		panic(err)
	}
	return l, r, d
}

// start runs l's thread and waits until it parks (or exits).
func (k *simKernel) start(r *simRing) {
	go func() {
		r.l.run()
		k.events <- simEvent{r: r, exited: true}
	}()
	k.await(r)
}

// await waits for r's loop, which runs, to park or exit.
func (k *simKernel) await(r *simRing) {
	select {
	case ev := <-k.events:
		if ev.r != r {
			panic("a loop ran that the model did not resume")
		}
		if ev.exited {
			k.mu.Lock()
			r.exited = true
			k.mu.Unlock()
		}
	case <-time.After(20 * time.Second):
		panic(fmt.Sprintf("loop %d neither waits in the kernel nor exits", r.id))
	}
}

// runnable reports whether r's loop, parked, would return from its wait:
// a completion is ready, or its wait has a limit (the clock moves to it).
func (r *simRing) runnable() bool {
	return r.parked && !r.exited && (len(r.cq) > 0 || r.timeout >= 0)
}

// resumeLoop lets r's parked loop go on and waits until it parks again or
// exits. With nothing to reap the clock first moves to the end of its wait.
func (k *simKernel) resumeLoop(r *simRing) {
	k.mu.Lock()
	if !r.parked || r.exited {
		k.mu.Unlock()
		panic("resume of a loop that does not wait")
	}
	if len(r.cq) == 0 {
		if r.timeout < 0 {
			k.mu.Unlock()
			panic("resume of a loop with nothing to wake it")
		}
		if end := r.since.Add(r.timeout); end.After(k.now) {
			k.now = end
		}
	}
	r.parked = false
	k.mu.Unlock()
	r.resume <- struct{}{}
	k.await(r)
}

// hasWake reports whether r's completion queue holds a wake-up (of its
// eventfd, or another ring's MSG_RING).
func (r *simRing) hasWake() bool {
	for _, e := range r.cq {
		if k := uint8(e.UserData >> 56); k == kindWake || k == kindMsgWake {
			return true
		}
	}
	return false
}

func (r *simRing) post(ud uint64, res int32, flags uint32) {
	r.cq = append(r.cq, ring.Completion{UserData: ud, Res: res, Flags: flags})
}

func (r *simRing) prep(op *simOp) error {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	if r.closed {
		r.k.fault("ring %d: an entry prepared after its close", r.id)
	}
	op.kind = uint8(op.ud >> 56)
	if r.k.refuse != nil && r.k.refuse(op) {
		return errFakeQueueFull
	}
	r.sq = append(r.sq, op)
	return nil
}

// submitLocked hands the prepared entries to the kernel.
func (r *simRing) submitLocked() {
	k := r.k
	sq := r.sq
	r.sq = nil
	for _, op := range sq {
		if op.fd != 0 && k.closedFds[op.fd] {
			k.fault("ring %d: entry of kind %d for descriptor %d after its close", r.id, op.kind, op.fd)
		}
		switch {
		case op.msgFd != 0:
			t := k.ringByFd(op.msgFd)
			switch {
			case t == nil || t.closed:
				r.post(op.ud, -int32(unix.EBADF), 0)
			case k.msgFail != nil && k.msgFail():
				r.post(op.ud, -int32(unix.EOVERFLOW), 0)
			default:
				t.post(op.msgUD, int32(op.msgRes), 0)
				r.post(op.ud, 0, 0)
			}
		case op.kind == kindWake:
			if r.wakeRead != nil {
				k.fault("ring %d: a second read of its eventfd armed", r.id)
			}
			r.wakeRead = op
			r.wake.completeLocked()
		case op.kind == kindCancel || op.kind == kindAcceptCancel || op.kind == kindPacketCancel:
			r.inflight = append(r.inflight, op)
		default:
			if k.onSubmit == nil || !k.onSubmit(r, op) {
				r.inflight = append(r.inflight, op)
			}
		}
	}
}

func (k *simKernel) ringByFd(fd int) *simRing {
	if i := fd - simRingFd; i >= 0 && i < len(k.rings) {
		return k.rings[i]
	}
	return nil
}

// The uringRing methods.

func (r *simRing) PrepareAccept(fd int, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd})
}
func (r *simRing) PrepareAcceptMultishot(fd int, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd, multi: true})
}
func (r *simRing) PrepareCancel(target, ud uint64) error {
	return r.prep(&simOp{ud: ud, target: target})
}
func (r *simRing) PrepareClose(fd int, ud uint64) error { return r.prep(&simOp{ud: ud, fd: fd}) }
func (r *simRing) PrepareConnect(fd int, _ unsafe.Pointer, _ uint32, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd})
}
func (r *simRing) PrepareMsgRing(fd int, res uint32, data, ud uint64) error {
	return r.prep(&simOp{ud: ud, msgFd: fd, msgRes: res, msgUD: data})
}
func (r *simRing) PreparePollIn(fd int, ud uint64) error { return r.prep(&simOp{ud: ud, fd: fd}) }
func (r *simRing) PrepareRead(fd int, p []byte, _ uint64, ud uint64) error {
	if uint8(ud>>56) == kindWake && fd != r.wake.Fd() {
		r.k.fault("ring %d: the wake-up read of descriptor %d, not its eventfd", r.id, fd)
	}
	return r.prep(&simOp{ud: ud, fd: fd, p: p})
}
func (r *simRing) PrepareRecvMultishot(fd int, _ *ring.BufRing, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd, multi: true, sel: true})
}
func (r *simRing) PrepareRecvMultishotBundle(fd int, _ *ring.BufRing, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd, multi: true, sel: true, bundle: true})
}
func (r *simRing) PrepareRecvSelect(fd int, _ *ring.BufRing, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd, sel: true})
}
func (r *simRing) PrepareRecvmsgMultishot(fd int, _ *unix.Msghdr, _ uint32, _ *ring.BufRing, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd, multi: true, sel: true})
}
func (r *simRing) PrepareSendmsg(fd int, _ *unix.Msghdr, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd})
}
func (r *simRing) PrepareSend(fd int, p []byte, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd, p: p})
}
func (r *simRing) PrepareSendNoWait(fd int, p []byte, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd, p: p, nowait: true})
}

// SkipSuccess marks the last prepared entry, as the ring does.
func (r *simRing) SkipSuccess() {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	if len(r.sq) > 0 {
		r.sq[len(r.sq)-1].skip = true
	}
}
func (r *simRing) PrepareShutdown(fd, _ int, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd})
}

// The uringFixedRing methods (direct descriptors): a slot is numbered as
// the connection's descriptor would be, so that the kernel's side of the
// model finds its connection either way.

// FixedFile marks the last prepared entry, as the ring does.
func (r *simRing) FixedFile() {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	if len(r.sq) > 0 {
		r.sq[len(r.sq)-1].fixed = true
	}
}
func (r *simRing) PrepareAcceptMultishotDirect(fd int, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: fd, multi: true})
}
func (r *simRing) PrepareAcceptDirect(fd int, ud uint64) error { return r.prep(&simOp{ud: ud, fd: fd}) }
func (r *simRing) PrepareCloseDirect(slot int, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: slot, fixed: true})
}
func (r *simRing) PrepareFixedFdInstall(slot int, ud uint64) error {
	return r.prep(&simOp{ud: ud, fd: slot, fixed: true})
}

// maxSpins is how many enters without a wait the model lets a loop make
// before it calls it spinning (a turn that always finds work it leaves for
// the next).
const maxSpins = 100000

func (r *simRing) Submit() error {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	r.enters++
	r.submitLocked()
	r.spins++
	if r.spins == maxSpins {
		r.k.fault("loop %d spins: %d enters without a wait", r.id, maxSpins)
	}
	return nil
}

func (r *simRing) SubmitAndWait(timeout time.Duration) error {
	k := r.k
	k.mu.Lock()
	r.enters++
	r.submitLocked()
	if len(r.cq) > 0 && r.spins < maxSpins {
		r.spins++
		k.mu.Unlock()
		return nil
	}
	r.spins = 0
	r.parked, r.timeout, r.since = true, timeout, k.now
	k.mu.Unlock()
	k.events <- simEvent{r: r}
	<-r.resume
	return nil
}

func (r *simRing) Reap(dst []ring.Completion) int {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	n := copy(dst, r.cq)
	r.cq = slices.Delete(r.cq, 0, n)
	return n
}

func (r *simRing) Ready() int {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	return len(r.cq)
}

func (r *simRing) Pending() uint32 {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	return uint32(len(r.sq))
}

func (r *simRing) Overflowed() bool { return false }
func (r *simRing) Enters() uint64   { return r.enters }
func (r *simRing) Fd() int          { return simRingFd + r.id }

// Close drops what was prepared and never submitted, as closing a real
// ring does.
func (r *simRing) Close() error {
	r.k.mu.Lock()
	defer r.k.mu.Unlock()
	r.closed = true
	r.sq = nil
	r.wakeRead = nil
	return nil
}

// find returns the index of the operation in flight with user data ud.
func (r *simRing) find(ud uint64) int {
	return slices.IndexFunc(r.inflight, func(op *simOp) bool { return op.ud == ud })
}

// take removes the operation at index i from those in flight.
func (r *simRing) take(i int) *simOp {
	op := r.inflight[i]
	r.inflight = slices.Delete(r.inflight, i, i+1)
	return op
}

// completeCancel runs the cancel at index i: the operation it names ends
// with ECANCELED (a receive with no buffer), then the cancel reports.
func (r *simRing) completeCancel(i int) {
	c := r.take(i)
	res := -int32(unix.ENOENT)
	// A zero-copy send's notification is no operation to cancel.
	if j := slices.IndexFunc(r.inflight, func(op *simOp) bool { return op.ud == c.target && !op.notif }); j >= 0 {
		t := r.take(j)
		flags := uint32(0)
		if t.zc {
			// A cancelled zero-copy send still notifies.
			flags = cqeMore
			r.inflight = append(r.inflight, &simOp{kind: kindSendZC, ud: t.ud, p: t.p, zc: true, notif: true})
		}
		r.post(t.ud, -int32(unix.ECANCELED), flags)
		res = 0
	}
	r.post(c.ud, res, 0)
}

// simEventFd is a loop's stand-in eventfd: a counter, which completes the
// ring's armed read of it.
type simEventFd struct {
	r      *simRing
	count  uint64
	closed bool
}

func (e *simEventFd) Fd() int { return simWakeFd + e.r.id }

func (e *simEventFd) Signal() error {
	k := e.r.k
	k.mu.Lock()
	defer k.mu.Unlock()
	if e.closed {
		k.fault("loop %d: its eventfd written after it was closed (the number may be another descriptor's by now)", e.r.id)
		return nil
	}
	e.count++
	e.completeLocked()
	return nil
}

// completeLocked completes the armed read when the counter is not zero.
func (e *simEventFd) completeLocked() {
	r := e.r
	if e.count == 0 || r.wakeRead == nil || r.closed {
		return
	}
	r.post(r.wakeRead.ud, 8, 0)
	r.wakeRead = nil
	e.count = 0
}

func (e *simEventFd) Close() error {
	k := e.r.k
	k.mu.Lock()
	defer k.mu.Unlock()
	e.closed = true
	return nil
}

// simBufs is a ring's stand-in provided buffers. Each is the kernel's (it
// may fill it), the loop's (a completion handed it over) or staged
// (recycled, not yet published).
type simBufs struct {
	k      *simKernel
	r      *simRing
	closed bool
	mem    [][]byte
	state  []simBufState
	inc    *incBufs    // an incremental ring's state (model_uring_incbuf_test.go), nil for a plain one
	bun    *simBundles // the ring's order, with bundles (model_uring_bundle_test.go); nil without
}

type simBufState uint8

const (
	bufKernel simBufState = iota
	bufLoop
	bufStaged
)

func newSimBufs(k *simKernel, count, size int) *simBufs {
	b := &simBufs{k: k, state: make([]simBufState, count)}
	for range count {
		b.mem = append(b.mem, make([]byte, size))
	}
	return b
}

func (b *simBufs) Bytes(id uint16, n int) []byte {
	if b.state[id] != bufLoop {
		b.k.fault("buffer %d read while the kernel may be filling it", id)
	}
	if n > len(b.mem[id]) {
		b.k.fault("%d bytes read from buffer %d, of %d: a completion of several buffers read as one", n, id, len(b.mem[id]))
		n = len(b.mem[id])
	}
	return b.mem[id][:n]
}

func (b *simBufs) Recycle(id uint16) {
	if b.inc != nil {
		b.recycleInc(id)
	}
	if b.state[id] != bufLoop {
		b.k.fault("buffer %d recycled twice (state %d)", id, b.state[id])
	}
	b.state[id] = bufStaged
	if b.bun != nil {
		b.bun.staged = append(b.bun.staged, id)
	}
	// What the loop may still read of it is garbage from now on.
	for i := range b.mem[id] {
		b.mem[id][i] = 0xee
	}
}

func (b *simBufs) Publish() {
	if b.bun != nil {
		b.bun.order = append(b.bun.order, b.bun.staged...)
		b.bun.staged = b.bun.staged[:0]
	}
	for i, s := range b.state {
		if s == bufStaged {
			b.state[i] = bufKernel
		}
	}
}

func (b *simBufs) Size() int { return len(b.mem[0]) }

func (b *simBufs) Discard() error {
	if n := b.count(bufLoop); n > 0 {
		b.k.fault("buffer pages given back while the loop holds %d buffers", n)
	}
	return nil
}

// Close unmaps the buffers: only once the ring that fills them is closed
// and holds no receive.
func (b *simBufs) Close() error {
	r := b.r
	switch {
	case !r.closed:
		b.k.fault("ring %d: its buffers unmapped before the ring was closed", r.id)
	case slices.ContainsFunc(r.inflight, func(op *simOp) bool { return op.sel }):
		b.k.fault("ring %d: its buffers unmapped while the kernel may fill them", r.id)
	}
	b.closed = true
	return nil
}

func (b *simBufs) count(s simBufState) int {
	n := 0
	for _, x := range b.state {
		if x == s {
			n++
		}
	}
	return n
}

// fill hands the loop a kernel buffer holding p; false when none is free.
func (b *simBufs) fill(p []byte) (uint16, bool) {
	i := slices.Index(b.state, bufKernel)
	if i < 0 {
		return 0, false
	}
	b.state[i] = bufLoop
	copy(b.mem[i], p)
	return uint16(i), true
}
