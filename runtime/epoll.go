//go:build linux

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
// readable connection per turn into the loop's single read buffer, a
// connection's first write of a turn made at once when nothing is queued,
// and its later writes of the turn gathered into one write at the end of
// the turn (what the socket does not take waits for writability). The socket calls are poller's raw
// system calls on non-blocking descriptors: the kernel never blocks them.
type epollDriver struct {
	l   *Loop
	p   *poller.Poller
	buf []byte
	iov []unix.Iovec
	// lns are the stream listeners, by their index in Loop.lns (fd -1
	// where that index is not a stream listener, or after stopListening).
	lns   []epollListener
	calls uint64
	// batch lists the connections whose writes wait for the end of the
	// turn (writes after the first of a turn: a pipelined client's
	// replies go out in one write, not one each).
	batch []*Conn
	pk    epollPackets // the datagram sockets (epoll_packet.go)
}

// epollListener is one stream listener of the epoll driver.
type epollListener struct {
	fd         int
	registered bool // in the epoll set
}

// epollConn is the epoll driver's own state of a connection.
type epollConn struct {
	pollOut  bool   // registered for writability: bytes are queued
	unpolled bool   // out of the epoll set: nothing to wait for
	batched  bool   // on the driver's end-of-turn list
	wrote    uint64 // the turn of its last write straight to the socket
}

func newEpollDriver(l *Loop, cfg Config) (*epollDriver, error) {
	if poller.WakeData != epollWakeTag {
		panic("percore: poller.WakeData moved: see the event tags in driver.go")
	}
	p, err := poller.Open(512)
	if err != nil {
		return nil, err
	}
	return &epollDriver{l: l, p: p, buf: make([]byte, cfg.BufferSize), iov: make([]unix.Iovec, 0, 64)}, nil
}

func connTag(c *Conn) uint64 { return uint64(c.gen)<<32 | uint64(c.slot) }

func (d *epollDriver) listen(i int, fd int) error {
	for len(d.lns) <= i {
		d.lns = append(d.lns, epollListener{fd: -1})
	}
	d.calls++
	if err := d.p.Add(fd, poller.In, epollListenerTag|uint64(i)); err != nil {
		return err
	}
	d.lns[i] = epollListener{fd: fd, registered: true}
	return nil
}

// register puts the listeners in the epoll set.
func (d *epollDriver) register() {
	for i := range d.lns {
		ln := &d.lns[i]
		if ln.fd < 0 || ln.registered {
			continue
		}
		d.calls++
		if err := d.p.Add(ln.fd, poller.In, epollListenerTag|uint64(i)); err != nil {
			d.l.log.Error("percore: resume accepting", "loop", d.l.id, "err", err)
			continue
		}
		ln.registered = true
	}
}

// unregister takes the listeners out of the epoll set.
func (d *epollDriver) unregister() {
	for i := range d.lns {
		ln := &d.lns[i]
		if ln.fd >= 0 && ln.registered {
			d.calls++
			_ = d.p.Delete(ln.fd)
			ln.registered = false
		}
	}
}

func (d *epollDriver) stopListening() {
	d.unregister()
	for i := range d.lns {
		d.lns[i].fd = -1
	}
	d.stopPackets()
}

func (d *epollDriver) pauseAccept()  { d.unregister() }
func (d *epollDriver) resumeAccept() { d.register() }

func (d *epollDriver) pauseRead(c *Conn)  { d.update(c) }
func (d *epollDriver) resumeRead(c *Conn) { d.update(c) }

func (d *epollDriver) start(c *Conn) error {
	d.calls++
	return d.p.Add(c.fd, poller.In|poller.RDHup, connTag(c))
}

func (d *epollDriver) events(c *Conn) uint32 {
	var ev uint32
	if c.wantsInput() {
		ev |= poller.In | poller.RDHup
	}
	if c.ep.pollOut {
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
	case ev == 0 && c.ep.unpolled:
		return
	case ev == 0:
		c.ep.unpolled = true
		err = d.p.Delete(c.fd)
	case c.ep.unpolled:
		c.ep.unpolled = false
		err = d.p.Add(c.fd, ev, connTag(c))
	default:
		err = d.p.Modify(c.fd, ev, connTag(c))
	}
	d.calls++
	if err != nil {
		d.l.fail(c, "write", err)
	}
}

// writeLater reports whether c's next write waits in its queue: bytes are
// queued before it, or c has written straight to the socket this turn
// already (the rest of the turn's writes then go out together, at its end).
func (d *epollDriver) writeLater(c *Conn) bool {
	return c.out.buffered() > 0 || c.ep.pollOut || c.ep.wrote == d.l.cnt[sTurns]
}

// later queues p for the end of the turn (or for writability).
func (d *epollDriver) later(c *Conn, p []byte) {
	c.out.add(d.l, p)
	d.list(c)
}

// list puts c on the end-of-turn list, unless it waits for writability.
func (d *epollDriver) list(c *Conn) {
	if !c.ep.pollOut && !c.ep.batched {
		c.ep.batched = true
		d.batch = append(d.batch, c)
	}
}

// flushBatch writes the queues of the connections that wrote more than
// once this turn; the loop's turn ends here (poll, submit).
func (d *epollDriver) flushBatch() {
	// By index: a write that completes a file send (sendResult) can list
	// the connection again while the list is flushed.
	for i := 0; i < len(d.batch); i++ {
		c := d.batch[i]
		d.batch[i] = nil
		c.ep.batched = false
		if !c.closed() && !c.ep.pollOut {
			d.writeOut(c)
		}
	}
	d.batch = d.batch[:0]
}

func (d *epollDriver) write(c *Conn, p []byte) {
	if d.writeLater(c) {
		d.later(c, p)
		return
	}
	c.ep.wrote = d.l.cnt[sTurns]
	d.calls++
	n, errno := poller.Write(c.fd, p)
	if errno != 0 && errno != unix.EAGAIN {
		d.l.fail(c, "write", errnoErr("write", errno))
		return
	}
	d.l.wroteDirect(n)
	if n < len(p) {
		c.out.add(d.l, p[n:])
		d.waitWritable(c)
	}
}

func (d *epollDriver) writev(c *Conn, bufs [][]byte) {
	if d.writeLater(c) || len(bufs) > cap(d.iov) {
		for _, b := range bufs {
			c.out.add(d.l, b)
		}
		d.list(c)
		return
	}
	c.ep.wrote = d.l.cnt[sTurns]
	iov := d.iov[:0]
	for _, b := range bufs {
		if len(b) > 0 {
			var v unix.Iovec
			poller.SetIovec(&v, b)
			iov = append(iov, v)
		}
	}
	d.calls++
	n, errno := poller.Writev(c.fd, iov)
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
		c.out.add(d.l, b[n:])
		n = 0
	}
	if c.out.buffered() > 0 {
		d.waitWritable(c)
	}
}

// committed sends bytes built in place: with the turn's other writes.
func (d *epollDriver) committed(c *Conn) { d.list(c) }

// waitWritable registers c for writability: bytes are queued.
func (d *epollDriver) waitWritable(c *Conn) {
	if !c.ep.pollOut {
		c.ep.pollOut = true
		d.update(c)
	}
}

// writeOut sends queued bytes while the socket takes them; called when it
// is writable.
func (d *epollDriver) writeOut(c *Conn) {
	if c.sf != nil && d.fileWritable(c) {
		return
	}
	for {
		p := c.out.pending()
		if len(p) == 0 {
			break
		}
		d.calls++
		n, errno := poller.Write(c.fd, p)
		if errno == unix.EAGAIN {
			d.waitWritable(c)
			return
		}
		var err error
		if errno != 0 {
			err, n = errnoErr("write", errno), 0
		}
		if !d.l.sendResult(c, n, err) {
			break
		}
	}
	if c.ep.pollOut && !c.closed() {
		c.ep.pollOut = false
		d.update(c)
	}
}

func (d *epollDriver) shutdownWrite(c *Conn) {
	d.calls++
	if err := unix.Shutdown(c.fd, unix.SHUT_WR); err != nil {
		d.l.fail(c, "shutdown", os.NewSyscallError("shutdown", err))
	}
}

func (d *epollDriver) release(c *Conn) {
	if c.fd >= 0 {
		d.calls++
		unix.Close(c.fd) // also leaves the epoll set: nothing else holds the file
		c.fd = -1
	}
	d.l.freeSlot(c)
}

func (d *epollDriver) connect(c *Conn, ds *dialState) error {
	d.calls++
	if errno := poller.Connect(c.fd, unsafe.Pointer(&ds.sa), ds.salen); errno != 0 && errno != unix.EINPROGRESS {
		return errnoErr("connect", errno)
	}
	d.calls++
	return d.p.Add(c.fd, poller.Out, connTag(c))
}

func (d *epollDriver) poll(timeout time.Duration) error {
	if len(d.batch) > 0 {
		d.flushBatch()
	}
	if len(d.pk.dirty) > 0 {
		d.flushPackets()
	}
	d.calls++
	evs, err := d.p.Wait(timeout)
	if err != nil {
		return err
	}
	l := d.l
	l.awoke()
	l.cnt[sCompletions] += uint64(len(evs))
	for i := range evs {
		ev := &evs[i]
		switch data := ev.Data(); {
		case data == epollWakeTag:
			d.calls++
			d.p.Drain()
			l.runPosted()
		case data&epollTagKind == epollListenerTag:
			d.acceptAll(int(uint32(data)))
		case data&epollTagKind == epollPacketTag:
			d.packetReady(int(uint32(data)), ev.Events())
		default:
			c := l.conn(uint32(data), uint32(data>>32))
			if c == nil || c.closed() {
				continue
			}
			d.ready(c, ev.Events())
		}
	}
	if len(l.pk.gso) > 0 {
		l.flushBatches() // this turn's GSO batches join the queues
	}
	if len(d.pk.dirty) > 0 {
		d.flushPackets() // the replies to this turn's datagrams, in batches
	}
	return nil
}

func (d *epollDriver) ready(c *Conn, events uint32) {
	l := d.l
	if c.state&stConnecting != 0 {
		d.calls++
		soerr, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err == nil && soerr != 0 {
			err = unix.Errno(soerr)
		}
		if err != nil {
			l.connected(c, os.NewSyscallError("connect", err))
			return
		}
		d.calls++
		if err := d.p.Delete(c.fd); err != nil {
			l.connected(c, err)
			return
		}
		l.connected(c, nil)
		return
	}
	read, write := readiness(events, c)
	if read {
		d.read(c)
	}
	if write && !c.closed() {
		d.writeOut(c)
	}
}

// readiness turns a connection's epoll events into what to do: read when
// it is readable, hung up or in error and the loop takes its input; write
// when it is writable, and also (as Go's netpoll does) on a hang-up or an
// error while it waits to write, so that the write reports the error
// instead of the queue waiting for a writability that never comes.
func readiness(events uint32, c *Conn) (read, write bool) {
	read = events&(poller.In|poller.RDHup|poller.Hup|poller.Err) != 0 && c.wantsInput()
	write = events&poller.Out != 0 || events&(poller.Hup|poller.Err) != 0 && c.ep.pollOut
	return read, write
}

func (d *epollDriver) read(c *Conn) {
	d.calls++
	n, errno := poller.Read(c.fd, d.buf)
	switch {
	case errno == unix.EAGAIN:
		return
	case errno != 0:
		n = -int(errno)
	}
	d.l.readResult(c, d.buf, n, "read")
	if n == 0 && !c.closed() {
		d.update(c) // the stream ended: stop polling for input
	}
}

func (d *epollDriver) acceptAll(i int) {
	l := d.l
	if i >= len(d.lns) {
		return
	}
	for range 64 {
		lnfd := d.lns[i].fd
		if lnfd < 0 || !l.accepting() {
			return
		}
		d.calls++
		fd, errno := poller.Accept(lnfd)
		if errno == unix.EAGAIN {
			return
		}
		// Out of descriptors or memory with a connection waiting holds
		// accepting for a back-off (connections wait in the kernel's
		// backlog); with none waiting, the listener's next readiness
		// says when to try again.
		if l.acceptResult(fd, errno, i) != acceptNext {
			return
		}
	}
}

// submit writes what waits for the end of the turn.
func (d *epollDriver) submit() {
	if len(d.batch) > 0 {
		d.flushBatch()
	}
	if len(d.pk.dirty) > 0 {
		d.flushPackets()
	}
}

// discardBuffers has nothing to give back: the epoll loop reads into one
// buffer.
func (d *epollDriver) discardBuffers() bool { return true }

func (d *epollDriver) idle() bool { return true }

func (d *epollDriver) wake() {
	if err := d.p.Wake(); err != nil && !errors.Is(err, unix.EBADF) {
		d.l.log.Error("percore: wake loop", "loop", d.l.id, "err", err)
	}
}

// wakeFrom leaves waking this loop to the eventfd (Loop.wakeIfOpen).
func (d *epollDriver) wakeFrom(driver) bool { return false }

func (d *epollDriver) syscalls() uint64 { return d.calls }

func (d *epollDriver) waits() uint64 { return d.p.Waits() }

func (d *epollDriver) close() error {
	d.pk.release()
	return d.p.Close()
}
