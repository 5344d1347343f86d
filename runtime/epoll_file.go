//go:build linux

package runtime

import (
	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// The epoll driver's file operations. Regular files cannot be polled (epoll
// refuses them with EPERM, and a read of one blocks on the disk whatever
// O_NONBLOCK says), so every File operation runs on the loop's file
// workers (file_workers.go), and a file send is sendfile(2) on the
// non-blocking socket, resumed at writability.

// fileStart first tries the operation on the loop's thread where the
// kernel can say it would block instead of blocking: a read or a write
// with RWF_NOWAIT (served from the page cache, or refused with EAGAIN),
// an open with RESOLVE_CACHED (the name's lookup found in the dentry
// cache, or EAGAIN). What succeeds completes in the loop's next turn,
// without a worker; the rest goes to the file workers.
func (d *epollDriver) fileStart(op *fileOp) error {
	if d.inline(op) {
		d.l.inlineDone(op)
		return nil
	}
	d.l.offload(op)
	return nil
}

// resolveCached is RESOLVE_CACHED (Linux 5.12), which x/sys lacks.
const resolveCached = 0x20

// inline runs op on the loop's thread if it can complete without
// blocking, and reports whether it did.
func (d *epollDriver) inline(op *fileOp) bool {
	var n int
	var err error
	switch w := op.work.(type) {
	case *readOp:
		d.calls++
		n, err = d.sys.preadNowait(op.fd, w.buf[w.moved:w.want], w.off+int64(w.moved))
	case *writeOp:
		if w.sync {
			return false // the sync blocks: a worker runs both
		}
		off := int64(-1)
		if w.off >= 0 {
			off = w.off + int64(w.moved)
		}
		d.calls++
		n, err = sys.PwriteNowait(op.fd, w.buf[w.moved:w.want], off)
	case *openOp:
		if w.flag&(unix.O_CREAT|unix.O_TRUNC) != 0 {
			return false // may write metadata: not cached-only
		}
		how := w.how
		if !w.beneath {
			how = unix.OpenHow{Flags: uint64(w.flag)} // no O_CREAT: openat2 wants no mode
		}
		how.Resolve |= resolveCached
		d.calls++
		n, err = sys.Openat2(w.dirfd, string(w.path[:len(w.path)-1]), &how)
	default:
		return false
	}
	switch err {
	case unix.EAGAIN, unix.EOPNOTSUPP, unix.ENOSYS, unix.EINTR:
		return false // would block, or the kernel cannot say: a worker runs it
	}
	op.res, op.syncRes = result(n, err), 0
	return true
}

// sendFile sends c's file with sendfile(2) while the socket takes it, and
// waits for writability when it is full: flush moves it, after the queue
// and before what is written meanwhile. sendfile reads the file's pages on
// the loop's thread: cached files cost no wait; a page-cache miss blocks
// the loop for the read (docs/decisions/0023-sending-files.md).
func (d *epollDriver) sendFile(c *Conn) { d.flush(c) }

// fileReady reports whether c's file send is flush's to move: it runs,
// by sendfile, and nothing is queued before it.
func (d *epollDriver) fileReady(c *Conn) bool {
	sf := c.fileSend()
	return sf != nil && sf.running && !sf.fallback && !sf.dead && c.out.buffered() == 0
}

// sendFilePart makes one sendfile(2) call of c's file send and reports
// it to the loop; it returns false when the socket is full.
func (d *epollDriver) sendFilePart(c *Conn) bool {
	sf := c.fileSend()
	off := sf.off
	d.calls++
	n, err := d.sys.sendfile(int(c.fd), sf.f.fd, &off, int(min(sf.left, fileSendChunk)))
	switch {
	case err == unix.EAGAIN:
		return false
	case err == unix.EINTR:
	case err != nil:
		d.l.fileSent(c, 0, sf.moveError("sendfile", err))
	case n == 0:
		d.l.fileSent(c, 0, sf.moveError("sendfile", nil))
	default:
		d.l.fileSent(c, n, nil)
	}
	return true
}
