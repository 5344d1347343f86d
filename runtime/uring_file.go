//go:build linux

package runtime

import (
	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver's file operations: each File operation is the ring's
// own opcode, prepared during the turn and submitted with its one enter.
// The user data is kindFile (or kindFileSync, for the fdatasync linked to
// a write) with the operation's slot and generation in the loop's file
// table (uring_userdata.go).

// uringFileOps are the opcodes of the file operations. A kernel without
// one of them still runs an io_uring loop: its file operations then go to
// the file workers, as on epoll.
var uringFileOps = []ring.Op{
	ring.OpOpenat, ring.OpOpenat2, ring.OpRead, ring.OpReadv, ring.OpWrite,
	ring.OpFsync, ring.OpFallocate, ring.OpStatx, ring.OpClose,
}

// fileStart prepares op for the turn's enter.
func (d *uringDriver) fileStart(op *fileOp) error {
	if !d.fileOps {
		d.l.offload(op)
		return nil
	}
	ud := userData(kindFile, op.slot, op.gen)
	fd := op.fd
	switch w := op.work.(type) {
	case *openOp:
		if w.beneath {
			return d.fr.PrepareOpenat2(w.dirfd, &w.path[0], &w.how, ud)
		}
		return d.fr.PrepareOpenat(w.dirfd, &w.path[0], w.flag, w.perm, ud)
	case *readOp:
		return d.r.PrepareRead(fd, w.buf[w.moved:w.want], uint64(w.off)+uint64(w.moved), ud)
	case *readvOp:
		return d.fr.PrepareReadv(fd, w.iov, uint64(w.off), ud)
	case *writeOp:
		if !w.sync {
			return d.fr.PrepareWrite(fd, w.buf[w.moved:w.want], w.offset(), ud)
		}
		// One submission, so that the link holds.
		if err := d.fr.Reserve(2); err != nil {
			return err
		}
		if err := d.fr.PrepareWrite(fd, w.buf[w.moved:w.want], w.offset(), ud); err != nil {
			return err
		}
		d.fr.Link()
		return d.fr.PrepareFsync(fd, ring.FsyncDataSync, userData(kindFileSync, op.slot, op.gen))
	case *syncOp:
		var flags uint32
		if w.data {
			flags = ring.FsyncDataSync
		}
		return d.fr.PrepareFsync(fd, flags, ud)
	case *allocOp:
		return d.fr.PrepareFallocate(fd, w.mode, uint64(w.off), uint64(w.size), ud)
	case *statOp:
		return d.fr.PrepareStatx(fd, &w.path[0], unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, &w.st, ud)
	case *closeOp:
		return d.r.PrepareClose(fd, ud)
	}
	return unix.EINVAL
}

// fileCompleted dispatches a file operation's completion.
func (d *uringDriver) fileCompleted(kind uint8, slot, gen uint32, res int32) {
	op := d.l.fileOpAt(slot, gen)
	if op == nil {
		return
	}
	d.l.fileResult(op, res, kind == kindFileSync)
}

// sendFile moves the next chunk of c's file: a splice of the file into a
// pipe of the loop's, on the ring (it may wait for the disk), then the
// pipe's bytes into the socket with splice(2) made by the loop itself
// (spliceOut), and a poll on the ring for writability when the socket is full.
// io_uring runs every SPLICE on its worker threads (the kernel forces it
// async): a splice there costs two context switches per chunk, where the
// loop's own splice of a full pipe into a non-blocking socket cannot block
// (docs/decisions/0023-sending-files.md). The ring operations count in
// c.ur.ops, and release cancels them.
func (d *uringDriver) sendFile(c *Conn) {
	sf := c.fileSend()
	if !d.splice {
		d.l.fileSent(c, 0, errSendUnsupported)
		return
	}
	if sf.pipe == nil {
		pp, err := d.l.pipes().get()
		if err != nil {
			d.l.fileSent(c, 0, err)
			return
		}
		sf.pipe = pp
	}
	if sf.inPipe > 0 {
		d.spliceOut(c)
		return
	}
	n := uint32(min(sf.left, pipeSize))
	d.prepSplice(c, d.fr.PrepareSplice(sf.f.fd, sf.off, sf.pipe.w, -1, n, unix.SPLICE_F_MOVE, userData(kindSplice, c.slot, c.gen)))
}

func (d *uringDriver) prepSplice(c *Conn, err error) {
	if err != nil {
		d.l.pipes().release(c.fileSend())
		d.l.fileSent(c, 0, err)
		return
	}
	c.fileSend().ops++
	c.ur.ops++
}

// spliceOut moves the pipe's bytes into the socket while it takes them.
func (d *uringDriver) spliceOut(c *Conn) {
	sf := c.fileSend()
	l := d.l
	for sf.inPipe > 0 {
		d.fileCalls++
		n, err := sys.SpliceOut(sf.pipe.r, int(c.fd), sf.inPipe)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			// The socket is full: wait on the ring until it takes more.
			d.prepSplice(c, d.fr.PreparePollOut(int(c.fd), userData(kindSplicePoll, c.slot, c.gen)))
			return
		case err != nil:
			l.pipes().release(sf)
			l.fileSent(c, 0, errnoErr("splice", err.(unix.Errno)))
			return
		}
		sf.inPipe -= int(n)
		if sf.inPipe == 0 {
			l.pipes().release(sf)
		}
		if !l.fileSent(c, int(n), nil) {
			return
		}
	}
	d.sendFile(c)
}

// spliced handles a completion of c's file send: the fill of its pipe, or
// the poll that waited for the socket to take more.
func (d *uringDriver) spliced(c *Conn, kind uint8, res int32) {
	sf := c.fileSend()
	if sf == nil {
		return
	}
	sf.ops--
	l := d.l
	if kind == kindSplice && res > 0 {
		sf.inPipe += int(res)
	}
	if sf.dead || c.closed() {
		l.deadFileSendDone(c)
		return
	}
	switch {
	case kind == kindSplicePoll && res < 0:
		l.pipes().release(sf)
		l.fileSent(c, 0, errnoErr("poll", unix.Errno(-res)))
	case kind == kindSplicePoll, res > 0:
		d.spliceOut(c)
	default:
		var err error // res 0: the file ended early
		if res < 0 {
			err = unix.Errno(-res)
		}
		l.pipes().release(sf)
		l.fileSent(c, 0, sf.moveError("splice", err))
	}
}

// uringFileRing is what the file operations need of a ring beyond
// uringRing: *ring.Ring has it; the kernel-free tests' stand-in does not,
// and its loop offloads file operations instead.
type uringFileRing interface {
	PrepareOpenat(dirfd int, path *byte, flags int, mode uint32, userData uint64) error
	PrepareOpenat2(dirfd int, path *byte, how *unix.OpenHow, userData uint64) error
	PrepareReadv(fd int, iov []unix.Iovec, off uint64, userData uint64) error
	PrepareWrite(fd int, p []byte, off uint64, userData uint64) error
	PrepareFsync(fd int, flags uint32, userData uint64) error
	PrepareFallocate(fd int, mode uint32, off, n uint64, userData uint64) error
	PrepareStatx(dirfd int, path *byte, flags int, mask uint32, st *unix.Statx_t, userData uint64) error
	PrepareSplice(fdIn int, offIn int64, fdOut int, offOut int64, n uint32, flags uint32, userData uint64) error
	PreparePollOut(fd int, userData uint64) error
	Reserve(n uint32) error
	Link()
}

// probeFiles records which file operations the ring can run itself.
func (d *uringDriver) probeFiles(support *ring.Support) {
	fr, ok := d.r.(uringFileRing)
	if !ok {
		return
	}
	d.fr = fr
	d.fileOps = support.Require(uringFileOps...) == nil
	d.splice = support.Has(ring.OpSplice) && support.Has(ring.OpPollAdd)
}
