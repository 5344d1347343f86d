//go:build linux

package runtime

import (
	"os"

	"github.com/percore/percore/poller"
	"golang.org/x/sys/unix"
)

// The epoll driver's write path: a connection's writes go straight to the
// socket while nothing waits before them, the rest is queued and flushed
// (writev, then the file sends) when EPOLLOUT says there is room, and a
// turn's direct writes after the first are gathered and sent at its end.
// The rest of the driver is in epoll.go.

// writeQueues reports whether c's next write waits in its queue: bytes are
// queued before it, the socket is full, flush is sending, or c has written
// straight to the socket this turn already (the rest of the turn's writes
// then go out together, at its end).
func (d *epollDriver) writeQueues(c *Conn) bool {
	return c.out.buffered() > 0 || c.ep.flags&(efFull|efFlushing) != 0 || c.ep.wrote == uint32(d.cnt[sTurns])
}

// list puts c on the end-of-turn list, unless the socket is full (its
// writability flushes it) or flush is running (it sends what is queued
// before it ends).
func (d *epollDriver) list(c *Conn) {
	if c.ep.flags&(efFull|efGathered|efFlushing) == 0 {
		c.ep.flags |= efGathered
		d.gathered = append(d.gathered, c)
	}
}

// full records that c's socket took less than it was given: c waits for
// writability.
func (d *epollDriver) fullSocket(c *Conn) {
	c.ep.flags |= efFull
	d.update(c)
}

// flushGathered flushes the connections that wrote more than once this turn
// (the turn's prepare phase).
func (d *epollDriver) flushGathered() {
	// By index: a callback that runs after one connection's flush can
	// list another.
	for i := 0; i < len(d.gathered); i++ {
		c := d.gathered[i]
		d.gathered[i] = nil
		c.ep.flags &^= efGathered
		if !c.closed() && c.ep.flags&efFull == 0 {
			d.flush(c)
		}
	}
	d.gathered = d.gathered[:0]
}

func (d *epollDriver) write(c *Conn, p []byte) {
	if d.writeQueues(c) {
		d.l.queue(c, p)
		d.list(c)
		return
	}
	c.ep.wrote = uint32(d.cnt[sTurns])
	d.calls++
	n, errno := d.sys.write(int(c.fd), p)
	if errno != 0 && errno != unix.EAGAIN {
		d.l.fail(c, "write", errnoErr("write", errno))
		return
	}
	d.l.wroteDirect(n)
	if n < len(p) {
		d.l.queue(c, p[n:])
		d.fullSocket(c)
	}
}

func (d *epollDriver) writev(c *Conn, bufs [][]byte) {
	if d.writeQueues(c) || len(bufs) > cap(d.iov) {
		for _, b := range bufs {
			d.l.queue(c, b)
		}
		d.list(c)
		return
	}
	c.ep.wrote = uint32(d.cnt[sTurns])
	iov := d.iov[:0]
	for _, b := range bufs {
		if len(b) > 0 {
			var v unix.Iovec
			poller.SetIovec(&v, b)
			iov = append(iov, v)
		}
	}
	d.calls++
	n, errno := d.sys.writev(int(c.fd), iov)
	clear(iov)
	if errno != 0 {
		if errno != unix.EAGAIN {
			d.l.fail(c, "write", errnoErr("writev", errno))
			return
		}
		n = 0
	}
	d.l.wroteDirect(n)
	for _, b := range bufs {
		if n >= len(b) {
			n -= len(b)
			continue
		}
		d.l.queue(c, b[n:])
		n = 0
	}
	if c.out.buffered() > 0 {
		d.fullSocket(c)
	}
}

// committed sends bytes built in place: with the turn's other writes.
func (d *epollDriver) committed(c *Conn) { d.list(c) }

// flush sends c's outbound bytes while the socket takes them, in order:
// the queue, then the file send waiting for it to empty, then what was
// written during the file (which endFileSend moves into the queue), and
// so on. It is the one place that sends queued bytes and file parts, and
// when it ends it sets c's interest from what is left: writability if the
// socket filled, nothing more to wait for otherwise. The callbacks its
// reports to the loop cause (OnDrain, a file send's done function,
// OnClose) run after it has set the interest, so that none sees, or
// changes, a pass half done. Called at writability and at the end of the
// turn; a call while it runs (a file send started from inside it) returns
// at once: the running pass sends it.
func (d *epollDriver) flush(c *Conn) {
	if c.ep.flags&efFlushing != 0 {
		return
	}
	l := d.l
	l.beginPass()
	c.ep.flags |= efFlushing
	c.ep.flags &^= efFull
	for !c.closed() {
		if p := c.out.pending(); len(p) > 0 {
			d.calls++
			n, errno := d.sys.write(int(c.fd), p)
			if errno == unix.EAGAIN {
				c.ep.flags |= efFull
				break
			}
			if errno != 0 {
				l.sendResult(c, 0, errnoErr("write", errno))
				break
			}
			l.sendResult(c, n, nil)
			if n < len(p) {
				c.ep.flags |= efFull
				break
			}
			continue
		}
		if d.fileReady(c) {
			if !d.sendFilePart(c) {
				c.ep.flags |= efFull
				break
			}
			continue
		}
		break
	}
	c.ep.flags &^= efFlushing
	if !c.closed() {
		if c.out.buffered() == 0 && !d.fileReady(c) {
			c.ep.flags &^= efFull
		}
		d.update(c)
	}
	l.endPass()
}

func (d *epollDriver) shutdownWrite(c *Conn) {
	d.calls++
	if err := d.sys.shutdownWrite(int(c.fd)); err != nil {
		d.l.fail(c, "shutdown", os.NewSyscallError("shutdown", err))
	}
}
