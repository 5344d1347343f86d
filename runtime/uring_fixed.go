//go:build linux

package runtime

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver's direct descriptors (UringDirectDescriptors,
// docs/decisions/0058 and 0066). The connections of the loop's own plain
// TCP listeners are accepted into the ring's fixed file table and live
// there as a slot (uringConn.fixed): receives, sends and the shutdown
// name the slot (IOSQE_FIXED_FILE) and release closes it
// (IORING_OP_CLOSE with its file index). Nothing else changes: dials,
// adopted connections and those of shared and TLS listeners keep their
// descriptors, and every operation names a connection by what it has
// (sock, onSlot).
//
// The table is sized to the connections the loop admits, and the loop
// never lets an accept find it full, since the kernel accepts before it
// looks for a slot and closes the connection when there is none: while
// more slots are free than one multishot accept can take in one go (a
// listener's backlog, for every listener accepting into the table) the
// accept is multishot; within that margin it is cancelled and replaced
// by single accepts, one slot each, none armed while the table is full.
// The connections that arrive meanwhile wait in the listen backlog, and
// a close re-arms the accept. An -ENFILE that happens anyway (more
// connections joined the backlog while the kernel's accept loop ran) is
// counted in Stats.AcceptErrors, logged once, and the accept re-armed
// after the next close. An -ENFILE while the count says a slot is free is
// the system's file limit instead (the kernel allocates a socket's file
// before it looks for a slot): the accept-failure policy of 0008.
//
// A real descriptor is installed once where one is needed
// (uring_fixed_install.go: Conn.Fd, the addresses, SendFile, the
// hand-over to a new process) with IORING_OP_FIXED_FD_INSTALL, submitted
// and waited for on the loop's thread; the completions reaped meanwhile
// are kept (stash) and dispatched first, in the kernel's order. The
// connection then has both names until it closes: the ring goes on using
// the slot.

// uringFixedRing is what direct descriptors need of the ring, beyond
// uringRing: *ring.Ring, or nil where the loop uses descriptors only (the
// kernel-free tests' stand-ins among them).
type uringFixedRing interface {
	FixedFile()
	PrepareAcceptMultishotDirect(fd int, userData uint64) error
	PrepareAcceptDirect(fd int, userData uint64) error
	PrepareCloseDirect(slot int, userData uint64) error
	PrepareFixedFdInstall(slot int, userData uint64) error
}

// uringFixed is the driver's state of its fixed file table.
type uringFixed struct {
	r      uringFixedRing // nil without a table
	size   int            // the table's slots
	used   int            // slots filled: accepted, their close not yet complete
	margin int            // the most one round of multishot accepts may take
	// armed is what the accepts armed into the table may take, over
	// the listeners: one for a single accept, the margin for a
	// multishot (uringListener.claim).
	armed int
	// full says an accept found the table full (-ENFILE) although the
	// count said otherwise: no accept into it until the next close.
	full bool
	// starved says an accept was not armed for want of a slot: the next
	// close arms it.
	starved bool
	warned  bool   // the -ENFILE warning was logged
	pending uint32 // the slot (plus one) an accept completion is opening a connection on (start takes it)
	seq     uint32 // numbers the installs, so that a late completion is told apart
	// wait, when set, replaces installWait (the tests' install that
	// gives up).
	wait time.Duration
	// stash holds the completions reaped while waiting for an install,
	// which dispatch (reap) hands on before the ring's.
	stash []ring.Completion
}

// setupFixed registers the loop's fixed file table on r when the loop
// uses direct descriptors, and reports whether it did: sized to the
// connections the loop admits (Config.MaxConns, else its share of the
// descriptor limit, which then bounds what it accepts into the table). A
// refusal (the limit is lower than the size, a kernel without it) leaves
// the loop on descriptors, logged by the first loop.
func (d *uringDriver) setupFixed(r *ring.Ring, loops int) bool {
	size := fixedTableSize(d.cfg.MaxConns, loops)
	if d.cfg.fixedSlots > 0 {
		size = d.cfg.fixedSlots
	}
	err := errors.New("no room in the descriptor limit")
	if size > 0 {
		err = r.RegisterFiles(uint32(size))
	}
	if err != nil {
		if d.id == 0 {
			d.log.Warn("percore: direct descriptors refused: the loops use descriptors", "slots", size, "err", err)
		}
		return false
	}
	d.fx.r, d.fx.size = r, size
	return true
}

// maxFixedFiles is the largest table the kernel registers
// (IORING_MAX_FIXED_FILES). Each slot costs the kernel 8 bytes (and a bit
// of its free map) from registration on, whether filled or not.
const maxFixedFiles = 1 << 20

// fixedTableSize is the table of a loop that admits maxConns connections
// (no cap when 0): that, or the loop's share of the descriptor limit left
// at start (RLIMIT_NOFILE less the descriptors open now, over the loops),
// within what the kernel lets a table hold (the limit, and maxFixedFiles).
func fixedTableSize(maxConns, loops int) int {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	limit := int(min(lim.Cur, maxFixedFiles))
	if maxConns > 0 {
		return min(maxConns, limit)
	}
	open := 0
	if f, err := os.Open("/proc/self/fd"); err == nil {
		names, _ := f.Readdirnames(-1)
		open = len(names)
		f.Close()
	}
	return max(limit-open, 0) / max(loops, 1)
}

// listenerBacklog is the accept queue length of the loop's listeners: the
// configured backlog, capped by the kernel's net.core.somaxconn, as
// listen(2) caps it. The queue holds one more than that.
func listenerBacklog(cfg int) int {
	limit := 4096
	if b, err := os.ReadFile("/proc/sys/net/core/somaxconn"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			limit = n
		}
	}
	if cfg <= 0 || cfg > limit {
		return limit
	}
	return cfg
}

// fixedListener reports whether listener i accepts into the table: the
// loop has one and the listener is its own plain stream socket.
func (d *uringDriver) fixedListener(i int) bool {
	if d.fx.r == nil || !d.l.ownPlainListener(i) {
		return false
	}
	if m := d.cfg.fixedMargin; m != nil {
		d.fx.margin = *m
	} else {
		d.fx.margin += listenerBacklog(d.cfg.Backlog) + 1
	}
	return true
}

// sock is what the ring names c by: its slot, or its descriptor.
func (d *uringDriver) sock(c *Conn) int {
	if c.ur.fixed != 0 {
		return int(c.ur.fixed - 1)
	}
	return int(c.fd)
}

// onSlot marks the entry just prepared for c as one on its slot, if it
// has one.
func (d *uringDriver) onSlot(c *Conn) {
	if c.ur.fixed != 0 {
		d.fx.r.FixedFile()
	}
}

// holdsSocket reports whether c still has a slot or a descriptor for
// release to close.
func holdsSocket(c *Conn) bool { return c.fd >= 0 || c.ur.fixed != 0 }

// takeSlot gives c, which start is starting, the slot the accept being
// reported opened it on (acceptedFixed).
func (d *uringDriver) takeSlot(c *Conn) {
	if d.fx.pending != 0 && c.fd < 0 && c.ur.fixed == 0 {
		c.ur.fixed, d.fx.pending = d.fx.pending, 0
	}
}

// armAcceptFixed arms listener i's accept into the table: multishot while
// more slots are free than a round of accepts may take, else a single
// accept, and none while the slots that are free are all claimed by the
// accepts armed on the loop's other listeners (or the table is full).
// A listener with a connection waiting (ready) that finds the free slots
// all claimed takes the claims back from the idle accepts that hold them
// (reclaim), and is armed when their cancels have ended (armStarved).
func (d *uringDriver) armAcceptFixed(ln *uringListener, ud uint64) (bool, error) {
	fx := &d.fx
	free := fx.size - fx.used - fx.armed
	if free <= 0 || fx.full {
		fx.starved = true
		if ln.ready && !fx.full && fx.size > fx.used {
			d.reclaim(ln)
		}
		return false, nil
	}
	var err error
	multi, claim := d.multishotAccept() && free > fx.margin, 1
	if multi {
		claim = max(fx.margin, 1)
		err = fx.r.PrepareAcceptMultishotDirect(ln.fd, ud)
	} else {
		err = fx.r.PrepareAcceptDirect(ln.fd, ud)
	}
	if err == nil {
		ln.multishot, ln.claim, ln.ready = multi, claim, false
		fx.armed += claim
	}
	return true, err
}

// pollFirst reports whether listener ln polls for a connection before it
// arms an accept into the table: while fewer slots are free and unclaimed
// than the loop has listeners without an accept armed into it, a slot is
// claimed only by a listener with a connection waiting, so that an idle
// listener's armed accept does not hold the last slots from a busy one;
// and after its accept was cancelled to give its claim back (reclaim).
// Not while the table is full: a close arms the accepts (slotClosed).
func (d *uringDriver) pollFirst(ln *uringListener) bool {
	fx := &d.fx
	if ln.ready || fx.size <= fx.used || fx.full {
		return false
	}
	if ln.toPoll {
		return true
	}
	n := 0
	for i := range d.lns {
		if o := &d.lns[i]; o.fd >= 0 && o.fixed && o.claim == 0 {
			n++
		}
	}
	return fx.size-fx.used-fx.armed < n
}

// reclaim cancels the accepts into the table that the loop's listeners
// other than ln have armed and that hold a claim, so that ln, with a
// connection waiting, gets a slot that is free but claimed: an accept
// still armed has found no connection, so its listener is idle. Each
// re-arms as a poll once its cancel has ended (toPoll); a connection it
// accepts before the cancel lands is within its claim.
func (d *uringDriver) reclaim(ln *uringListener) {
	for i := range d.lns {
		o := &d.lns[i]
		if o == ln || !o.fixed || o.acceptOp != kindAccept || o.claim == 0 || o.toPoll {
			continue
		}
		if d.r.PrepareCancel(userData(kindAccept, uint32(i), 0), userData(kindAcceptCancel, 0, 0)) == nil {
			d.loopOps++
			o.toPoll = true
		}
	}
}

// unclaim gives back what ln's accept claimed of the table, once it has
// ended, and returns it.
func (d *uringDriver) unclaim(ln *uringListener) int {
	claim := ln.claim
	d.fx.armed -= claim
	ln.claim = 0
	return claim
}

// acceptedFixed handles a completion of listener i's accept into the
// table, and reports false when it was a failure for accepted to handle
// as any accept's.
func (d *uringDriver) acceptedFixed(i int, e *ring.Completion) bool {
	fx := &d.fx
	if e.Res == -int32(unix.ENFILE) && fx.used >= fx.size {
		// The table is full: the kernel closed the connection it had
		// accepted. Counted and logged, and the accept waits for a
		// close. (With a slot free by the count, the -ENFILE is the
		// system's file limit, found before the connection left the
		// backlog: accepted backs off and re-arms as for any accept,
		// decision 0008. The count cannot miss a slot the kernel
		// filled: every accept's completion posted before the
		// failure's is counted when it is handled, and a slot's close
		// completes after the slot is free. Should a close complete
		// between the failure and its completion, the table has a slot
		// again, and the accept re-armed after the back-off fills it.)
		fx.full, fx.starved = true, true
		d.cnt[sAcceptErrors]++
		if !fx.warned {
			fx.warned = true
			d.log.Warn("percore: an accept found the direct descriptor table full: a connection was lost",
				"loop", d.id, "slots", fx.size, "used", fx.used)
		}
		return true
	}
	if e.Res < 0 {
		return false
	}
	fx.used++
	slot := uint32(e.Res)
	fx.pending = slot + 1
	d.l.acceptResult(-1, 0, i)
	if fx.pending != 0 {
		// The loop opened no connection on it (it is stopping).
		fx.pending = 0
		d.dropSlot(slot)
	}
	ln := &d.lns[i]
	if e.More() && ln.multishot && fx.size-fx.used-(fx.armed-ln.claim) <= fx.margin {
		// Within the margin: single accepts from here on, once this
		// one's cancel has ended it.
		if d.r.PrepareCancel(userData(kindAccept, uint32(i), 0), userData(kindAcceptCancel, 0, 0)) == nil {
			d.loopOps++
			ln.multishot = false
		}
	}
	return true
}

// dropSlot closes a slot no connection was opened on.
func (d *uringDriver) dropSlot(slot uint32) {
	if d.fx.r.PrepareCloseDirect(int(slot), userData(kindSlotDrop, slot, 0)) == nil {
		d.loopOps++
		return
	}
	// The queue takes no entry: the slot stays filled until the ring
	// closes, and counts as used.
	d.log.Error("percore: close an unused direct descriptor", "loop", d.id, "slot", slot)
}

// slotClosed notes a slot's close, and arms the accepts that waited for
// one.
func (d *uringDriver) slotClosed() {
	fx := &d.fx
	fx.used--
	fx.full = false
	d.armStarved()
}

// armStarved arms the accepts that waited for a slot: one was closed, or
// an accept that claimed slots has ended.
func (d *uringDriver) armStarved() {
	fx := &d.fx
	if !fx.starved {
		return
	}
	fx.starved = false
	for i := range d.lns {
		if d.lns[i].fd >= 0 && d.lns[i].fixed {
			d.rearmAccept(i)
		}
	}
}

// closeSlot queues the close of c's slot, if it has one, and reports
// false when the queue took no entry. While a shutdown on the slot is in
// flight the close is held (c keeps its slot, and the shutdown is counted
// in its ops), and the shutdown's completion queues it (slotShutDown).
func (d *uringDriver) closeSlot(c *Conn) bool {
	if c.ur.fixed == 0 {
		return true
	}
	if c.ur.flags&ufSlotShut != 0 {
		c.ur.flags |= ufCloseHeld
		return true
	}
	if d.fx.r.PrepareCloseDirect(int(c.ur.fixed-1), userData(kindCloseSlot, c.slot, c.gen)) != nil {
		return false
	}
	c.ur.ops++
	c.ur.fixed = 0
	return true
}

// shutdownSlot shuts c's write side on its slot, with the ring: there is
// no descriptor for the system call. The kernel runs IORING_OP_SHUTDOWN
// on its io-wq workers (io_shutdown_prep forces it async) and resolves
// the slot only when the worker issues it, while a close of the slot
// runs inline at submit: a close submitted with the shutdown would free
// the slot first, and the next accept into the table could put another
// connection there for the worker to shut down. So the slot's close
// waits for the shutdown's completion (closeSlot, slotShutDown).
//
// A submission queue that takes no entry (ring.Ring made room and the
// kernel still refused it) does not fail the connection: the shutdown is
// retried next turn with the releases (retryShutdown), counted meanwhile
// in c's operations and holding its slot's close as one in flight does.
func (d *uringDriver) shutdownSlot(c *Conn) {
	c.ur.ops++
	c.ur.flags |= ufSlotShut
	if d.r.PrepareShutdown(d.sock(c), unix.SHUT_WR, userData(kindShutdown, c.slot, c.gen)) != nil {
		c.ur.flags |= ufShutRetry
		d.retry = append(d.retry, c)
		return
	}
	d.onSlot(c)
}

// retryShutdown prepares again the shutdown of c's slot that the
// submission queue refused, or, if c was closed meanwhile, ends it
// unsubmitted: the close it held goes instead (slotShutDown).
func (d *uringDriver) retryShutdown(c *Conn) {
	c.ur.flags &^= ufShutRetry
	c.ur.ops--
	if c.closed() {
		d.slotShutDown(c)
		if c.ur.ops == 0 && !holdsSocket(c) {
			d.l.freeSlot(c)
		}
		return
	}
	d.shutdownSlot(c)
}

// slotShutDown notes the completion of c's shutdown on its slot, and
// queues the close that release held meanwhile (through release, which
// retries next turn should the submission queue be full).
func (d *uringDriver) slotShutDown(c *Conn) {
	c.ur.flags &^= ufSlotShut
	if c.ur.flags&ufCloseHeld != 0 {
		c.ur.flags &^= ufCloseHeld
		d.release(c)
	}
}
