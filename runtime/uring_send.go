//go:build linux

package runtime

import (
	"os"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// The io_uring driver's sends: a turn's writes are queued in Conn.out and
// sent at the turn's prepare, one send per connection, all of them with
// the turn's one enter; a completion sends what was written since.

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

// send prepares a send of the next bytes of c's queue, at most maxSend:
// a skipped send where the loop uses them (uring_skip.go), unless one
// found the socket full since the queue last drained.
func (d *uringDriver) send(c *Conn) {
	d.sendOut(c, d.feats&UringSkipSends != 0 && c.ur.flags&ufSendFull == 0)
}

// sendOut is send, skipped (it never waits) or not (it waits for room).
func (d *uringDriver) sendOut(c *Conn, skip bool) {
	p := c.out.pending()
	if c.closed() || len(p) == 0 {
		return
	}
	p, ud := p[:min(len(p), maxSend)], userData(kindSend, c.slot, c.gen)
	var err error
	switch {
	case d.zeroCopy(c, len(p)):
		err = d.sendZC(c, p) // uring_zc.go: never skipped
	case skip:
		err = d.sendSkipped(c, p, ud)
	default:
		err = d.r.PrepareSend(d.sock(c), p, ud)
		if err == nil {
			d.onSlot(c)
		}
	}
	if err != nil {
		d.l.fail(c, "write", err)
		return
	}
	c.ur.ops++
}

// shutdownWrite shuts c's write side with the system call, not a ring
// entry: an IORING_OP_SHUTDOWN names the descriptor by number and is not
// ordered with the close that release queues (it may run in io-wq after
// it), so a lingering close whose peer ended at once could shut the
// write side of the next connection accepted on the same number (httpd's
// TestZZStress431ThenFresh: an error answer, then a fresh connection
// closed unanswered). The call does not block; its result was ignored
// anyway (kindShutdown's completion only counted).
func (d *uringDriver) shutdownWrite(c *Conn) {
	if c.ur.fixed != 0 {
		d.shutdownSlot(c) // no descriptor for the system call (uring_fixed.go)
		return
	}
	d.fileCalls++ // counted with the other calls made outside the ring (Stats.Syscalls)
	if err := sys.ShutdownWrite(int(c.fd)); err != nil && err != unix.ENOTCONN {
		d.l.fail(c, "shutdown", os.NewSyscallError("shutdown", err))
	}
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
	} else {
		c.ur.flags &^= ufSendFull // drained (or failed): the next write may skip again
	}
}
