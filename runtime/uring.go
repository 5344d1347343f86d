//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// User data layout: kind (8 bits) | generation (24 bits) | slot (32 bits).
// It never holds a Go pointer.
const (
	kindAccept uint8 = iota + 1
	kindAcceptPoll
	kindAcceptCancel
	kindRecv
	kindSend
	kindClose
	kindCancel
	kindShutdown
	kindConnect
	kindWake
	kindMsgWake      // another loop's MSG_RING: a wake-up without the eventfd
	kindMsgSent      // this loop's MSG_RING was posted (or failed)
	kindPacketRecv   // a datagram socket's multishot recvmsg (slot: its listener index)
	kindPacketSend   // a sendmsg of a datagram (slot: its send slot)
	kindPacketCancel // the cancel of a datagram socket's receive
)

func userData(kind uint8, slot, gen uint32) uint64 {
	return uint64(kind)<<56 | uint64(gen&genMask)<<32 | uint64(slot)
}

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

	// lns are the stream listeners, by their index in Loop.lns (fd -1
	// where that index is not a stream listener, or after stopListening).
	lns     []uringListener
	loopOps int // listener and cancel operations in flight
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
	fileCalls uint64 // system calls of file sends made outside the ring (drains)

	dirty []*Conn // connections with output to submit this turn
	rearm []*Conn // connections to start receiving again after this batch
	// Closed connections whose cancels or close found the submission
	// queue full, to release again next turn, and the spare list.
	retry, spareRetry []*Conn

	// The connections whose held receives (uringConn.held) the next turn
	// delivers: held back by the turn budget, and not paused (a paused
	// connection is listed again when it resumes, so that the loop does
	// not spin on what it cannot deliver); spare is the list they are
	// moved to while being handled. heldBufs counts the held receives
	// that still hold a provided buffer.
	deferred, spare []*Conn
	heldBufs        int
	// bufsTouched says a receive filled a provided buffer since the
	// buffers' pages were last given back.
	bufsTouched bool
}

// uringListener is one stream listener of the io_uring driver.
type uringListener struct {
	fd int
	// drain is a duplicate of a stopped listener's descriptor, kept until
	// its accept has completed: then what waits in the backlog is
	// accepted (see drainListener) and drain closed. -1 when none.
	drain     int
	acceptOp  uint8 // what is armed on the listener: kindAccept, kindAcceptPoll or 0
	awaitConn bool  // the descriptor table was full with none waiting: poll first
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
	PrepareRecvSelect(fd int, b *ring.BufRing, userData uint64) error
	PrepareRecvmsgMultishot(fd int, msg *unix.Msghdr, flags uint32, b *ring.BufRing, userData uint64) error
	PrepareSendmsg(fd int, msg *unix.Msghdr, userData uint64) error
	PrepareSend(fd int, p []byte, userData uint64) error
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
	ops   int
	flags uringFlags
	// The turn budget: bytes delivered in turn turnStamp.
	turnStamp uint64
	turnBytes int
	// held are the receives that wait for a later turn, from heldHead on,
	// in the order they arrived: held back by the turn budget or by a
	// pause. One queue per connection, whatever held them, is what keeps
	// its bytes in order; once a receive waits here every later one
	// queues behind it.
	held     []deferredRecv
	heldHead int
}

// holding reports whether receives of the connection wait in held.
func (u *uringConn) holding() bool { return u.heldHead < len(u.held) }

// uringFlags are the io_uring driver's flags of a connection.
type uringFlags uint16

const (
	ufRecvArmed  uringFlags = 1 << iota // a receive is armed (multishot, or one buffer when throttled)
	ufRecvEOF                           // the kernel reported the end of the stream (delivery may wait)
	ufDirty                             // on this turn's send list
	ufBudgetHeld                        // receiving stopped while its deferred receives wait
	ufThrottled                         // receiving one buffer at a time after going over budget
	ufRecvCancel                        // the armed receive's cancel is queued
	ufSendCancel                        // the send in flight's cancel is queued
	ufReleasing                         // closed, its cancels or close still to be queued
	ufListed                            // on the driver's list of connections with held receives to deliver
)

// deferredRecv is a receive completion whose delivery waits for a later
// turn; its buffer stays out of the kernel's ring until then. n == 0 is the
// end of the stream, n < 0 a receive's error (-errno).
type deferredRecv struct {
	id   uint16
	n    int32
	copy []byte // the data, copied out of the provided buffer when they run short
}

// errRecvNoBuffer is a receive completion with data but no provided buffer,
// which the kernel never posts for a buffer-select receive.
var errRecvNoBuffer = errors.New("io_uring receive completed without a provided buffer")

// retryWait bounds a loop's wait while a connection's release waits for
// room in the submission queue.
const retryWait = time.Millisecond

func newUringDriver(l *Loop, cfg Config) (*uringDriver, error) {
	r, err := ring.Open(ring.Config{Entries: cfg.RingEntries, Flags: *cfg.RingFlags})
	if err != nil {
		return nil, err
	}
	support, err := ring.Probe()
	if err == nil {
		err = support.Require(uringOps...)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	if err := r.SetBatchWait(cfg.WaitBatch, cfg.WaitMin); err != nil {
		r.Close()
		return nil, err
	}
	br, err := r.NewBufRing(0, cfg.BufferCount, cfg.BufferSize)
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
	d := &uringDriver{
		l: l, driverEnv: l.env(), r: r, br: br, bufs: br, waker: sys.NewWaker(ev),
		cqes:    make([]ring.Completion, 512),
		wakeBuf: make([]byte, 8),
		// Config.eventfdWake (a benchmark's, export_test.go) compares
		// the eventfd with MSG_RING (docs/performance.md).
		msgRing: support.Has(ring.OpMsgRing) && !cfg.eventfdWake,
	}
	d.probeFiles(support)
	if err := d.armWake(); err != nil {
		d.close()
		return nil, err
	}
	return d, nil
}

func (d *uringDriver) armWake() error {
	return d.r.PrepareRead(d.waker.Fd(), d.wakeBuf, 0, userData(kindWake, 0, 0))
}

func (d *uringDriver) listen(i int, fd int) error {
	for len(d.lns) <= i {
		d.lns = append(d.lns, uringListener{fd: -1, drain: -1})
	}
	d.lns[i] = uringListener{fd: fd, drain: -1}
	return d.armAccept(i)
}

// armAccept arms an accept on the listener: multishot without a
// connection cap; with a cap, one accept at a time, so that the loop never
// takes a connection past its cap (the rest wait in the kernel's backlog).
// After an accept failed for want of a descriptor with no connection
// waiting, it arms a poll for the next connection instead: the kernel
// fails an accept at once while the descriptor table is full, so an accept
// armed then would fail again with nobody to refuse.
func (d *uringDriver) armAccept(i int) error {
	ln := &d.lns[i]
	if ln.fd < 0 || ln.acceptOp != 0 || !d.l.accepting() {
		return nil
	}
	var err error
	op := kindAccept
	slot := uint32(i)
	switch {
	case ln.awaitConn:
		op = kindAcceptPoll
		err = d.r.PreparePollIn(ln.fd, userData(op, slot, 0))
	case d.multishotAccept():
		err = d.r.PrepareAcceptMultishot(ln.fd, userData(op, slot, 0))
	default:
		err = d.r.PrepareAccept(ln.fd, userData(op, slot, 0))
	}
	if err != nil {
		return fmt.Errorf("arm accept: %w", err)
	}
	ln.acceptOp = op
	d.loopOps++
	return nil
}

// cancelAccept cancels what is armed on every listener.
func (d *uringDriver) cancelAccept() {
	for i := range d.lns {
		if op := d.lns[i].acceptOp; op != 0 {
			if d.r.PrepareCancel(userData(op, uint32(i), 0), userData(kindAcceptCancel, 0, 0)) == nil {
				d.loopOps++
			}
		}
	}
}

func (d *uringDriver) stopListening() {
	for i := range d.lns {
		ln := &d.lns[i]
		if ln.fd >= 0 && !d.l.stopForced() {
			if dup, err := sys.DupCloexec(ln.fd); err == nil {
				ln.drain = dup
			}
		}
		ln.fd = -1
		if ln.acceptOp == 0 {
			d.drainListener(i)
		}
	}
	d.cancelAccept()
	d.stopPackets()
}

// drainListener accepts what waits in stopped listener i's backlog, once
// its accept is no longer armed, and closes its duplicate. io_uring arms
// accepts with an exclusive wait: a connection whose wake-up went to this
// loop's accept as it was cancelled wakes nobody else, and would wait in
// the backlog for the next connection to wake another holder of the socket
// (a process it was handed to, another loop). Accepted here, it is served
// like any connection a graceful shutdown finds (Loop.acceptResult).
func (d *uringDriver) drainListener(i int) {
	ln := &d.lns[i]
	if ln.drain < 0 {
		return
	}
	for range 1024 {
		fd, errno := sys.Accept(ln.drain)
		if errno != 0 {
			break
		}
		d.l.acceptResult(fd, 0, i)
	}
	sys.Close(ln.drain)
	ln.drain = -1
}

// pauseAccept cancels multishot accepts; a single accept (with a cap) is
// left to complete, and nextAccept arms none while accepting is held.
func (d *uringDriver) pauseAccept() {
	if d.multishotAccept() {
		d.cancelAccept()
	}
}

// multishotAccept reports whether accepts are multishot: only without a
// connection cap.
func (d *uringDriver) multishotAccept() bool { return d.cfg.MaxConns == 0 }

func (d *uringDriver) resumeAccept() {
	for i := range d.lns {
		d.rearmAccept(i)
	}
}

func (d *uringDriver) pauseRead(c *Conn) { d.cancelRecv(c) }

// cancelRecv cancels c's armed receive, if any, and reports false when the
// cancel could not be queued.
func (d *uringDriver) cancelRecv(c *Conn) bool {
	return d.cancelOnce(c, c.ur.flags&ufRecvArmed != 0, ufRecvCancel, kindRecv)
}

// cancel queues a cancel of c's operation of kind, found by its user data:
// the kernel looks that up in a hash table, where a cancel by descriptor
// walks every request the ring holds (closing n connections that way costs
// n², measured in docs/performance.md). It reports false when the
// submission queue took no entry.
func (d *uringDriver) cancel(c *Conn, kind uint8) bool {
	if d.r.PrepareCancel(userData(kind, c.slot, c.gen), userData(kindCancel, c.slot, c.gen)) != nil {
		return false
	}
	c.ur.ops++
	return true
}

func (d *uringDriver) resumeRead(c *Conn) {
	// What arrived while c was paused is delivered first, in order, from
	// the next turn on.
	if c.ur.holding() {
		d.list(c)
	}
	// The receive re-arms once the cancelled one has completed, if it
	// has not yet.
	if c.ur.flags&ufRecvArmed == 0 {
		d.rearm = append(d.rearm, c)
	}
}

func (d *uringDriver) start(c *Conn) error {
	var err error
	if c.ur.flags&ufThrottled != 0 {
		// A connection that recently went over its turn budget receives
		// one buffer at a time, so that it cannot take every provided
		// buffer from the others.
		err = d.r.PrepareRecvSelect(c.fd, d.br, userData(kindRecv, c.slot, c.gen))
	} else {
		err = d.r.PrepareRecvMultishot(c.fd, d.br, userData(kindRecv, c.slot, c.gen))
	}
	if err != nil {
		return err
	}
	c.ur.ops++
	c.ur.flags |= ufRecvArmed
	return nil
}

func (d *uringDriver) write(c *Conn, p []byte) {
	d.l.queue(c, p)
	d.markDirty(c)
}

func (d *uringDriver) writev(c *Conn, bufs [][]byte) {
	for _, b := range bufs {
		d.l.queue(c, b)
	}
	d.markDirty(c)
}

func (d *uringDriver) committed(c *Conn) { d.markDirty(c) }

// markDirty puts c on this turn's send list; the sends are prepared just
// before the loop enters the kernel, so that every write of the turn goes
// out in one send per connection and one enter for all of them. A
// connection with a send in flight is left off: its completion sends the
// rest.
func (d *uringDriver) markDirty(c *Conn) {
	if !c.out.inFlight() && c.ur.flags&ufDirty == 0 {
		c.ur.flags |= ufDirty
		d.dirty = append(d.dirty, c)
	}
}

// send prepares a send of the next bytes of c's queue, at most maxSend.
func (d *uringDriver) send(c *Conn) {
	p := c.out.pending()
	if c.closed() || len(p) == 0 {
		return
	}
	if err := d.r.PrepareSend(c.fd, p[:min(len(p), maxSend)], userData(kindSend, c.slot, c.gen)); err != nil {
		d.l.fail(c, "write", err)
		return
	}
	c.ur.ops++
}

func (d *uringDriver) shutdownWrite(c *Conn) {
	if err := d.r.PrepareShutdown(c.fd, unix.SHUT_WR, userData(kindShutdown, c.slot, c.gen)); err != nil {
		d.l.fail(c, "shutdown", err)
		return
	}
	c.ur.ops++
}

// release cancels what the kernel still holds of c (the armed receive, a
// send or a connect in flight: their memory stays referenced by c until
// they complete) and queues the close of its descriptor behind the
// cancels. Should the submission queue take no entry, c goes on the retry
// list and release runs again next turn, after the completions are reaped:
// until its close is queued, c keeps its descriptor open, so that its
// number cannot go to a new socket that an entry still queued for c would
// then reach, and its slot, so that the loop does not exit with its
// receive still armed.
func (d *uringDriver) release(c *Conn) {
	if c.fd < 0 {
		return
	}
	u := &c.ur
	d.dropHeld(c)
	if !d.cancelRecv(c) ||
		!d.cancelOnce(c, c.out.inFlight(), ufSendCancel, kindSend) ||
		!d.cancelOnce(c, c.state&stConnecting != 0, 0, kindConnect) ||
		!d.cancelOnce(c, c.sendingFile(), 0, kindSplice) ||
		!d.cancelOnce(c, c.sendingFile(), 0, kindSplicePoll) ||
		!d.closeFd(c) {
		if u.flags&ufReleasing == 0 {
			u.flags |= ufReleasing
			d.retry = append(d.retry, c)
		}
		return
	}
	u.flags &^= ufReleasing
	c.fd = -1
	if u.ops == 0 {
		d.l.freeSlot(c)
	}
}

// dropHeld gives back what a closed connection's held receives hold.
func (d *uringDriver) dropHeld(c *Conn) {
	u := &c.ur
	for i := u.heldHead; i < len(u.held); i++ {
		d.giveBack(u.held[i])
		u.held[i] = deferredRecv{}
	}
	u.held, u.heldHead = nil, 0
}

// giveBack returns what a held receive holds: its provided buffer, or the
// copy of its data.
func (d *uringDriver) giveBack(r deferredRecv) {
	switch {
	case r.copy != nil:
		d.l.putBuf(r.copy)
	case r.n > 0:
		d.heldBufs--
		d.bufs.Recycle(r.id)
	}
}

// cancelOnce cancels c's operation of kind if inFlight and its cancel is
// not queued yet (flag; 0 for an operation that a release cancels once
// anyway); it reports false when the cancel could not be queued.
func (d *uringDriver) cancelOnce(c *Conn, inFlight bool, flag uringFlags, kind uint8) bool {
	if !inFlight || c.ur.flags&flag != 0 {
		return true
	}
	if !d.cancel(c, kind) {
		return false
	}
	c.ur.flags |= flag
	return true
}

// closeFd queues the close of c's descriptor.
func (d *uringDriver) closeFd(c *Conn) bool {
	if d.r.PrepareClose(c.fd, userData(kindClose, c.slot, c.gen)) != nil {
		return false
	}
	c.ur.ops++
	return true
}

// retryReleases runs release again for the connections whose cancels or
// close found the submission queue full.
func (d *uringDriver) retryReleases() {
	retry := d.retry
	d.retry = d.spareRetry[:0]
	for i, c := range retry {
		retry[i] = nil
		c.ur.flags &^= ufReleasing
		d.release(c)
	}
	d.spareRetry = retry[:0]
}

func (d *uringDriver) connect(c *Conn, ds *dialState) error {
	if err := d.r.PrepareConnect(c.fd, unsafe.Pointer(&ds.sa), ds.salen, userData(kindConnect, c.slot, c.gen)); err != nil {
		return err
	}
	c.ur.ops++
	return nil
}

// maxSend is the most one send hands the kernel. io_uring completes a
// stream send only once all of it is sent, so a queue of megabytes in one
// send would report no progress to the write timeout until the peer had
// read all of it; at most this much per send, a peer that reads a few
// kilobytes a second is never taken for one that stopped.
const maxSend = 256 << 10

// sendDirty prepares the sends of every connection that wrote this turn.
func (d *uringDriver) sendDirty() {
	for i, c := range d.dirty {
		d.dirty[i] = nil
		c.ur.flags &^= ufDirty
		if !c.out.inFlight() {
			d.send(c)
		}
	}
	d.dirty = d.dirty[:0]
}

// submit prepares this turn's sends and hands them to the kernel. An
// error is left for the next poll, which enters again and reports it.
func (d *uringDriver) submit() {
	d.sendDirty()
	if d.r.Pending() > 0 {
		_ = d.r.Submit()
	}
}

// prepare prepares the sends of the connections that wrote this turn;
// poll's enter submits them.
func (d *uringDriver) prepare() { d.sendDirty() }

// poll submits what is prepared and waits, unless completions are ready
// already, receives were deferred, or prepare's callbacks listed more sends
// (the next prepare prepares them): then it enters without waiting.
func (d *uringDriver) poll(timeout time.Duration) error {
	var err error
	if len(d.retry) > 0 && (timeout < 0 || timeout > retryWait) {
		timeout = retryWait
	}
	if d.r.Ready() == 0 && len(d.deferred) == 0 && len(d.dirty) == 0 {
		d.waitsN++
		err = d.r.SubmitAndWait(timeout)
	} else {
		err = d.r.Submit()
	}
	if err != nil && !errors.Is(err, ring.ErrBusy) {
		return err
	}
	d.l.awoke()
	if d.r.Overflowed() {
		// The kernel holds completions the queue had no room for
		// (IORING_FEAT_NODROP keeps them); reaping below makes room and
		// the next enter delivers them. Counted: a sign the queue is
		// too small for the load (Config.RingEntries).
		d.cnt[sCQOverflows]++
	}
	if len(d.deferred) > 0 {
		d.deliverDeferred()
	}
	for {
		n := d.r.Reap(d.cqes)
		for i := 0; i < n; i++ {
			d.dispatch(&d.cqes[i])
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
			c.ur.flags&(ufRecvEOF|ufBudgetHeld|ufRecvArmed) == 0 {
			if err := d.start(c); err != nil {
				d.l.fail(c, "read", err)
			}
		}
	}
	d.rearm = d.rearm[:0]
	return nil
}

func (d *uringDriver) dispatch(e *ring.Completion) {
	kind := uint8(e.UserData >> 56)
	slot := uint32(e.UserData)
	gen := uint32(e.UserData>>32) & genMask
	l := d.l
	switch kind {
	case kindWake:
		d.waker.Woke()
		if err := d.armWake(); err != nil {
			d.log.Error("percore: re-arm wake-up read", "loop", d.id, "err", err)
		}
		l.runPosted()
		return
	case kindMsgWake:
		d.waker.Woke()
		l.runPosted()
		return
	case kindMsgSent:
		if e.Res < 0 {
			d.msgFailed(slot)
		}
		return
	case kindAccept:
		d.accepted(int(slot), e)
		return
	case kindAcceptPoll:
		d.listenerReady(int(slot), e)
		return
	case kindAcceptCancel:
		d.loopOps--
		return
	case kindFile, kindFileSync:
		d.fileCompleted(kind, slot, gen, e.Res)
		return
	case kindPacketRecv:
		d.packetReceived(int(slot), e)
		return
	case kindPacketSend:
		d.packetSent(slot, e.Res)
		return
	case kindPacketCancel:
		d.loopOps--
		return
	}
	c := l.conn(slot, gen)
	if c == nil {
		if id, ok := e.Buffer(); ok {
			d.bufs.Recycle(id)
		}
		return
	}
	switch kind {
	case kindRecv:
		d.received(c, e)
	case kindSend:
		c.ur.ops--
		c.ur.flags &^= ufSendCancel
		d.sent(c, e.Res)
	case kindConnect:
		c.ur.ops--
		var err error
		if e.Res < 0 {
			err = errnoErr("connect", unix.Errno(-e.Res))
		}
		l.connected(c, err)
	case kindShutdown, kindClose, kindCancel:
		c.ur.ops--
	case kindSplice, kindSplicePoll:
		c.ur.ops--
		d.spliced(c, kind, e.Res)
	}
	if c.closed() && c.ur.ops == 0 && c.fd < 0 {
		l.freeSlot(c)
	}
}

func (d *uringDriver) accepted(i int, e *ring.Completion) {
	l := d.l
	ln := &d.lns[i]
	more := e.More()
	if !more {
		ln.acceptOp = 0
		d.loopOps--
	}
	fd, errno := int(e.Res), unix.Errno(0)
	if e.Res < 0 {
		fd, errno = -1, unix.Errno(-e.Res)
	}
	// An accept that fails once the listener is stopped (closed before
	// the accept was submitted) is nobody's connection.
	stopped := ln.fd < 0 && errno != 0
	if errno != unix.ECANCELED && !stopped && l.acceptResult(fd, errno, i) == acceptIdle {
		ln.awaitConn = true
	}
	if !more {
		if ln.fd < 0 {
			d.drainListener(i)
		}
		d.nextAccept(i)
	}
}

// listenerReady handles the poll armed while the descriptor table was
// full. When it fires a connection is waiting, so accept again (and fail,
// and back off, if the table is still full). Cancelled (to pause or stop),
// it arms what is due next. Should the poll itself fail, accepting is
// retried after the longest back-off rather than at once.
func (d *uringDriver) listenerReady(i int, e *ring.Completion) {
	ln := &d.lns[i]
	ln.acceptOp = 0
	d.loopOps--
	if ln.fd < 0 {
		d.drainListener(i)
	}
	switch {
	case e.Res == -int32(unix.ECANCELED):
	case e.Res < 0:
		if ln.fd < 0 {
			return
		}
		ln.awaitConn = false
		d.log.Error("percore: poll listener", "loop", d.id, "err", errnoErr("poll", unix.Errno(-e.Res)))
		d.l.AfterFunc(acceptBackoffMax, func() { d.nextAccept(i) })
		return
	default:
		ln.awaitConn = false
	}
	d.nextAccept(i)
}

// nextAccept arms listener i's next operation, unless the listener is
// gone or accepting is held (armAccept checks).
func (d *uringDriver) nextAccept(i int) {
	if d.lns[i].fd >= 0 {
		d.rearmAccept(i)
	}
}

func (d *uringDriver) rearmAccept(i int) {
	if err := d.armAccept(i); err != nil {
		d.log.Error("percore: re-arm accept", "loop", d.id, "err", err)
	}
}

func (d *uringDriver) received(c *Conn, e *ring.Completion) {
	u := &c.ur
	more := e.More()
	if !more {
		u.flags &^= ufRecvArmed | ufRecvCancel
		u.ops--
	}
	switch {
	case e.Res > 0:
		d.bufsTouched = true
		id, ok := e.Buffer()
		switch {
		case !ok:
			// The kernel always selects a buffer for these receives;
			// a completion without one is not ours to recycle.
			d.l.fail(c, "read", errRecvNoBuffer)
		case c.closed():
			// On its way when the connection closed: nobody reads it.
			d.bufs.Recycle(id)
		default:
			if u.flags&ufThrottled != 0 && int(e.Res) < d.bufs.Size() {
				u.flags &^= ufThrottled // it drained its socket: multishot again
			}
			if u.holding() || c.readPaused() || d.overBudget(c) {
				d.deferRecv(c, id, e.Res)
			} else {
				d.deliverBuf(c, id, e.Res)
			}
		}
	case e.Res == -int32(unix.ENOBUFS), e.Res == -int32(unix.ECANCELED):
		// Out of buffers (re-armed once this batch's buffers are back
		// with the kernel), or cancelled to pause or close.
	case c.closed():
	default:
		// The end of the stream (0) or an error: after what is held,
		// and not while paused (no OnEOF then either).
		if e.Res == 0 {
			u.flags |= ufRecvEOF
		}
		if u.holding() || c.readPaused() {
			d.deferRecv(c, 0, e.Res)
		} else {
			d.l.readResult(c, nil, int(e.Res), "recv")
		}
	}
	if !more {
		d.rearm = append(d.rearm, c)
	}
}

// overBudget reports whether c has had its turn's budget of bytes.
func (d *uringDriver) overBudget(c *Conn) bool {
	budget := d.cfg.TurnBudget
	if budget == 0 {
		return false
	}
	d.stampTurn(c)
	return c.ur.turnBytes >= budget
}

// stampTurn starts c's count of bytes delivered at a new turn.
func (d *uringDriver) stampTurn(c *Conn) {
	if turn := d.cnt[sTurns]; c.ur.turnStamp != turn {
		c.ur.turnStamp = turn
		c.ur.turnBytes = 0
	}
}

// deliverBuf hands the loop n bytes of provided buffer id, then gives the
// buffer back to the kernel.
func (d *uringDriver) deliverBuf(c *Conn, id uint16, n int32) {
	d.stampTurn(c)
	c.ur.turnBytes += int(n)
	d.l.readResult(c, d.bufs.Bytes(id, int(n)), int(n), "recv")
	d.bufs.Recycle(id)
}

// deferRecv holds a receive of c back for a later turn, behind those
// already held.
func (d *uringDriver) deferRecv(c *Conn, id uint16, n int32) {
	u := &c.ur
	d.cnt[sDeferrals]++
	r := deferredRecv{id: id, n: n}
	if n > 0 {
		if d.heldBufs < d.maxHeld() {
			d.heldBufs++
		} else {
			// Held data would starve other connections of buffers:
			// copy it out (into a pooled buffer) and give the
			// provided buffer back to the kernel now.
			r.copy = append(d.l.getBuf(int(n)), d.bufs.Bytes(id, int(n))...)
			d.bufs.Recycle(id)
		}
	}
	first := !u.holding()
	u.held = append(u.held, r)
	if !c.readPaused() {
		d.list(c)
	}
	if first && u.flags&ufBudgetHeld == 0 {
		// Stop receiving until the held data is delivered, and then
		// receive one buffer at a time: otherwise the kernel keeps
		// filling provided buffers for this connection, and once it
		// holds them all, the others get none.
		u.flags |= ufBudgetHeld | ufThrottled
		d.cancelRecv(c)
	}
}

// list puts c on the list of connections whose held receives the next
// turn delivers, once.
func (d *uringDriver) list(c *Conn) {
	if c.ur.flags&ufListed == 0 {
		c.ur.flags |= ufListed
		d.deferred = append(d.deferred, c)
	}
}

// maxHeld is how many provided buffers deferred receives may keep out of
// the kernel's ring: a quarter of them.
func (d *uringDriver) maxHeld() int { return d.cfg.BufferCount / 4 }

// deliverDeferred hands over, in order, the receives earlier turns held
// back, as far as each connection's budget for this turn allows.
func (d *uringDriver) deliverDeferred() {
	listed := d.deferred
	d.deferred = d.spare[:0]
	for i, c := range listed {
		listed[i] = nil
		c.ur.flags &^= ufListed
		d.deliverHeld(c)
	}
	d.spare = listed[:0]
}

// deliverHeld delivers c's held receives from the oldest on, until none is
// left, c is paused (it is listed again when it resumes) or over this
// turn's budget (listed again for the next turn). A callback may pause,
// resume or close c in between: each receive is taken off the queue before
// it is delivered, and the queue is looked at afresh for the next one.
func (d *uringDriver) deliverHeld(c *Conn) {
	u := &c.ur
	for u.holding() {
		if c.closed() {
			d.dropHeld(c)
			return
		}
		if c.readPaused() {
			return
		}
		if d.overBudget(c) {
			d.list(c)
			return
		}
		r := u.held[u.heldHead]
		u.held[u.heldHead] = deferredRecv{}
		u.heldHead++
		if u.heldHead == len(u.held) {
			u.held, u.heldHead = u.held[:0], 0
		}
		switch {
		case r.copy != nil:
			u.turnBytes += len(r.copy)
			d.l.readResult(c, r.copy, len(r.copy), "recv")
			d.l.putBuf(r.copy)
		case r.n > 0:
			d.heldBufs--
			d.deliverBuf(c, r.id, r.n)
		default:
			d.l.readResult(c, nil, int(r.n), "recv")
		}
	}
	if u.flags&ufBudgetHeld != 0 {
		u.flags &^= ufBudgetHeld
		d.rearm = append(d.rearm, c)
	}
}

// sent handles a send's completion: the loop counts it and moves the queue
// on, and the rest (of this buffer, or written since) goes out next.
func (d *uringDriver) sent(c *Conn, res int32) {
	var err error
	n := int(res)
	if res < 0 {
		if c.closed() {
			return // cancelled by the release
		}
		err, n = errnoErr("send", unix.Errno(-res)), 0
	}
	if d.l.sendResult(c, n, err) {
		d.send(c)
	}
}

// discardBuffers drops the pages of the provided buffers once no
// connection holds a receive or a buffer: the kernel cannot be filling one.
// Pages a burst touched would otherwise stay resident for good.
func (d *uringDriver) discardBuffers() bool {
	if !d.bufsTouched {
		return true
	}
	if d.l.slotsInUse() || d.heldBufs > 0 || len(d.deferred) > 0 {
		return false
	}
	if err := d.bufs.Discard(); err != nil {
		d.log.Warn("percore: give back receive buffer pages", "loop", d.id, "err", err)
	}
	d.bufsTouched = false
	return true
}

func (d *uringDriver) idle() bool {
	return d.loopOps == 0 && !d.l.slotsInUse()
}

func (d *uringDriver) wake() { _ = d.waker.Wake() }

// wakeFrom wakes this loop on behalf of another loop's thread through the
// caller's own ring (a MSG_RING submitted with its next enter, no system
// call of its own) when both loops run io_uring; otherwise, or when the
// caller's submission queue is full, it reports false and the caller
// writes the eventfd. The MSG_RING's own completion on the caller names
// this loop, so that a failed one wakes it through the eventfd instead
// (msgFailed).
func (d *uringDriver) wakeFrom(src driver) bool {
	s, ok := src.(*uringDriver)
	if !ok || !d.msgRing || !s.msgRing {
		return false
	}
	if !d.waker.Claim() {
		return true // a wake-up is on its way already
	}
	if s.r.PrepareMsgRing(d.r.Fd(), 0, userData(kindMsgWake, 0, 0), userData(kindMsgSent, uint32(d.id), 0)) != nil {
		d.waker.Woke()
		return false
	}
	return true
}

// msgFailed handles the failure of a MSG_RING this loop sent to wake loop
// id: the target's wake-up flag, set for it, is cleared and the target
// woken through its eventfd; otherwise every later wake-up of it would be
// swallowed.
func (d *uringDriver) msgFailed(id uint32) { d.l.rewake(id) }

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
	err := d.r.Close()
	if busy {
		d.log.Warn("percore: loop exits with operations in the kernel: its receive buffers stay mapped", "loop", d.id)
	} else {
		err = errors.Join(err, d.bufs.Close(), d.pk.close())
	}
	return errors.Join(err, d.waker.Close())
}
