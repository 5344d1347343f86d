//go:build linux

package runtime

import (
	"errors"
	"net"
	"os"
	"time"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/poller"
	"golang.org/x/sys/unix"
)

// epollDriver runs a loop on epoll: level-triggered readiness, one read per
// readable connection per turn into the loop's single read buffer, a
// connection's first write of a turn made at once when nothing is queued,
// and its later writes of the turn gathered into one write at the end of
// the turn (what the socket does not take waits for writability). The
// socket calls are poller's raw system calls on non-blocking descriptors:
// the kernel never blocks them.
//
// The write path. Bytes leave a connection in the order they were
// written, through two doors only: write and writev send a turn's first
// write straight from the handler's buffer when nothing is queued; flush
// sends everything else (the queue, the file send that waits behind it,
// the writes made during the file, in that order) and is the one place
// that decides, when it ends, whether the connection waits for
// writability. The state is three facts (epollConn): whether the socket
// said it is full (full), whether the connection is on the end-of-turn
// list (gathered), and what is registered in the epoll set (events); the
// interest registered is always computed from the connection's state
// (interest), never set by hand, so that a pass that changes the state
// cannot leave a registration behind it. A connection with bytes to send
// is, between turns, either full and registered for writability, or on the
// end-of-turn list (the model test checks it: epoll_model_test.go).
type epollDriver struct {
	l loopSide
	driverEnv
	p   epollPoller
	sys epollSys
	buf []byte
	iov []unix.Iovec
	// lns are the stream listeners, by their index in Loop.lns (fd -1
	// where that index is not a stream listener, or after stopListening).
	lns   []epollListener
	calls uint64
	// gathered lists the connections whose writes wait for the end of the
	// turn (writes after the first of a turn: a pipelined client's
	// replies go out in one write, not one each).
	gathered []*Conn
	evs      []poller.Event // what the turn's wait reported, for its dispatch
	discard  []byte         // what release reads a closed socket's input into (discardInput)
	pk       epollPackets   // the datagram sockets (epoll_packet.go)
}

// epollListener is one stream listener of the epoll driver.
type epollListener struct {
	fd         int
	registered bool // in the epoll set
}

// epollConn is the epoll driver's own state of a connection: 8 bytes, so
// that Conn, which carries it on either backend, stays in its size class
// (decision 0075).
type epollConn struct {
	// wrote is the turn of its last write straight to the socket, the low
	// 32 bits of the loop's turn count. A stamp that wraps round to the
	// current turn (a connection that wrote nothing straight for 2^32
	// turns) queues its first write of that turn for the turn's end: a
	// write sent a little later in the turn, never one out of order.
	wrote  uint32
	events uint16 // the interest registered in the epoll set (poller.In, RDHup, Out); 0: out of it
	flags  epollFlags
}

// epollFlags are the epoll driver's flags of a connection.
type epollFlags uint8

const (
	efFull     epollFlags = 1 << iota // the socket took less than it was given: wait for writability
	efGathered                        // on the driver's end-of-turn list
	efFlushing                        // flush is running: it sets the interest when it ends
	efUnread                          // the last read filled the buffer: input may wait in the socket
)

// The interest a connection registers fits epollConn.events (a constant
// that did not would not compile here).
const _ = uint16(poller.In | poller.RDHup | poller.Out)

func newEpollDriver(l *Loop, cfg Config) (*epollDriver, error) {
	if poller.WakeData != epollWakeTag {
		panic("percore: poller.WakeData moved: see the event tags in driver.go")
	}
	p, err := poller.Open(512)
	if err != nil {
		return nil, err
	}
	return newEpollDriverOn(l, l.env(), p, kernelSys{}), nil
}

// newEpollDriverOn returns an epoll driver for the loop side l over its
// seams: the epoll set p and the system calls s. newEpollDriver gives it
// the kernel's; the tests give it stand-ins (driver_test.go, the model
// test), so that every driver is built the same way.
func newEpollDriverOn(l loopSide, env driverEnv, p epollPoller, s epollSys) *epollDriver {
	return &epollDriver{l: l, driverEnv: env, p: p, sys: s, buf: make([]byte, env.cfg.BufferSize), iov: make([]unix.Iovec, 0, 64)}
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
			d.log.Error("percore: resume accepting", "loop", d.id, "err", err)
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

func (d *epollDriver) pauseRead(c *Conn) {
	c.ep.flags &^= efUnread // a paused connection's input stays in the kernel, as on io_uring
	d.update(c)
}

func (d *epollDriver) resumeRead(c *Conn) {
	c.ep.flags |= efUnread // what arrived meanwhile
	d.update(c)
}

func (d *epollDriver) start(c *Conn) error {
	d.calls++
	ev := uint16(poller.In | poller.RDHup)
	if err := d.p.Add(int(c.fd), uint32(ev), connTag(c)); err != nil {
		return err
	}
	c.ep.events = ev
	return nil
}

// interest is the epoll interest c's state asks for: input while the loop
// takes it, writability while the socket is full.
func (d *epollDriver) interest(c *Conn) uint16 {
	var ev uint16
	if c.wantsInput() {
		ev |= poller.In | poller.RDHup
	}
	if c.ep.flags&efFull != 0 {
		ev |= poller.Out
	}
	return ev
}

// update registers the interest c's state asks for, if it is not what is
// registered already (while flush runs, flush does it when it ends). A
// connection with nothing to wait for (not reading, nothing queued) leaves
// the epoll set: epoll reports hang-ups and errors whatever the interest,
// so a connection kept in the set after its peer is gone would wake the
// loop on every wait. Like the io_uring loop, it then hears of the peer
// at its next write.
func (d *epollDriver) update(c *Conn) {
	if c.ep.flags&efFlushing != 0 || c.state&(stClosed|stConnecting) != 0 {
		return
	}
	ev := d.interest(c)
	if ev == c.ep.events {
		return
	}
	var err error
	switch {
	case ev == 0:
		err = d.p.Delete(int(c.fd))
	case c.ep.events == 0:
		err = d.p.Add(int(c.fd), uint32(ev), connTag(c))
	default:
		err = d.p.Modify(int(c.fd), uint32(ev), connTag(c))
	}
	d.calls++
	if err != nil {
		d.l.fail(c, "write", err)
		return
	}
	c.ep.events = ev
}

// closeDiscardMax bounds what release reads and discards of input that
// waits in a closed connection's socket, discardSize bytes at a time (in
// a buffer of its own: a handler that closes its connection in OnData
// still holds the loop's read buffer).
const (
	closeDiscardMax = 256 << 10
	discardSize     = 16 << 10
)

func (d *epollDriver) release(c *Conn) {
	if c.fd >= 0 {
		if c.ep.flags&efUnread != 0 {
			d.discardInput(c)
		}
		d.calls++
		d.sys.close(int(c.fd)) // also leaves the epoll set: nothing else holds the file
		c.fd = -1
	}
	d.l.freeSlot(c)
}

// discardInput reads and drops what waits in c's socket (up to
// closeDiscardMax), before release closes it: a socket closed with unread
// input resets the connection, and its peer may then lose the answer it
// was sent. The io_uring loop's multishot receive has taken what arrived
// by then, so both backends close the same way; input that arrives after
// the close resets on both (Conn.CloseLinger waits for it).
func (d *epollDriver) discardInput(c *Conn) {
	if d.discard == nil {
		d.discard = make([]byte, discardSize)
	}
	for read := 0; read < closeDiscardMax; {
		d.calls++
		n, errno := d.sys.read(int(c.fd), d.discard)
		if errno != 0 || n <= 0 {
			return
		}
		read += n
		if n < len(d.discard) {
			return
		}
	}
}

func (d *epollDriver) descriptor(c *Conn) (int, error) {
	if c.fd < 0 {
		return -1, net.ErrClosed
	}
	return int(c.fd), nil
}

func (d *epollDriver) connect(c *Conn, ds *dialState) error {
	d.calls++
	if errno := poller.Connect(int(c.fd), unsafe.Pointer(&ds.sa), ds.salen); errno != 0 && errno != unix.EINPROGRESS {
		return errnoErr("connect", errno)
	}
	d.calls++
	if err := d.p.Add(int(c.fd), poller.Out, connTag(c)); err != nil {
		return err
	}
	c.ep.events = poller.Out
	return nil
}

// prepare sends what waits for the end of the turn: the connections'
// gathered writes and the datagrams queued.
func (d *epollDriver) prepare() {
	if len(d.gathered) > 0 {
		d.flushGathered()
	}
	if len(d.pk.dirty) > 0 {
		d.flushPackets()
	}
}

// enter waits for readiness. It runs nothing of the handlers' before the
// wait: what a callback in the turn's prepare phase wrote or queued is
// still listed, so it only looks (timeout 0), and the next turn's prepare
// sends it.
func (d *epollDriver) enter(timeout time.Duration) error {
	if len(d.gathered) > 0 || len(d.pk.dirty) > 0 {
		timeout = 0
	}
	d.calls++
	evs, err := d.p.Wait(timeout)
	if err != nil {
		return err
	}
	d.evs = evs
	return nil
}

// dispatch hands the loop the events the wait reported.
func (d *epollDriver) dispatch() {
	evs := d.evs
	d.evs = nil
	l := d.l
	d.cnt[sCompletions] += uint64(len(evs))
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
	// This turn's GSO batches join the queues in the next turn's prepare
	// (Loop.prepare), on both backends; what the dispatch queued without
	// GSO goes out now.
	if len(d.pk.dirty) > 0 {
		d.flushPackets() // the replies to this turn's datagrams, in batches
	}
}

func (d *epollDriver) ready(c *Conn, events uint32) {
	l := d.l
	if c.state&stConnecting != 0 {
		d.calls++
		if err := sys.ConnectError(int(c.fd)); err != nil {
			l.connected(c, os.NewSyscallError("connect", err))
			return
		}
		d.calls++
		if err := d.p.Delete(int(c.fd)); err != nil {
			l.connected(c, err)
			return
		}
		c.ep.events = 0
		l.connected(c, nil)
		return
	}
	read, write := readiness(events, c)
	if read {
		d.read(c)
	}
	if write && !c.closed() {
		d.flush(c)
	}
}

// readiness turns a connection's epoll events into what to do: read when
// it is readable, hung up or in error and the loop takes its input; write
// when it is writable, and also (as Go's netpoll does) on a hang-up or an
// error while it waits to write, so that the write reports the error
// instead of the queue waiting for a writability that never comes.
func readiness(events uint32, c *Conn) (read, write bool) {
	read = events&(poller.In|poller.RDHup|poller.Hup|poller.Err) != 0 && c.wantsInput()
	write = events&poller.Out != 0 || events&(poller.Hup|poller.Err) != 0 && c.ep.flags&efFull != 0
	return read, write
}

func (d *epollDriver) read(c *Conn) {
	d.calls++
	n, errno := d.sys.read(int(c.fd), d.buf)
	switch {
	case errno == unix.EAGAIN:
		c.ep.flags &^= efUnread
		return
	case errno != 0:
		n = -int(errno)
	}
	if n == len(d.buf) {
		c.ep.flags |= efUnread
	} else {
		c.ep.flags &^= efUnread
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

// submit writes what waits for the end of the turn: epoll has nothing to
// hand over but that.
func (d *epollDriver) submit() { d.prepare() }

// discardBuffers has nothing to give back: the epoll loop reads into one
// buffer.
func (d *epollDriver) discardBuffers() bool { return true }

func (d *epollDriver) idle() bool { return true }

func (d *epollDriver) wake() {
	if err := d.p.Wake(); err != nil && !errors.Is(err, unix.EBADF) {
		d.log.Error("percore: wake loop", "loop", d.id, "err", err)
	}
}

// wakeAnyway is wake: the epoll loop's flag is set only by the eventfd
// write it stands for.
func (d *epollDriver) wakeAnyway() { d.wake() }

// wakeFrom leaves waking this loop to the eventfd (Loop.wakeIfOpen).
func (d *epollDriver) wakeFrom(driver) bool { return false }

func (d *epollDriver) syscalls() uint64 { return d.calls }

func (d *epollDriver) waits() uint64 { return d.p.Waits() }

func (d *epollDriver) close() error {
	d.pk.release()
	return d.p.Close()
}
