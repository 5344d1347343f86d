//go:build linux

package runtime

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// The epoll driver's file operations. Regular files cannot be polled (epoll
// refuses them with EPERM, and a read of one blocks on the disk whatever
// O_NONBLOCK says), so every File operation runs on the loop's file
// workers (file_workers.go), and a file send is sendfile(2) on the
// non-blocking socket, resumed at writability.

func (d *epollDriver) fileStart(op *fileOp) error {
	d.l.offload(op)
	return nil
}

// sendFile sends c's file with sendfile(2) while the socket takes it, and
// waits for writability when it is full. sendfile reads the file's pages
// on the loop's thread: cached files cost no wait; a page-cache miss
// blocks the loop for the read (docs/decisions/0023-sending-files.md).
func (d *epollDriver) sendFile(c *Conn) {
	sf := c.sf
	for {
		off := sf.off
		d.calls++
		n, err := unix.Sendfile(c.fd, sf.f.fd, &off, int(min(sf.left, fileSendChunk)))
		switch {
		case err == unix.EAGAIN:
			d.waitWritable(c)
			return
		case err == unix.EINTR:
			continue
		case (err == unix.EINVAL || err == unix.ENOSYS) && sf.sent == 0:
			d.l.fileSent(c, 0, errSendUnsupported)
			return
		case err == unix.EPIPE || err == unix.ECONNRESET:
			d.l.fileSent(c, 0, errnoErr("sendfile", err.(unix.Errno)))
			return
		case err != nil:
			d.l.fileSent(c, 0, &fs.PathError{Op: "sendfile", Path: sf.f.name, Err: err})
			return
		case n == 0:
			d.l.fileSent(c, 0, sf.fileShort())
			return
		}
		if !d.l.fileSent(c, n, nil) {
			return
		}
	}
}

// fileWritable is writeOut's part: a file send waiting for writability
// goes on. It reports whether it took the event.
func (d *epollDriver) fileWritable(c *Conn) bool {
	sf := c.sf
	if sf == nil || !sf.running || sf.fallback || c.out.buffered() > 0 {
		return false
	}
	if c.ep.pollOut {
		c.ep.pollOut = false
		d.update(c)
	}
	d.sendFile(c)
	return true
}
