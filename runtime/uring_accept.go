//go:build linux

package runtime

import (
	"fmt"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver's connections in: accepting on its stream listeners
// (multishot, one at a time under a connection cap, a poll while the
// descriptor table is full, the backlog drained at a stop), and connecting
// a dial.

// uringListener is one stream listener of the io_uring driver.
type uringListener struct {
	fd int
	// backlog is a duplicate of a stopped listener's descriptor, kept until
	// its accept has completed: then what waits in the backlog is
	// accepted (see acceptBacklog) and backlog closed. -1 when none.
	backlog   int
	acceptOp  uint8 // what is armed on the listener: kindAccept, kindAcceptPoll or 0
	awaitConn bool  // the descriptor table was full with none waiting: poll first
	fixed     bool  // it accepts into the fixed file table (uring_fixed.go)
	multishot bool  // its accept into the table is multishot
	claim     int   // the slots its armed accept into the table may take (uringFixed.armed)
	ready     bool  // a poll said a connection waits: accept into the table (pollFirst)
	toPoll    bool  // its accept was cancelled to free its claim (reclaim): poll first
}

func (d *uringDriver) listen(i int, fd int) error {
	for len(d.lns) <= i {
		d.lns = append(d.lns, uringListener{fd: -1, backlog: -1})
	}
	d.lns[i] = uringListener{fd: fd, backlog: -1, fixed: d.fixedListener(i)}
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
	case ln.awaitConn, ln.fixed && d.pollFirst(ln):
		op = kindAcceptPoll
		err = d.r.PreparePollIn(ln.fd, userData(op, slot, 0))
	case ln.fixed:
		var armed bool
		if armed, err = d.armAcceptFixed(ln, userData(op, slot, 0)); !armed && err == nil {
			return nil // no slot free: a close arms it (slotClosed)
		}
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
				ln.backlog = dup
			}
		}
		ln.fd = -1
		if ln.acceptOp == 0 {
			d.acceptBacklog(i)
		}
	}
	d.cancelAccept()
	d.stopPackets()
}

// acceptBacklog accepts what waits in stopped listener i's backlog, once
// its accept is no longer armed, and closes its duplicate. io_uring arms
// accepts with an exclusive wait: a connection whose wake-up went to this
// loop's accept as it was cancelled wakes nobody else, and would wait in
// the backlog for the next connection to wake another holder of the socket
// (a process it was handed to, another loop). Accepted here, it is served
// like any connection a graceful shutdown finds (Loop.acceptResult).
func (d *uringDriver) acceptBacklog(i int) {
	ln := &d.lns[i]
	if ln.backlog < 0 {
		return
	}
	for range 1024 {
		fd, errno := sys.Accept(ln.backlog)
		if errno != 0 {
			break
		}
		d.l.acceptResult(fd, 0, i)
	}
	sys.Close(ln.backlog)
	ln.backlog = -1
}

// pauseAccept cancels what is armed on the listeners, and nextAccept arms
// nothing while accepting is held. Where the hold comes from an accept's
// own result (the cap, a back-off) its single-shot accept has completed
// and nothing is armed; where it does not (adopted connections filling
// the cap, adopt.go) the armed accept would take one connection past the
// hold. An accept that completes before its cancel is served
// (acceptResult).
func (d *uringDriver) pauseAccept() {
	d.cancelAccept()
}

// multishotAccept reports whether accepts are multishot: only without a
// connection cap, nor one on TLS handshakes (tls.go).
func (d *uringDriver) multishotAccept() bool {
	return d.cfg.MaxConns == 0 && (d.cfg.TLS == nil || d.cfg.MaxHandshakes < 0)
}

func (d *uringDriver) resumeAccept() {
	for i := range d.lns {
		d.rearmAccept(i)
	}
}

func (d *uringDriver) connect(c *Conn, ds *dialState) error {
	if err := d.r.PrepareConnect(int(c.fd), unsafe.Pointer(&ds.sa), ds.salen, userData(kindConnect, c.slot, c.gen)); err != nil {
		return err
	}
	c.ur.ops++
	return nil
}

func (d *uringDriver) accepted(i int, e *ring.Completion) {
	l := d.l
	ln := &d.lns[i]
	more := e.More()
	if !more {
		ln.acceptOp = 0
		d.loopOps--
		d.unclaim(ln)
	}
	fd, errno := int(e.Res), unix.Errno(0)
	if e.Res < 0 {
		fd, errno = -1, unix.Errno(-e.Res)
	}
	// An accept that fails once the listener is stopped (closed before
	// the accept was submitted) is nobody's connection.
	stopped := ln.fd < 0 && errno != 0
	if ln.fixed && !stopped && errno != unix.ECANCELED && d.acceptedFixed(i, e) {
		// A slot, or the table full (uring_fixed.go).
	} else if errno != unix.ECANCELED && !stopped && l.acceptResult(fd, errno, i) == acceptIdle {
		ln.awaitConn = true
	}
	// An accept into the table that a cancel ended (the hold's, or the
	// margin's for single accepts, uring_fixed.go) leaves what waits to
	// the accept armed next into the table: the listener is the loop's
	// own, so no other loop's accept waits on it, and an accept taken
	// here would put a connection on a descriptor, past the hold.
	if errno == unix.ECANCELED && !more && ln.fd >= 0 && !l.stopForced() && !ln.fixed {
		d.acceptCancelledWaiting(i)
	}
	if !more {
		if ln.fd < 0 {
			d.acceptBacklog(i)
		}
		d.nextAccept(i)
		if ln.fixed {
			d.armStarved() // what it claimed of the table is free for the other listeners
		}
	}
}

// acceptCancelledWaiting takes a connection that waits on listener i when
// the hold's cancel (pauseAccept) ended its accept: the kernel may have
// woken this accept for it, and on a listener the loops share (an
// inherited one) an accept is an exclusive waiter, so no other loop's
// accept was woken: left in the backlog, the connection would wait for
// the next one to arrive. Taken, it is served past the hold (as it was
// when the accept completed before its cancel); with none waiting the
// accept4 fails with EAGAIN and nothing changes.
func (d *uringDriver) acceptCancelledWaiting(i int) {
	if fd, errno := sys.Accept(d.lns[i].fd); errno == 0 {
		d.l.acceptResult(fd, 0, i)
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
		d.acceptBacklog(i)
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
		ln.awaitConn, ln.toPoll = false, false
		ln.ready = ln.fixed
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
