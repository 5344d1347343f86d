//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// Sending a file on a connection. Conn.SendFile moves a range of a File
// to the socket without copying it through Go memory where the kernel
// allows: on io_uring, a splice of the file's pages into a pipe of the
// loop's (pipePool), a ring operation, and then a splice from the pipe
// into the socket that the loop runs itself, non-blocking, on its own
// thread (uringDriver.spliceOut: the ring would run it in an async
// worker, two context switches per chunk), with a ring poll for
// writability when the socket is full; on epoll, sendfile(2) on the
// non-blocking socket. One mapping of a move's errors serves both
// (fileSend.moveError). Where the
// kernel refuses (a file system without splice, a kernel without the
// SPLICE opcode) it falls back to reading the file into the loop's
// buffers (File.ReadAt) and sending them as Write does. The choice is
// recorded in docs/decisions/0023-sending-files.md.
//
// Ordering. Bytes written before SendFile go first: the transfer starts
// once the connection's queue is empty. Bytes written (Write, Writev,
// Reserve and Commit) while it runs wait in a queue of their own and
// follow the file. Backpressure is the socket's: the transfer moves only
// what the socket takes, waits for writability when it is full, and
// holds at most one pipe (or one read buffer) per connection; the write
// timeout covers it as it covers queued bytes.

// fileSend is a connection's file transfer in progress.
type fileSend struct {
	f     *File
	off   int64 // next offset in the file
	left  int64 // bytes still to send
	sent  int64
	done  func(sent int64, err error)
	after outQueue // writes made meanwhile, sent after the file

	running  bool // started: the connection's queue was empty
	fallback bool // reading and sending instead of splice or sendfile
	reading  bool // the fallback's read is in flight
	dead     bool // the connection closed; waiting for the kernel

	// io_uring: the pipe it holds while the pipe holds bytes, how many,
	// and its ring operations in flight (a fill, or a poll).
	pipe   *pipePair
	inPipe int
	ops    int
}

// errSendUnsupported is a driver's report that the kernel cannot splice or
// sendfile from this file: the transfer falls back to read and send, if
// it has sent nothing yet.
var errSendUnsupported = errors.New("zero-copy file send unsupported")

// fileSendChunk bounds one sendfile or one fallback read.
const fileSendChunk = 256 << 10

// SendFile sends n bytes of f from offset off on c, after what is queued,
// and calls done with the bytes sent once all of them are (err nil) or the
// transfer stopped. f must belong to c's loop; a File.Close made while the
// transfer runs (also from done) closes f once the kernel holds nothing
// of the transfer any more. One file at a time per connection: a second SendFile before done
// returns an error. A transfer that fails (the file is shorter than off+n,
// a read error, the peer gone) closes c after done runs, since its peer
// has a partial message; done then runs with the error, and OnClose after
// it. done runs after the callback that called SendFile returns, never
// inside it. On a TLS connection it returns an error that matches
// errors.ErrUnsupported (the bytes would have to be encrypted on the
// loop; docs/decisions/0048-kernel-tls.md).
func (c *Conn) SendFile(f *File, off, n int64, done func(sent int64, err error)) error {
	switch {
	case !c.writable():
		return c.opError("sendfile", net.ErrClosed)
	case c.tlsState() != nil:
		return c.opError("sendfile", errTLSSendFile)
	case c.fileSend() != nil:
		return c.opError("sendfile", errors.New("a file send is already in progress"))
	case f == nil || f.l != c.loop:
		return c.opError("sendfile", errors.New("the file belongs to another loop"))
	case f.fd < 0 || f.closing:
		return c.opError("sendfile", f.closedErr("sendfile"))
	case off < 0 || n < 0:
		return c.opError("sendfile", fmt.Errorf("invalid range: offset %d, length %d", off, n))
	}
	if _, err := c.loop.d.descriptor(c); err != nil {
		return c.opError("sendfile", err) // splice takes descriptors: made once for a direct one
	}
	sf := &fileSend{f: f, off: off, left: n, done: done}
	c.more().sf = sf
	f.inflight++ // until fileSendGone
	if c.loop.sendFallback {
		sf.fallback = true // set by tests (export_test.go)
	}
	if c.out.buffered() == 0 {
		c.progress = c.loop.stamp()
	}
	c.watchWrite()
	if c.out.buffered() == 0 {
		c.loop.runFileSend(c)
	}
	return nil
}

// runFileSend starts c's transfer: its queue is empty.
func (l *Loop) runFileSend(c *Conn) {
	sf := c.fileSend()
	sf.running = true
	switch {
	case sf.left == 0:
		l.endFileSend(c, nil)
	case sf.fallback:
		l.cnt[sFileSendFallbacks]++
		l.fallbackRead(c)
	default:
		l.d.sendFile(c)
	}
}

// fileSent is the driver's report that the kernel took n bytes of c's
// file, or that the transfer failed with err. It reports whether the
// driver should move more.
func (l *Loop) fileSent(c *Conn, n int, err error) (more bool) {
	sf := c.fileSend()
	if sf == nil || sf.dead || c.closed() {
		return false
	}
	if n > 0 {
		sf.off += int64(n)
		sf.left -= int64(n)
		sf.sent += int64(n)
		l.cnt[sFileSendBytes] += uint64(n)
		c.progress = l.stamp()
	}
	switch {
	case errors.Is(err, errSendUnsupported) && sf.sent == 0:
		sf.fallback = true
		l.cnt[sFileSendFallbacks]++
		l.fallbackRead(c)
		return false
	case err != nil:
		l.endFileSend(c, err)
		return false
	case sf.left == 0:
		l.endFileSend(c, nil)
		return false
	}
	return true
}

// fileShort is the error of a file that ended before the range did.
func (sf *fileSend) fileShort() error {
	return &fs.PathError{Op: "sendfile", Path: sf.f.name, Err: io.ErrUnexpectedEOF}
}

// moveError is the error of a move of the file that took nothing: errno 0
// is a file shorter than the send; EINVAL or ENOSYS before any byte went
// is a file or socket the kernel cannot send from or to without a copy
// (errSendUnsupported: the loop reads and sends instead); EPIPE and
// ECONNRESET are the socket's; the rest the file's. One mapping for both
// backends: epoll's sendfile(2) and io_uring's splice of the file into
// the pipe.
func (sf *fileSend) moveError(call string, err error) error {
	errno, _ := err.(unix.Errno)
	switch {
	case err == nil:
		return sf.fileShort()
	case (errno == unix.EINVAL || errno == unix.ENOSYS) && sf.sent == 0:
		return errSendUnsupported
	case errno == unix.EPIPE || errno == unix.ECONNRESET:
		return errnoErr(call, errno)
	}
	return &fs.PathError{Op: "sendfile", Path: sf.f.name, Err: err}
}

// endFileSend ends c's transfer: the writes made meanwhile join the queue,
// done runs once the current callback returns (its own writes follow
// those), and an error closes c after done.
func (l *Loop) endFileSend(c *Conn, err error) {
	sf := c.fileSend()
	c.side.sf = nil
	c.trimSide()
	l.fileSendGone(sf)
	if err != nil {
		l.putBuf(sf.after.next)
		sf.after.next = nil
		l.notify(note{kind: noteFileSent, c: c, err: err, sf: sf})
		l.fail(c, "sendfile", err)
		return
	}
	moved := false
	if !c.closed() && sf.after.buffered() > 0 {
		// Before done runs: what done writes goes behind these.
		if q := c.outw(); len(q.next) == 0 {
			l.putBuf(q.next)
			q.next, q.reserved = sf.after.next, sf.after.reserved
		} else {
			q.add(l, sf.after.next)
			l.putBuf(sf.after.next)
		}
		moved = true
	} else {
		l.putBuf(sf.after.next)
	}
	sf.after.next = nil
	l.notify(note{kind: noteFileSent, c: c, err: nil, sf: sf})
	switch {
	case c.closed():
	case moved:
		l.d.committed(c)
	case c.idleOut():
		l.drained(c)
	}
}

// abortFileSend ends the transfer of a connection being closed: done runs
// with err; what the kernel still holds (a splice in flight, a fallback
// read) is the driver's to finish, and the file stays open until it has
// (fileSendGone).
func (l *Loop) abortFileSend(c *Conn, err error) {
	sf := c.fileSend()
	if err == nil {
		err = c.opError("sendfile", net.ErrClosed)
	}
	l.putBuf(sf.after.next)
	sf.after.next = nil
	sf.dead = true
	l.notify(note{kind: noteFileSent, c: c, err: err, sf: sf})
	if sf.ops == 0 && !sf.reading {
		l.deadFileSendDone(c)
	}
}

// deadFileSendDone is called once nothing of an aborted file send is in
// flight any more: its pipe goes back and its file is let go.
func (l *Loop) deadFileSendDone(c *Conn) {
	sf := c.fileSend()
	c.side.sf = nil
	c.trimSide()
	l.fileSendGone(sf)
}

// fileSendGone lets go of a transfer's pipe and of its file. A file send
// counts as an operation in flight on its file from SendFile until the
// kernel holds nothing of it, so that a File.Close made meanwhile (by
// done, say) waits for a splice still reading it instead of closing a
// descriptor the splice would then resolve, or find reused.
func (l *Loop) fileSendGone(sf *fileSend) {
	l.files.pipes.release(sf)
	f := sf.f
	f.inflight--
	if f.closing && f.inflight == 0 && f.fd >= 0 {
		l.closeFile(f)
	}
}

// fallbackRead reads the next part of c's file; the bytes go out as a
// write, and the next read starts once the socket has taken them
// (sendResult calls fallbackSent).
func (l *Loop) fallbackRead(c *Conn) {
	sf := c.fileSend()
	sf.reading = true
	sf.f.ReadAt(sf.off, int(min(sf.left, fileSendChunk)), func(data []byte, err error) {
		sf.reading = false
		if sf.dead {
			l.deadFileSendDone(c)
			return
		}
		if len(data) == 0 {
			if err == nil || err == io.EOF {
				err = sf.fileShort()
			}
			l.endFileSend(c, err)
			return
		}
		sf.pendingWrite(c, data)
	})
}

// pendingWrite sends a fallback chunk through the connection's own queue.
func (sf *fileSend) pendingWrite(c *Conn, data []byte) {
	l := c.loop
	l.d.write(c, data)
	if c.closed() {
		return
	}
	if c.out.buffered() == 0 {
		// Written straight to the socket (epoll): the whole chunk.
		l.fallbackSent(c, len(data))
		return
	}
	sf.inPipe = len(data) // the fallback's use: bytes of the chunk queued
}

// fallbackSent counts a fallback chunk the socket took and reads the next.
func (l *Loop) fallbackSent(c *Conn, n int) {
	c.fileSend().inPipe = 0
	if l.fileSent(c, n, nil) {
		l.fallbackRead(c)
	}
}

// fileSendHook is sendResult's part: once c's queue is empty, a transfer
// waiting for it starts, and a fallback chunk in it is done. It reports
// whether it took over.
func (l *Loop) fileSendHook(c *Conn) bool {
	sf := c.fileSend()
	if sf == nil || c.out.buffered() > 0 {
		return false
	}
	switch {
	case !sf.running:
		l.runFileSend(c)
	case sf.fallback && !sf.reading && sf.inPipe > 0:
		l.fallbackSent(c, sf.inPipe)
	}
	return true
}

// pipePair is a pipe of the loop's, for splicing a file into a socket.
type pipePair struct{ r, w int }

// pipePool is a loop's idle pipes. A transfer takes one while it moves a
// chunk and gives it back once the pipe is empty again, so a loop holds
// as many pipes as it has transfers mid-chunk, and keeps at most
// maxIdlePipes idle.
type pipePool struct {
	idle []*pipePair
	open int
}

const maxIdlePipes = 16

// pipeSize is what a pipe is asked to hold (F_SETPIPE_SZ; the kernel may
// keep its default of 64 KiB).
const pipeSize = 1 << 20

func (p *pipePool) get() (*pipePair, error) {
	if n := len(p.idle); n > 0 {
		pp := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return pp, nil
	}
	r, w, err := sys.Pipe(pipeSize)
	if err != nil {
		return nil, fmt.Errorf("pipe2: %w", err)
	}
	p.open++
	return &pipePair{r: r, w: w}, nil
}

// put gives back an empty pipe.
func (p *pipePool) put(pp *pipePair) {
	if len(p.idle) < maxIdlePipes {
		p.idle = append(p.idle, pp)
		return
	}
	p.closePipe(pp)
}

func (p *pipePool) closePipe(pp *pipePair) {
	sys.Close(pp.r)
	sys.Close(pp.w)
	p.open--
}

// release gives back the pipe of a transfer that ended: to the pool when
// it is empty, else closed (its bytes belong to nobody).
func (p *pipePool) release(sf *fileSend) {
	if sf.pipe == nil {
		return
	}
	if sf.inPipe == 0 {
		p.put(sf.pipe)
	} else {
		p.closePipe(sf.pipe)
	}
	sf.pipe, sf.inPipe = nil, 0
}

func (p *pipePool) closeAll() {
	for _, pp := range p.idle {
		p.closePipe(pp)
	}
	p.idle = nil
}

// sendingFile reports whether the kernel holds operations of c's file
// send, for the io_uring release to cancel.
func (c *Conn) sendingFile() bool {
	sf := c.fileSend()
	return sf != nil && sf.ops > 0
}
