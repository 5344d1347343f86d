//go:build linux

package runtime

import (
	"fmt"
	"net"
	"os"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// Conn is one stream connection (TCP or Unix) owned by a loop. Its methods must be called on
// that loop's thread (from a handler, a timer or a function posted to the
// loop). None of them waits for the peer. One that needs a descriptor
// (Fd, LocalAddr, RemoteAddr, SendFile) of a connection that an io_uring
// loop keeps as a direct descriptor (UringDirectDescriptors) waits, the
// first time, for the kernel to install one: a system call on the loop's
// ring that the kernel completes within it, bounded at a second. After
// Close, or once OnClose has run, writes fail with net.ErrClosed.
type Conn struct {
	loop *Loop
	h    Handler

	// value is the handler's (Value). The protocol adapter's
	// (AdapterValue) is in side: an adapter keeps one only while it holds
	// input across reads (decision 0078).
	value any

	// slot and gen name the connection in the loop's table (and in the
	// kernel's user data); fd is its descriptor, -1 once released (or
	// while an io_uring loop keeps it as a direct descriptor only). An
	// int32, as the kernel's descriptors are, so that it packs with the
	// lifecycle state (decision 0075).
	slot, gen uint32
	fd        int32

	// state is the connection's lifecycle, owned by the loop; ur and ep
	// are the drivers' own state (only the loop's driver touches its
	// own).
	state connState
	ur    uringConn
	ep    epollConn

	// out is the outbound queue, shared by the loop (which fills it) and
	// the driver (which sends from it); nil while nothing is queued
	// (conn_out.go).
	out *outQueue

	ln *Listener // the listener it was accepted from; nil for a dial

	// side holds the state few connections use, allocated on first use
	// and dropped once nothing in it is in use (conn_side.go): with the
	// addresses and the timers few connections use, a file send in
	// progress and a TLS connection's session, so that a plain
	// connection's write checks one pointer for both.
	side *connSide

	// opened is when it opened; progress is when the kernel last took
	// queued bytes, or the queue last went from empty to not; writeTimer
	// checks it (WriteTimeout). Both are the loop's stamps (conn_side.go).
	opened, progress stamp
	writeTimer       *Timer
}

// connState is a connection's lifecycle, as the loop sees it on either
// backend. What a driver needs beyond it lives in its own per-connection
// state (uringConn, epollConn).
type connState uint32

const (
	stOpen            connState = 1 << iota // OnOpen has run (or is running)
	stClosing                               // Close asked: send what is queued, then close
	stClosed                                // closed: the descriptor is released (or being released)
	stCloseWriteAsked                       // CloseWrite asked: shut the write side once the queue drains
	stWriteClosed                           // the write side is shut down
	stEOF                                   // the end of the peer's stream was handled
	stConnecting                            // a dial is in progress
	stPaused                                // reading paused for outbound backpressure
	stOverCap                               // the queue reached the cap and has not drained since
	stPauseRead                             // reading paused by the handler (PauseRead)
	stSpoke                                 // the peer has sent something (a graceful shutdown waits for a new connection's first request)
	stGraceArmed                            // a graceful shutdown's timer waits for its first request
	stLinger                                // CloseLinger asked: once the queue is sent, shut writing and discard input
	stLingering                             // the write side is shut: input is discarded until it ends (CloseLinger)
	stHandoff                               // on its way to a new process (handoff.go): reading paused, the descriptor kept until the new process has it
	stNoHandoff                             // never handed to a new process: declined (DeclineHandover, the handler) or a batch failed
	stHandoffBye                            // a hand-over gave it the protocol's goodbye (OnShutdown) instead
	stDeclineHandoff                        // DeclineHandover: user-space state (TLS) that cannot cross
)

// closed reports whether c is closed (its OnClose has run or is queued).
func (c *Conn) closed() bool { return c.state&stClosed != 0 }

// writable reports whether a handler may still write to c.
func (c *Conn) writable() bool {
	return c.state&(stClosing|stClosed|stCloseWriteAsked|stWriteClosed|stHandoff) == 0
}

// wantsInput reports whether the loop takes input from c: it is open, its
// peer's stream has not ended and reading is not paused. (A closing
// connection's input is taken and dropped, so that its peer sees a clean
// end rather than a reset.)
func (c *Conn) wantsInput() bool {
	return c.state&(stClosed|stEOF|stPaused|stPauseRead|stHandoff) == 0
}

// readPaused reports whether reading is paused, for backpressure, by the
// handler or for a hand-over to a new process.
func (c *Conn) readPaused() bool { return c.state&(stPaused|stPauseRead|stHandoff) != 0 }

// Loop returns the loop that owns c.
func (c *Conn) Loop() *Loop { return c.loop }

// Fd returns the connection's socket descriptor, for socket options. Do
// not read, write or close it. It is -1 once the connection is released.
// Like every method of Conn it must be called on c's loop, and with
// direct descriptors that matters: a connection that an io_uring loop
// keeps as a direct descriptor (UringDirectDescriptors) gets a descriptor
// made for it by the first call (and by LocalAddr, RemoteAddr and
// SendFile), through the loop's own ring, and kept until it closes; -1 if
// that fails.
func (c *Conn) Fd() int {
	fd, _ := c.loop.d.descriptor(c)
	return fd
}

// Value returns the value stored with SetValue.
func (c *Conn) Value() any { return c.value }

// SetValue stores a per-connection value for the handler. It is the
// handler's own under every adapter of runtime/frame (Split, Lines,
// LengthPrefixed, View, and the protocols built on them), which keep their
// state in AdapterValue instead.
func (c *Conn) SetValue(v any) { c.value = v }

// Closed reports whether c is closed or closing.
func (c *Conn) Closed() bool { return c.state&(stClosing|stClosed) != 0 }

// Buffered returns how many written bytes the kernel has not taken yet
// (with those waiting behind a file send, but not the file's).
func (c *Conn) Buffered() int {
	if c.tlsState() != nil {
		return c.tlsBuffered()
	}
	if sf := c.fileSend(); sf != nil {
		return c.out.buffered() + sf.after.buffered()
	}
	return c.out.buffered()
}

// idleOut reports whether nothing waits to be sent: no bytes, no file.
func (c *Conn) idleOut() bool { return c.Buffered() == 0 && c.fileSend() == nil }

// Write queues p to be sent and returns len(p). It copies p, so the caller
// may reuse it at once (also a slice of the data OnData received). When
// nothing is queued, the epoll backend sends at once; the io_uring backend
// hands the bytes to the kernel in the loop's next enter, together with
// every other submission of the turn. A write that fails closes the
// connection; its OnClose runs after the callback that wrote returns.
func (c *Conn) Write(p []byte) (int, error) {
	if c.tlsState() != nil {
		return c.tlsWrite(p)
	}
	if !c.writable() {
		return 0, c.opError("write", net.ErrClosed)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := c.dropsWrite(len(p)); err != nil {
		return 0, err
	}
	if sf := c.fileSend(); sf != nil {
		sf.after.add(c.loop, p)
		c.loop.queued(c)
		return len(p), nil
	}
	if c.out.buffered() == 0 {
		c.progress = c.loop.stamp()
	}
	c.loop.d.write(c, p)
	if c.out.buffered() > 0 {
		c.loop.queued(c)
	}
	return len(p), nil
}

// Writev queues the buffers as one gathered write and returns the number of
// bytes queued.
func (c *Conn) Writev(bufs ...[]byte) (int, error) {
	if c.tlsState() != nil {
		return c.tlsWritev(bufs)
	}
	if !c.writable() {
		return 0, c.opError("write", net.ErrClosed)
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if n == 0 {
		return 0, nil
	}
	if err := c.dropsWrite(n); err != nil {
		return 0, err
	}
	if sf := c.fileSend(); sf != nil {
		for _, b := range bufs {
			sf.after.add(c.loop, b)
		}
		c.loop.queued(c)
		return n, nil
	}
	if c.out.buffered() == 0 {
		c.progress = c.loop.stamp()
	}
	c.loop.d.writev(c, bufs)
	if c.out.buffered() > 0 {
		c.loop.queued(c)
	}
	return n, nil
}

// Close sends what is queued and then closes the connection; OnClose runs
// once the descriptor is released. It is idempotent. Input that waits
// unread then is dropped; input that arrives after the close resets the
// connection, which can cost the peer what it was sent: after an error
// answer to a peer that may still be sending, use CloseLinger.
func (c *Conn) Close() error {
	if c.state&(stClosing|stClosed) != 0 {
		return nil
	}
	if c.tlsState() != nil && c.writable() {
		c.tlsShut() // close_notify
	}
	c.state |= stClosing
	if c.idleOut() || c.state&stWriteClosed != 0 {
		c.loop.closeConn(c, nil)
		return nil
	}
	if d := c.loop.cfg.Linger; d > 0 {
		c.more().lingerTimer = c.loop.AfterFunc(d, c.lingerExpired)
	}
	return nil
}

// CloseLinger closes c the way a server closes after an error answer
// (nginx's lingering close), so that the answer arrives even while the
// peer is still sending: it sends what is queued (within Config.Linger, as
// Close), shuts the write side down, so that the peer reads the answer and
// then the end of the stream, and then reads and discards what the peer
// still sends until the peer ends its stream, Config.LingerInput has
// passed or Config.LingerInputBytes were discarded; then it closes. Close
// instead closes once the queue is sent: input that arrives after that
// resets the connection, and a reset can make the peer drop the answer it
// was sent. OnClose runs once the descriptor is released, with nil when
// the peer ended its stream or a bound was reached. Like Close, it is
// idempotent, and writes fail after it; reading paused with PauseRead
// resumes, to discard, and PauseRead does nothing after it.
func (c *Conn) CloseLinger() error {
	if c.state&(stClosing|stClosed) != 0 {
		return nil
	}
	if c.tlsState() != nil && c.writable() {
		c.tlsShut() // close_notify
	}
	c.state |= stClosing | stLinger
	if c.idleOut() || c.state&stWriteClosed != 0 {
		c.loop.lingerStart(c)
		return nil
	}
	if d := c.loop.cfg.Linger; d > 0 {
		c.more().lingerTimer = c.loop.AfterFunc(d, c.lingerExpired)
	}
	return nil
}

// lingerInputDone closes a lingering connection whose peer did not end
// its stream within Config.LingerInput.
func (c *Conn) lingerInputDone() {
	if c.state&stClosed == 0 {
		c.loop.closeConn(c, nil)
	}
}

// lingerExpired aborts a closing connection whose queue did not drain
// within Config.Linger.
func (c *Conn) lingerExpired() {
	if c.state&stClosed == 0 {
		c.loop.cnt[sLingerTimeouts]++
		c.loop.closeConn(c, c.opError("close", ErrLingerTimeout))
	}
}

// Abort closes the connection at once, discarding queued writes.
func (c *Conn) Abort() {
	if c.state&stClosed == 0 {
		c.loop.closeConn(c, nil)
	}
}

// CloseWrite shuts down the write side once the queued bytes are sent: the
// peer reads end of stream, and c still receives.
func (c *Conn) CloseWrite() error {
	if !c.writable() {
		return nil
	}
	if c.tlsState() != nil {
		c.tlsShut() // close_notify
	}
	c.state |= stCloseWriteAsked
	if c.idleOut() {
		c.loop.shutWrite(c)
	}
	return nil
}

// Listener returns the listener the connection was accepted from, or nil
// for a connection the loop dialed.
func (c *Conn) Listener() *Listener { return c.ln }

// LocalAddr returns the local address (it asks the kernel the first time).
// Once the connection is closed it returns what an earlier call found, or
// nil: call it in OnOpen to have it in OnClose.
func (c *Conn) LocalAddr() net.Addr {
	if (c.side == nil || c.side.laddr == nil) && holdsSocket(c) {
		if a, err := sys.LocalAddr(c.Fd(), false); err == nil {
			c.more().laddr = a
		}
	}
	if c.side == nil {
		return nil
	}
	return c.side.laddr
}

// RemoteAddr returns the peer's address (it asks the kernel the first
// time). Once the connection is closed it returns what an earlier call
// found, or nil: call it in OnOpen to have it in OnClose (a peer's reset
// can also make the kernel forget it sooner).
func (c *Conn) RemoteAddr() net.Addr {
	if (c.side == nil || c.side.raddr == nil) && holdsSocket(c) {
		if a, err := sys.PeerAddr(c.Fd()); err == nil {
			c.more().raddr = a
		}
	}
	if c.side == nil {
		return nil
	}
	return c.side.raddr
}

// BeginRequest marks a request in flight on c: a graceful Shutdown waits
// for it (until its deadline) instead of closing c as idle. Call it when a
// request starts work that outlives OnData (a timer, an upstream call), and
// EndRequest when its reply is written.
func (c *Conn) BeginRequest() { c.more().requests++ }

// EndRequest ends a request that BeginRequest began.
func (c *Conn) EndRequest() {
	if c.inFlight() > 0 {
		c.side.requests--
		c.trimSide()
	}
	if c.loop.stopping && c.inFlight() == 0 {
		c.loop.closeIfIdle(c)
	}
}

// PauseRead stops reading from c until ResumeRead: no OnData (nor OnEOF)
// is called in between, and what the peer sends waits in the kernel's
// socket buffer, so that a slow downstream can hold its upstream back (a
// proxy pausing a client while its upstream is slow). It composes with the
// outbound cap: c reads again only when neither holds it.
func (c *Conn) PauseRead() {
	if c.state&(stPauseRead|stLinger) != 0 || c.closed() {
		return // a lingering close reads until it ends (CloseLinger)
	}
	was := c.readPaused()
	c.state |= stPauseRead
	if !was {
		c.loop.d.pauseRead(c)
	}
}

// ResumeRead undoes PauseRead.
func (c *Conn) ResumeRead() {
	if c.state&stPauseRead == 0 {
		return
	}
	c.state &^= stPauseRead
	if !c.readPaused() && !c.closed() {
		c.loop.d.resumeRead(c)
	}
}

// Reserve returns n bytes of room at the end of c's outbound queue, for a
// reply built in place instead of in a buffer of its own that Write would
// then copy: fill some or all of it and call Commit with how much. The
// room is valid until Commit or the next call on c; nothing of it is sent
// before Commit. It returns nil when c can no longer be written to.
func (c *Conn) Reserve(n int) []byte {
	if c.tlsState() != nil {
		return c.tlsReserve(n)
	}
	if !c.writable() || n <= 0 {
		return nil
	}
	if sf := c.fileSend(); sf != nil {
		return sf.after.reserve(c.loop, n)
	}
	return c.outw().reserve(c.loop, n)
}

// Commit sends the first n bytes of the room Reserve returned, as Write
// would have sent them; n may be less than was reserved (0 sends nothing),
// not more.
func (c *Conn) Commit(n int) error {
	if c.tlsState() != nil {
		return c.tlsCommit(n)
	}
	if !c.writable() {
		return c.opError("write", net.ErrClosed)
	}
	q, sf := c.out, c.fileSend()
	if sf != nil {
		q = &sf.after
	}
	if reserved := q.room(); n > reserved {
		return c.opError("write", fmt.Errorf("commit of %d bytes, %d reserved", n, reserved))
	}
	if n <= 0 {
		q.unreserve()
		c.putOut()
		return nil
	}
	if err := c.dropsWrite(n); err != nil {
		q.unreserve()
		c.putOut()
		return err
	}
	if sf != nil {
		q.commit(n)
		c.loop.queued(c)
		return nil
	}
	if c.out.buffered() == 0 {
		c.progress = c.loop.stamp()
	}
	q.commit(n)
	c.loop.d.committed(c)
	if c.out.buffered() > 0 {
		c.loop.queued(c)
	}
	return nil
}

// Backpressured reports whether c's outbound queue reached
// Config.MaxOutbound and has not drained since: reading from c is paused
// until the queue drains to Config.OutboundLowWater, when the handler's
// OnDrain runs. A handler that writes without being asked (a producer, a
// proxy forwarding a stream) stops while it reports true and goes on in
// OnDrain. It says nothing of PauseRead: ReadPaused covers both.
func (c *Conn) Backpressured() bool { return c.state&stPaused != 0 }

// Paused is Backpressured.
//
// Deprecated: the name read as if it covered PauseRead too; it never did.
// Call Backpressured for the outbound cap, ReadPaused for either reason.
func (c *Conn) Paused() bool { return c.Backpressured() }

// ReadPaused reports whether reading from c is paused, for either reason:
// the handler's PauseRead (until ResumeRead), or the outbound cap
// (Backpressured, until the queue drains). While it reports true no OnData
// (nor OnEOF) is called.
func (c *Conn) ReadPaused() bool { return c.readPaused() }

// opError wraps err for the public boundary with the connection's
// addresses, asking the kernel for those not known yet while the
// descriptor is open (only errors pay for it).
func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

func errnoErr(call string, errno unix.Errno) error {
	return os.NewSyscallError(call, errno)
}
