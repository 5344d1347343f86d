package runtime

import (
	"errors"
	"os"
	"time"
	"unsafe"

	"github.com/percore/percore/poller"
	"golang.org/x/sys/unix"
)

// epollDriver runs a loop on epoll: level-triggered readiness, one read per
// readable connection per turn into the loop's single read buffer, and
// writes made at once when nothing is queued (the rest waits for
// writability). Reads, writes and accepts on non-blocking descriptors use
// raw system calls: the kernel never blocks them.
type epollDriver struct {
	l        *Loop
	p        *poller.Poller
	buf      []byte
	iov      []unix.Iovec
	lnfd     int
	held     bool // the listener is out of the epoll set (paused)
	syscalls uint64
}

const listenerData = ^uint64(0) - 1

func newEpollDriver(l *Loop, cfg Config) (*epollDriver, error) {
	p, err := poller.Open(512)
	if err != nil {
		return nil, err
	}
	return &epollDriver{l: l, p: p, buf: make([]byte, cfg.BufferSize), lnfd: -1, iov: make([]unix.Iovec, 0, 64)}, nil
}

func connData(c *Conn) uint64 { return uint64(c.gen)<<32 | uint64(c.slot) }

func (d *epollDriver) listen(fd int) error {
	d.lnfd = fd
	d.syscalls++
	return d.p.Add(fd, poller.In, listenerData)
}

func (d *epollDriver) stopListening() {
	if d.lnfd >= 0 && !d.held {
		d.syscalls++
		_ = d.p.Delete(d.lnfd)
	}
	d.lnfd = -1
}

func (d *epollDriver) pauseAccept() {
	if d.lnfd >= 0 && !d.held {
		d.held = true
		d.syscalls++
		_ = d.p.Delete(d.lnfd)
	}
}

func (d *epollDriver) resumeAccept() {
	if d.lnfd >= 0 && d.held {
		d.held = false
		d.syscalls++
		if err := d.p.Add(d.lnfd, poller.In, listenerData); err != nil {
			d.l.log.Error("percore: resume accepting", "loop", d.l.id, "err", err)
		}
	}
}

func (d *epollDriver) pauseRead(c *Conn)  { d.update(c) }
func (d *epollDriver) resumeRead(c *Conn) { d.update(c) }

func (d *epollDriver) start(c *Conn) error {
	d.syscalls++
	return d.p.Add(c.fd, poller.In|poller.RDHup, connData(c))
}

func (d *epollDriver) events(c *Conn) uint32 {
	var ev uint32
	if c.state&(stEOF|stRecvEOF|stPaused) == 0 {
		ev |= poller.In | poller.RDHup
	}
	if c.state&stPollOut != 0 {
		ev |= poller.Out
	}
	return ev
}

// update sets c's epoll interest from its state. A connection with nothing
// to wait for (not reading, nothing queued) leaves the epoll set: epoll
// reports hang-ups and errors whatever the interest, so a connection kept
// in the set after its peer is gone would wake the loop on every wait.
// Like the io_uring loop, it then hears of the peer at its next write.
func (d *epollDriver) update(c *Conn) {
	ev := d.events(c)
	var err error
	switch {
	case ev == 0 && c.state&stUnpolled != 0:
		return
	case ev == 0:
		c.state |= stUnpolled
		err = d.p.Delete(c.fd)
	case c.state&stUnpolled != 0:
		c.state &^= stUnpolled
		err = d.p.Add(c.fd, ev, connData(c))
	default:
		err = d.p.Modify(c.fd, ev, connData(c))
	}
	d.syscalls++
	if err != nil {
		d.l.fail(c, "write", err)
	}
}

func (d *epollDriver) write(c *Conn, p []byte) {
	if len(c.out) > 0 || c.state&stPollOut != 0 {
		c.appendOut(p)
		return
	}
	n, errno := d.rawWrite(c.fd, p)
	if errno != 0 && errno != unix.EAGAIN {
		d.l.fail(c, "write", errnoErr("write", errno))
		return
	}
	d.l.cnt.bytesOut += uint64(n)
	if n < len(p) {
		c.appendOut(p[n:])
		c.state |= stPollOut
		d.update(c)
	}
}

func (d *epollDriver) writev(c *Conn, bufs [][]byte) {
	if len(c.out) > 0 || c.state&stPollOut != 0 || len(bufs) > cap(d.iov) {
		for _, b := range bufs {
			c.appendOut(b)
		}
		d.flush(c)
		return
	}
	iov := d.iov[:0]
	for _, b := range bufs {
		if len(b) > 0 {
			v := unix.Iovec{Base: unsafe.SliceData(b)}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
	}
	d.syscalls++
	r, _, errno := unix.RawSyscall(unix.SYS_WRITEV, uintptr(c.fd), uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
	clear(iov)
	n := int(r)
	if errno != 0 {
		if errno != unix.EAGAIN {
			d.l.fail(c, "write", errnoErr("writev", errno))
			return
		}
		n = 0
	}
	d.l.cnt.bytesOut += uint64(n)
	for _, b := range bufs {
		if n >= len(b) {
			n -= len(b)
			continue
		}
		c.appendOut(b[n:])
		n = 0
	}
	if len(c.out) > 0 {
		c.state |= stPollOut
		d.update(c)
	}
}

func (d *epollDriver) flush(c *Conn) {
	if len(c.out) > 0 && c.state&stPollOut == 0 {
		d.writeOut(c)
	}
}

// writeOut sends queued output; called when the socket is writable.
func (d *epollDriver) writeOut(c *Conn) {
	for len(c.out) > 0 {
		n, errno := d.rawWrite(c.fd, c.out)
		if errno == unix.EAGAIN {
			break
		}
		if errno != 0 {
			d.l.fail(c, "write", errnoErr("write", errno))
			return
		}
		d.l.cnt.bytesOut += uint64(n)
		c.out = c.out[:copy(c.out, c.out[n:])]
		d.l.sentSome(c)
		if c.state&stClosed != 0 {
			return
		}
	}
	if len(c.out) > 0 {
		if c.state&stPollOut == 0 {
			c.state |= stPollOut
			d.update(c)
		}
		return
	}
	d.l.putBuf(c.out)
	c.out = nil
	if c.state&stPollOut != 0 {
		c.state &^= stPollOut
		d.update(c)
	}
	d.l.drained(c)
}

func (d *epollDriver) rawWrite(fd int, p []byte) (int, unix.Errno) {
	d.syscalls++
	r, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}

func (d *epollDriver) shutdownWrite(c *Conn) {
	if c.state&(stClosed|stWriteShut) != 0 {
		return
	}
	c.state |= stWriteShut
	d.syscalls++
	if err := unix.Shutdown(c.fd, unix.SHUT_WR); err != nil {
		d.l.fail(c, "shutdown", os.NewSyscallError("shutdown", err))
	}
}

func (d *epollDriver) release(c *Conn) {
	if c.fd >= 0 {
		d.syscalls++
		unix.Close(c.fd) // also leaves the epoll set: nothing else holds the file
		c.fd = -1
	}
	d.l.freeSlot(c)
}

func (d *epollDriver) connect(c *Conn, ds *dialState) error {
	d.syscalls++
	_, _, errno := unix.RawSyscall(unix.SYS_CONNECT, uintptr(c.fd), uintptr(unsafe.Pointer(&ds.sa)), uintptr(ds.salen))
	if errno != 0 && errno != unix.EINPROGRESS {
		return errnoErr("connect", errno)
	}
	d.syscalls++
	return d.p.Add(c.fd, poller.Out, connData(c))
}

func (d *epollDriver) poll(timeout time.Duration) error {
	d.syscalls++
	evs, err := d.p.Wait(timeout)
	if err != nil {
		return err
	}
	l := d.l
	l.awoke()
	l.cnt.completions += uint64(len(evs))
	for i := range evs {
		ev := &evs[i]
		switch data := ev.Data(); data {
		case poller.WakeData:
			d.syscalls++
			d.p.Drain()
			l.runPosted()
		case listenerData:
			d.acceptAll()
		default:
			c := l.conn(uint32(data), uint32(data>>32))
			if c == nil || c.state&stClosed != 0 {
				continue
			}
			d.ready(c, ev.Events())
		}
	}
	return nil
}

func (d *epollDriver) ready(c *Conn, events uint32) {
	l := d.l
	if c.state&stConnecting != 0 {
		d.syscalls++
		soerr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && soerr != 0 {
			err = unix.Errno(soerr)
		}
		if err != nil {
			l.connected(c, os.NewSyscallError("connect", err))
			return
		}
		d.syscalls++
		if err := d.p.Delete(c.fd); err != nil {
			l.connected(c, err)
			return
		}
		l.connected(c, nil)
		return
	}
	read, write := readiness(events, c.state)
	if read {
		d.read(c)
	}
	if write && c.state&stClosed == 0 {
		d.writeOut(c)
	}
}

// readiness turns a connection's epoll events into what to do: read when
// it is readable, hung up or in error and reading is not over or paused;
// write when it is writable, and also (as Go's netpoll does) on a hang-up
// or an error while it waits to write, so that the write reports the
// error instead of the queue waiting for a writability that never comes.
func readiness(events uint32, st connState) (read, write bool) {
	read = events&(poller.In|poller.RDHup|poller.Hup|poller.Err) != 0 && st&(stEOF|stRecvEOF|stPaused) == 0
	write = events&poller.Out != 0 || events&(poller.Hup|poller.Err) != 0 && st&stPollOut != 0
	return read, write
}

func (d *epollDriver) read(c *Conn) {
	d.syscalls++
	r, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(c.fd), uintptr(unsafe.Pointer(unsafe.SliceData(d.buf))), uintptr(len(d.buf)))
	switch {
	case errno == unix.EAGAIN:
	case errno != 0:
		d.l.fail(c, "read", errnoErr("read", errno))
	case r == 0:
		c.state |= stRecvEOF
		d.l.eof(c)
		if c.state&stClosed == 0 {
			d.update(c) // stop polling for input
		}
	default:
		d.l.received(c, d.buf[:r])
	}
}

func (d *epollDriver) acceptAll() {
	l := d.l
	for range 64 {
		if d.lnfd < 0 || d.held {
			return
		}
		if !l.canAccept() {
			l.capReached()
			return
		}
		d.syscalls++
		fd, _, errno := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(d.lnfd), 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
		if errno == unix.EAGAIN {
			return
		}
		if errno != 0 {
			// Per-connection errors are skipped. Out of descriptors or
			// memory with a connection waiting pauses accepting for a
			// back-off (connections wait in the kernel's backlog); with
			// none waiting, the listener's next readiness says when to
			// try again.
			if l.acceptFailed(errnoErr("accept", errno), d.lnfd) == acceptSkip {
				continue
			}
			return
		}
		l.accepted(int(fd))
	}
}

// submit has nothing to do: the epoll loop writes as handlers write.
func (d *epollDriver) submit() {}

// discardBuffers has nothing to give back: the epoll loop reads into one
// buffer.
func (d *epollDriver) discardBuffers() bool { return true }

func (d *epollDriver) idle() bool { return true }

func (d *epollDriver) wake() {
	if err := d.p.Wake(); err != nil && !errors.Is(err, unix.EBADF) {
		d.l.log.Error("percore: wake loop", "loop", d.l.id, "err", err)
	}
}

func (d *epollDriver) enters() uint64 { return d.syscalls }

func (d *epollDriver) close() error { return d.p.Close() }
