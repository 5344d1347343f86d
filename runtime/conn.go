package runtime

import (
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is one TCP connection owned by a loop. Its methods must be called on
// that loop's thread (from a handler, a timer or a function posted to the
// loop); none of them blocks. After Close, or once OnClose has run, writes
// fail with net.ErrClosed.
type Conn struct {
	loop *Loop
	fd   int
	slot uint32
	gen  uint32
	h    Handler

	value any

	// out holds bytes written but not yet handed to the kernel; sending
	// holds the bytes of the send in flight (io_uring), from sent on.
	out     []byte
	sending []byte
	sent    int

	state connState
	// ops counts operations the kernel still holds for this connection
	// (io_uring); the slot is freed when a closed connection has none.
	ops int

	dial  *dialState
	laddr net.Addr
	raddr net.Addr

	opened, lastRead time.Time
	idleTimeout      time.Duration
	idleTimer        *Timer
	lifeTimer        *Timer
	// progress is when the kernel last took queued bytes, or the queue
	// last went from empty to not; writeTimer checks it (WriteTimeout).
	// lingerTimer bounds a Close that waits for the queue (Linger).
	progress    time.Time
	writeTimer  *Timer
	lingerTimer *Timer
	requests    int // in flight, as BeginRequest/EndRequest count them

	// The turn budget: bytes delivered in turn turnStamp, and receives
	// waiting for a later turn (io_uring).
	turnStamp uint64
	turnBytes int
	deferred  int
	// Deferred receives that arrived while reading was paused (io_uring):
	// they wait here, not on the loop's queue, until reading resumes.
	parked []deferredRecv
}

type connState uint32

const (
	stOpen          connState = 1 << iota // OnOpen has run (or is running)
	stClosing                             // Close asked: send what is queued, then close
	stClosed                              // the descriptor is released; OnClose has run
	stShutWrite                           // CloseWrite asked: shut down after the queue drains
	stWriteShut                           // the write side is shut down
	stEOF                                 // the peer ended its stream
	stRecvArmed                           // io_uring: a receive is armed (multishot, or one buffer when throttled)
	stDirty                               // io_uring: queued on the loop's send list
	stPollOut                             // epoll: registered for writability
	stConnecting                          // a dial is in progress
	stPaused                              // reading paused for outbound backpressure
	stOverCap                             // the queue reached the cap and has not drained yet
	stRecvEOF                             // the kernel reported end of stream (delivery may wait)
	stBudgetHeld                          // io_uring: receiving stopped while over the turn budget
	stThrottled                           // io_uring: receiving one buffer at a time after the budget
	stUnpolled                            // epoll: out of the epoll set (nothing to wait for)
	stRecvCancel                          // io_uring: the armed receive's cancel is queued
	stSendCancel                          // io_uring: the send in flight's cancel is queued
	stConnectCancel                       // io_uring: the connect in flight's cancel is queued
	stReleasing                           // io_uring: closed, its cancels or close still to be queued
)

// Loop returns the loop that owns c.
func (c *Conn) Loop() *Loop { return c.loop }

// Fd returns the connection's socket descriptor, for socket options. Do
// not read, write or close it.
func (c *Conn) Fd() int { return c.fd }

// Value returns the value stored with SetValue.
func (c *Conn) Value() any { return c.value }

// SetValue stores a per-connection value for the handler.
func (c *Conn) SetValue(v any) { c.value = v }

// Closed reports whether c is closed or closing.
func (c *Conn) Closed() bool { return c.state&(stClosing|stClosed) != 0 }

// Buffered returns how many written bytes the kernel has not taken yet.
func (c *Conn) Buffered() int { return len(c.out) + len(c.sending) - c.sent }

// Write queues p to be sent and returns len(p). It copies p, so the caller
// may reuse it at once (also a slice of the data OnData received). When
// nothing is queued, the epoll backend sends at once; the io_uring backend
// hands the bytes to the kernel in the loop's next enter, together with
// every other submission of the turn.
func (c *Conn) Write(p []byte) (int, error) {
	if c.state&(stClosing|stClosed|stShutWrite|stWriteShut) != 0 {
		return 0, c.opError("write", net.ErrClosed)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if c.Buffered() == 0 {
		c.progress = c.loop.now
	}
	c.loop.d.write(c, p)
	if len(c.out) > 0 {
		c.loop.queued(c)
	}
	return len(p), nil
}

// Writev queues the buffers as one gathered write and returns the number of
// bytes queued.
func (c *Conn) Writev(bufs ...[]byte) (int, error) {
	if c.state&(stClosing|stClosed|stShutWrite|stWriteShut) != 0 {
		return 0, c.opError("write", net.ErrClosed)
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if n == 0 {
		return 0, nil
	}
	if c.Buffered() == 0 {
		c.progress = c.loop.now
	}
	c.loop.d.writev(c, bufs)
	if len(c.out) > 0 {
		c.loop.queued(c)
	}
	return n, nil
}

// Close sends what is queued and then closes the connection; OnClose runs
// once the descriptor is released. It is idempotent.
func (c *Conn) Close() error {
	if c.state&(stClosing|stClosed) != 0 {
		return nil
	}
	c.state |= stClosing
	if c.Buffered() == 0 || c.state&stWriteShut != 0 {
		c.loop.closeConn(c, nil)
		return nil
	}
	if d := c.loop.cfg.Linger; d > 0 {
		c.lingerTimer = c.loop.AfterFunc(d, c.lingerExpired)
	}
	return nil
}

// lingerExpired aborts a closing connection whose queue did not drain
// within Config.Linger.
func (c *Conn) lingerExpired() {
	if c.state&stClosed == 0 {
		c.loop.cnt.lingerTimeouts++
		c.loop.closeConn(c, c.opError("close", ErrLingerTimeout))
	}
}

// watchWrite arms the write timeout for bytes just queued, unless it is
// armed already.
func (c *Conn) watchWrite() {
	d := c.loop.cfg.WriteTimeout
	switch {
	case d <= 0:
	case c.writeTimer == nil:
		c.writeTimer = c.loop.AfterFunc(d, c.checkWrite)
	case c.writeTimer.index < 0:
		c.writeTimer.Reset(d)
	}
}

// checkWrite runs when the write timer fires: a queue that the kernel has
// taken nothing of for WriteTimeout closes the connection; a queue that
// moved re-arms the timer for the rest of the period; an empty queue
// leaves it disarmed until the next write queues bytes.
func (c *Conn) checkWrite() {
	if c.state&stClosed != 0 || c.Buffered() == 0 {
		return
	}
	l := c.loop
	if left := c.progress.Add(l.cfg.WriteTimeout).Sub(l.now); left > 0 {
		c.writeTimer.Reset(left)
		return
	}
	l.cnt.writeTimeouts++
	l.closeConn(c, c.opError("write", ErrWriteTimeout))
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
	if c.state&(stClosing|stClosed|stShutWrite|stWriteShut) != 0 {
		return nil
	}
	c.state |= stShutWrite
	if c.Buffered() == 0 {
		c.loop.d.shutdownWrite(c)
	}
	return nil
}

// LocalAddr returns the local address (it asks the kernel the first time).
// Once the connection is closed it returns what an earlier call found, or
// nil: call it in OnOpen to have it in OnClose.
func (c *Conn) LocalAddr() net.Addr {
	if c.laddr == nil && c.fd >= 0 {
		if sa, err := unix.Getsockname(c.fd); err == nil {
			c.laddr = sockaddrToTCP(sa)
		}
	}
	return c.laddr
}

// RemoteAddr returns the peer's address (it asks the kernel the first
// time). Once the connection is closed it returns what an earlier call
// found, or nil: call it in OnOpen to have it in OnClose (a peer's reset
// can also make the kernel forget it sooner).
func (c *Conn) RemoteAddr() net.Addr {
	if c.raddr == nil && c.fd >= 0 {
		if sa, err := unix.Getpeername(c.fd); err == nil {
			c.raddr = sockaddrToTCP(sa)
		}
	}
	return c.raddr
}

// SetIdleTimeout closes c with ErrIdleTimeout once it has received
// nothing for d; zero turns the idle timeout off. The clock restarts now.
func (c *Conn) SetIdleTimeout(d time.Duration) {
	c.idleTimeout = d
	c.lastRead = c.loop.now
	if d <= 0 {
		if c.idleTimer != nil {
			c.idleTimer.Stop()
		}
		return
	}
	if c.state&stClosed != 0 {
		return
	}
	if c.idleTimer == nil {
		c.idleTimer = c.loop.AfterFunc(d, c.checkIdle)
	} else {
		c.idleTimer.Reset(d)
	}
}

// checkIdle runs when the idle timer fires. Reads only record their time,
// so the timer is re-armed for the rest of the period instead of being
// reset on every read.
func (c *Conn) checkIdle() {
	if c.state&stClosed != 0 || c.idleTimeout <= 0 {
		return
	}
	l := c.loop
	if left := c.lastRead.Add(c.idleTimeout).Sub(l.now); left > 0 {
		c.idleTimer.Reset(left)
		return
	}
	l.cnt.idleTimeouts++
	l.closeConn(c, c.opError("read", ErrIdleTimeout))
}

// SetMaxLifetime closes c with ErrMaxLifetime once d has passed since it
// opened; zero removes the limit.
func (c *Conn) SetMaxLifetime(d time.Duration) {
	if c.lifeTimer != nil {
		c.lifeTimer.Stop()
	}
	if d <= 0 || c.state&stClosed != 0 {
		return
	}
	left := c.opened.Add(d).Sub(c.loop.now)
	if c.lifeTimer == nil {
		c.lifeTimer = c.loop.AfterFunc(left, c.expire)
	} else {
		c.lifeTimer.Reset(left)
	}
}

func (c *Conn) expire() {
	if c.state&stClosed == 0 {
		c.loop.cnt.lifetimeCloses++
		c.loop.closeConn(c, c.opError("close", ErrMaxLifetime))
	}
}

func (c *Conn) stopTimers() {
	for _, t := range [...]*Timer{c.idleTimer, c.lifeTimer, c.writeTimer, c.lingerTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// BeginRequest marks a request in flight on c: a graceful Shutdown waits
// for it (until its deadline) instead of closing c as idle. Call it when a
// request starts work that outlives OnData (a timer, an upstream call), and
// EndRequest when its reply is written.
func (c *Conn) BeginRequest() { c.requests++ }

// EndRequest ends a request that BeginRequest began.
func (c *Conn) EndRequest() {
	if c.requests > 0 {
		c.requests--
	}
	if c.loop.stopping && c.requests == 0 {
		c.loop.closeIfIdle(c)
	}
}

// Paused reports whether reading from c is paused because its outbound
// queue reached the cap.
func (c *Conn) Paused() bool { return c.state&stPaused != 0 }

// appendOut queues p. Past the loop's largest pooled size the queue at
// least doubles when it grows, so that a long burst of writes costs
// amortised constant time per byte.
func (c *Conn) appendOut(p []byte) {
	if n := len(c.out) + len(p); n > cap(c.out) {
		b := append(c.loop.getBuf(max(n, 2*cap(c.out))), c.out...)
		c.loop.putBuf(c.out)
		c.out = b
	}
	c.out = append(c.out, p...)
}

// opError wraps err for the public boundary with the connection's
// addresses, asking the kernel for those not known yet while the
// descriptor is open (only errors pay for it).
func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

func sockaddrToTCP(sa unix.Sockaddr) net.Addr {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: append(net.IP(nil), sa.Addr[:]...), Port: sa.Port}
	case *unix.SockaddrInet6:
		a := &net.TCPAddr{IP: append(net.IP(nil), sa.Addr[:]...), Port: sa.Port}
		if sa.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(sa.ZoneId)); err == nil {
				a.Zone = ifi.Name
			}
		}
		return a
	}
	return nil
}

func errnoErr(call string, errno unix.Errno) error {
	return os.NewSyscallError(call, errno)
}
