//go:build linux

package runtime

import (
	"errors"
	"time"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver, one file per operation: its state, set-up and turn
// (this file), the user data every submission carries
// (uring_userdata.go), accepting and connecting (uring_accept.go),
// receiving and the turn budget (uring_recv.go), sending (uring_send.go),
// releasing and cancelling (uring_release.go), wake-ups and MSG_RING
// (uring_wake.go), the dispatch of completions (uring_dispatch.go), file
// operations and file sends (uring_file.go), datagrams (uring_packet.go),
// direct descriptors (uring_fixed.go) and zero-copy sends (uring_zc.go).

// uringOps are the opcodes the io_uring loop needs.
var uringOps = []ring.Op{
	ring.OpAccept, ring.OpRecv, ring.OpSend, ring.OpClose, ring.OpAsyncCancel,
	ring.OpConnect, ring.OpShutdown, ring.OpRead, ring.OpPollAdd,
}

// uringDriver runs a loop on io_uring: multishot accept, multishot receive
// into a provided-buffer ring, sends queued during a turn and submitted
// with the next wait in one io_uring_enter.
type uringDriver struct {
	l loopSide
	driverEnv
	// r is the ring (a *ring.Ring, or a test's stand-in); br the
	// provided-buffer ring registered with it, which receives name, and
	// bufs the same buffers as the driver reads and recycles them.
	r    uringRing
	br   *ring.BufRing
	bufs recvBuffers

	cqes []ring.Completion
	// skipCqes is dispatchSkipsFirst's batch when the completions ready
	// outnumber cqes (uring_skip.go).
	skipCqes []ring.Completion

	// lns are the stream listeners, by their index in Loop.lns (fd -1
	// where that index is not a stream listener, or after stopListening).
	lns     []uringListener
	loopOps int // listener, cancel and zero-copy send operations in flight
	waitsN  uint64
	pk      uringPackets // the datagram sockets (uring_packet.go)

	// waker is the loop's wake-up (an eventfd the ring keeps a read of
	// armed, or a test's stand-in), under the flag that MSG_RING wake-ups
	// from other loops share.
	waker   *sys.Waker
	wakeBuf []byte // the eventfd read's target, referenced until it completes
	msgRing bool   // the kernel has IORING_OP_MSG_RING: loops wake this one through their rings

	// The file operations (uring_file.go): fr is r's file half, fileOps
	// says the ring runs them (else the file workers do), splice that
	// file sends splice.
	fr        uringFileRing
	fileOps   bool
	splice    bool
	fileCalls uint64 // system calls of file sends made outside the ring (spliceOut)

	dirty []*Conn // connections with output to submit this turn
	rearm []*Conn // connections to start receiving again after this batch
	// Closed connections whose cancels or close found the submission
	// queue full, to release again next turn, and the spare list.
	retry, spareRetry []*Conn

	// The connections whose waiting receives (uringConn.waits) the next
	// turn delivers: deferred by the turn budget, and not paused (a paused
	// connection is listed again when it resumes, so that the loop does
	// not spin on what it cannot deliver); spare is the list they are
	// moved to while being handled. waitingBufs counts the waiting receives
	// that still hold a provided buffer.
	deferred, spare []*Conn
	waitingBufs     int
	// spareWaits are connections' queues of waiting receives, empty, to
	// reuse (uring_recv.go).
	spareWaits []*recvWaits
	// bufsTouched says a receive filled a provided buffer since the
	// buffers' pages were last given back.
	bufsTouched bool

	// feats are the features this loop uses (Config.UringFeatures, where
	// the kernel has them). skipped are the skipped sends dispatch has
	// yet to complete, skipSeq numbers them (uring_skip.go).
	feats   UringFeatures
	skipped []skipSend
	skipSeq uint32

	fx uringFixed // the fixed file table, with UringDirectDescriptors (uring_fixed.go)
	zc uringZC    // the zero-copy sends, with UringZeroCopySend (uring_zc.go)

	// inc is the record of the receive ring's buffers, consumed in part,
	// with UringIncrementalBuffers (uring_incbuf.go); nil without it.
	inc *incParts
	// bundles reads receive completions as bundles, with UringBundles
	// (uring_bundle.go); nil without it. bundleBufs is its scratch.
	bundles    bundleReader
	bundleBufs []bundleBuf
	// bundleErr is the first bundle the ring's record refused: reading
	// stops there, and enter reports it once (bundleErrTold), which
	// stops the loop (uring_bundle.go).
	bundleErr     error
	bundleErrTold bool
}

// uringRing is what the driver needs of a ring: *ring.Ring, or the stand-in
// of the kernel-free tests (uring_internal_test.go).
type uringRing interface {
	PrepareAccept(fd int, userData uint64) error
	PrepareAcceptMultishot(fd int, userData uint64) error
	PrepareCancel(target, userData uint64) error
	PrepareClose(fd int, userData uint64) error
	PrepareConnect(fd int, sa unsafe.Pointer, n uint32, userData uint64) error
	PrepareMsgRing(fd int, res uint32, data, userData uint64) error
	PreparePollIn(fd int, userData uint64) error
	PrepareRead(fd int, p []byte, off uint64, userData uint64) error
	PrepareRecvMultishot(fd int, b *ring.BufRing, userData uint64) error
	PrepareRecvMultishotBundle(fd int, b *ring.BufRing, userData uint64) error
	PrepareRecvSelect(fd int, b *ring.BufRing, userData uint64) error
	PrepareRecvmsgMultishot(fd int, msg *unix.Msghdr, flags uint32, b *ring.BufRing, userData uint64) error
	PrepareSendmsg(fd int, msg *unix.Msghdr, userData uint64) error
	PrepareSend(fd int, p []byte, userData uint64) error
	PrepareSendNoWait(fd int, p []byte, userData uint64) error
	SkipSuccess()
	PrepareShutdown(fd, how int, userData uint64) error
	Submit() error
	SubmitAndWait(timeout time.Duration) error
	Reap(dst []ring.Completion) int
	Ready() int
	Pending() uint32
	Overflowed() bool
	Enters() uint64
	Fd() int
	Close() error
}

// recvBuffers is what the driver needs of its provided buffers:
// *ring.BufRing, or a test's stand-in.
type recvBuffers interface {
	Bytes(id uint16, n int) []byte
	Recycle(id uint16)
	Publish()
	Size() int
	Discard() error
	Close() error
}

// uringConn is the io_uring driver's own state of a connection.
type uringConn struct {
	// ops counts operations the kernel still holds for the connection;
	// the slot is freed when a closed connection has none.
	ops int32
	// fixed is the connection's slot in the fixed file table plus one, 0
	// for none (uring_fixed.go): the ring names it by that slot. (Beside
	// ops: the struct packs in 32 bytes, a fifth of Conn; decisions 0072, 0075.)
	fixed uint32
	flags uringFlags
	// skipSeq numbers the skipped send in flight (ufSendSkip), as the
	// driver's list of them does (uring_skip.go).
	skipSeq uint32
	// The turn budget: bytes delivered in turn turnStamp, the low 32 bits
	// of the loop's turn count. The count saturates (a budget beyond 4 GiB
	// is no budget), and a stamp that wrapped round to the current turn
	// (a connection that delivered nothing for 2^32 turns) lets the
	// connection's first turn after it end early: a delay of one turn,
	// never a byte out of order.
	turnStamp, turnBytes uint32
	// waits are the receives that wait for a later turn (uring_recv.go),
	// nil while none does.
	waits *recvWaits
}

// uringFlags are the io_uring driver's flags of a connection.
type uringFlags uint16

const (
	ufRecvArmed   uringFlags = 1 << iota // a receive is armed (multishot, or one buffer when throttled)
	ufRecvEOF                            // the kernel reported the end of the stream (delivery may wait)
	ufDirty                              // on this turn's send list
	ufRecvStopped                        // receiving stopped while its deferred receives wait
	ufThrottled                          // receiving one buffer at a time after going over budget
	ufRecvCancel                         // the armed receive's cancel is queued
	ufSendCancel                         // the send in flight's cancel is queued
	ufReleasing                          // closed, its cancels or close still to be queued
	ufListed                             // on the driver's list of connections with waiting receives to deliver
	ufSendSkip                           // the send in flight is a skipped send (uring_skip.go)
	ufSendFull                           // a skipped send found the socket full, or a zero-copy send went: ordinary sends until the queue drains
	ufSlotShut                           // a shutdown on the slot is in flight: its close waits (uring_fixed.go)
	ufCloseHeld                          // release found the slot's shutdown in flight: its completion queues the close
	ufShutRetry                          // the slot's shutdown found the queue full: retried with the releases (uring_fixed.go)
	ufSendZC                             // the send in flight is a zero-copy send (uring_zc.go)
	ufZCOff                              // the socket refused a zero-copy send: plain sends only
)

func newUringDriver(l *Loop, cfg Config) (*uringDriver, error) {
	support, err := ring.Probe()
	if err == nil {
		err = support.Require(uringOps...)
	}
	if err != nil {
		return nil, err
	}
	feats := uringFeaturesFor(*cfg.UringFeatures, *cfg.RingFlags, support)
	r, err := ring.Open(ring.Config{Entries: cfg.RingEntries, Flags: *cfg.RingFlags,
		RegisterRing: feats&UringRegisteredRing != 0})
	if err != nil {
		return nil, err
	}
	if ok, _ := r.RingRegistered(); !ok {
		// Refused (the thread's table is full): the ring enters
		// through its descriptor.
		feats &^= UringRegisteredRing
	}
	if err := r.SetBatchWait(cfg.WaitBatch, cfg.WaitMin); err != nil {
		r.Close()
		return nil, err
	}
	br, bufCount, err := newRecvBufRing(r, cfg, &feats)
	if err != nil {
		r.Close()
		return nil, err
	}
	ev, err := sys.OpenEventfd(false) // blocking: the ring's read waits for a write
	if err != nil {
		br.Close()
		r.Close()
		return nil, err
	}
	d := newUringDriverOn(l, l.env(), r, br, sys.NewWaker(ev), 512)
	d.br = br
	if feats&UringIncrementalBuffers != 0 {
		d.useIncremental(br, bufCount)
		if feats&UringBundles != 0 {
			// ring.BufRing.Bundle refuses an incremental ring; the
			// incremental buffers were asked for as well (UringBundles).
			feats &^= UringBundles
			if d.id == 0 {
				d.log.Info("percore: receive bundles are not used with incremental buffers")
			}
		}
	}
	if feats&UringBundles != 0 {
		d.useBundles(ringBundles{br})
	}
	if feats&UringNAPI != 0 && !d.registerNAPI(r) {
		feats &^= UringNAPI
	}
	loops := 1
	if l.rt != nil {
		loops = len(l.rt.peers)
	}
	if feats&UringDirectDescriptors != 0 && !d.setupFixed(r, loops) {
		feats &^= UringDirectDescriptors
	}
	if feats&UringZeroCopySend != 0 {
		d.setupZeroCopy(r)
	}
	d.feats = feats
	// Config.eventfdWake (a benchmark's, export_test.go) compares the
	// eventfd with MSG_RING (docs/performance.md).
	d.msgRing = support.Has(ring.OpMsgRing) && !cfg.eventfdWake
	d.probeFiles(support)
	if err := d.armWake(); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

// newUringDriverOn returns an io_uring driver for the loop side l over its
// seams: the ring r, its provided buffers bufs and the wake-up w, reaping
// up to batch completions at a time. newUringDriver gives it the kernel's;
// the tests give it stand-ins (driver_test.go, the model tests), so that
// every driver is built the same way.
func newUringDriverOn(l loopSide, env driverEnv, r uringRing, bufs recvBuffers, w *sys.Waker, batch int) *uringDriver {
	return &uringDriver{
		l: l, driverEnv: env, r: r, bufs: bufs, waker: w,
		cqes:    make([]ring.Completion, batch),
		wakeBuf: make([]byte, 8),
	}
}

// submit prepares this turn's sends and hands them to the kernel. An
// error is left for the next enter, which reports it.
func (d *uringDriver) submit() {
	d.sendDirty()
	if d.r.Pending() > 0 {
		_ = d.r.Submit()
	}
}

// prepare prepares the sends of the connections that wrote this turn;
// the turn's enter submits them.
func (d *uringDriver) prepare() { d.sendDirty() }

// enter submits what is prepared and waits, unless completions are ready
// already, receives were deferred, prepare's callbacks listed more sends
// (the next prepare prepares them), or something waits for the end of a
// skipped send (uring_skip.go): then it enters without waiting.
func (d *uringDriver) enter(timeout time.Duration) error {
	if err := d.bundleFailed(); err != nil {
		return err
	}
	var err error
	if len(d.retry) > 0 && (timeout < 0 || timeout > retryWait) {
		timeout = retryWait
	}
	if d.ready() == 0 && len(d.deferred) == 0 && len(d.dirty) == 0 && !d.skipsAwaited() {
		d.waitsN++
		err = d.r.SubmitAndWait(timeout)
	} else {
		err = d.r.Submit()
	}
	if err != nil && !errors.Is(err, ring.ErrBusy) {
		return err
	}
	return nil
}

// dispatch hands the loop what the kernel reported: first the skipped
// sends' failures and then the skipped sends the enter completed without a
// word (uring_skip.go), so that every handler sees its connection's queue
// as the kernel left it; then the receives earlier turns deferred, then
// every other completion ready, by the kind in its user data (complete,
// uring_dispatch.go); then it re-arms what ran out.
func (d *uringDriver) dispatch() {
	if d.r.Overflowed() {
		// The kernel holds completions the queue had no room for
		// (IORING_FEAT_NODROP keeps them); reaping below makes room and
		// the next enter delivers them. Counted: a sign the queue is
		// too small for the load (Config.RingEntries).
		d.cnt[sCQOverflows]++
	}
	if known := d.skipsKnown(); known > 0 {
		// Skipped sends the enter may have completed: their failures,
		// then the rest of them, before any handler runs (uring_skip.go).
		d.dispatchSkipsFirst(known)
	} else if len(d.deferred) > 0 {
		d.deliverDeferred()
	}
	for {
		n := d.reap(d.cqes)
		for i := 0; i < n; i++ {
			d.complete(&d.cqes[i])
		}
		d.cnt[sCompletions] += uint64(n)
		d.bufs.Publish()
		if n < len(d.cqes) {
			break
		}
	}
	if len(d.retry) > 0 {
		d.retryReleases()
	}
	d.packetTurn()
	for i, c := range d.rearm {
		d.rearm[i] = nil
		// A closing connection is not re-armed, unless it lingers
		// (Conn.CloseLinger: it reads to discard).
		if c.wantsInput() && (c.state&stClosing == 0 || c.state&stLingering != 0) &&
			c.ur.flags&(ufRecvEOF|ufRecvStopped|ufRecvArmed) == 0 {
			if err := d.start(c); err != nil {
				d.l.fail(c, "read", err)
			}
		}
	}
	d.rearm = d.rearm[:0]
}

// discardBuffers drops the pages of the provided buffers once no
// connection holds a receive or a buffer: the kernel cannot be filling one.
// Pages a burst touched would otherwise stay resident for good.
func (d *uringDriver) discardBuffers() bool {
	if !d.bufsTouched {
		return true
	}
	if d.l.slotsInUse() || d.waitingBufs > 0 || len(d.deferred) > 0 {
		return false
	}
	if err := d.bufs.Discard(); err != nil {
		d.log.Warn("percore: give back receive buffer pages", "loop", d.id, "err", err)
	}
	d.bufsTouched = false
	return true
}

func (d *uringDriver) idle() bool {
	if d.l.slotsInUse() {
		return false
	}
	// A forced stop does not wait for the notifications of zero-copy
	// sends (notifsOnly, uring_zc.go): close abandons their buffers.
	return d.loopOps == 0 || d.l.stopForced() && d.notifsOnly()
}

func (d *uringDriver) syscalls() uint64 { return d.r.Enters() + d.fileCalls }

func (d *uringDriver) waits() uint64 { return d.waitsN }

// close closes the ring, and then unmaps the receive buffers it fills,
// unless the kernel may still be filling them: a loop that gave up on its
// kernel (maxKernelErrors) exits with operations in flight, and the
// kernel ends those only as it tears the closed ring down, after close(2)
// has returned. Their buffers then stay mapped (a leak, logged, in a loop
// that failed) rather than be written to after their addresses went to
// another mapping.
func (d *uringDriver) close() error {
	busy := !d.idle() || d.l.filesBusy()
	d.zc.abandon(d) // sends the kernel may still read (a forced stop, or a loop that gave up)
	err := d.r.Close()
	if busy {
		d.log.Warn("percore: loop exits with operations in the kernel: its receive buffers stay mapped", "loop", d.id)
	} else {
		err = errors.Join(err, d.bufs.Close(), d.pk.close())
	}
	return errors.Join(err, d.waker.Close())
}
