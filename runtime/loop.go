package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/internal/hist"
	"github.com/percore/percore/listener"
	"golang.org/x/sys/unix"
)

// driver is what a loop needs from its backend. Both backends present the
// same model to the loop: the loop owns connections, their queued output
// and their lifecycle; a driver moves bytes and reports what happened by
// calling the loop's on* methods. Every method runs on the loop's thread
// except wake.
type driver interface {
	// listen starts accepting on the listening socket fd.
	listen(fd int) error
	// stopListening stops accepting; the listener is closed by the loop.
	stopListening()
	// pauseAccept stops taking connections from the listener's backlog
	// (at the connection cap, or backing off); resumeAccept resumes.
	pauseAccept()
	resumeAccept()
	// pauseRead stops receiving on c (outbound backpressure); resumeRead
	// resumes.
	pauseRead(c *Conn)
	resumeRead(c *Conn)
	// start begins receiving on a connection that just opened.
	start(c *Conn) error
	// write sends p, or queues it (c.appendOut) when the kernel must wait.
	write(c *Conn, p []byte)
	// writev is write for several buffers.
	writev(c *Conn, bufs [][]byte)
	// shutdownWrite shuts the write side down (queue already drained).
	shutdownWrite(c *Conn)
	// release gives the descriptor back to the kernel; the driver calls
	// loop.freeSlot(c) once the kernel holds nothing of c any more.
	release(c *Conn)
	// connect starts a non-blocking connect of c.fd to the address.
	connect(c *Conn, d *dialState) error
	// poll runs one turn: hand everything prepared to the kernel, wait up
	// to timeout (negative: no limit) for events, call loop.awoke, and
	// dispatch the events.
	poll(timeout time.Duration) error
	// submit hands everything prepared to the kernel without waiting.
	submit()
	// discardBuffers gives back the pages of the receive buffers if no
	// connection can be receiving into them (the loop has none open),
	// and reports false when that cannot be known yet (a released
	// connection's operations are still in flight).
	discardBuffers() bool
	// idle reports whether the kernel holds nothing of this loop any more
	// (after stopListening and every release), so the loop may exit.
	idle() bool
	// wake interrupts poll from another goroutine. Safe for concurrent use.
	wake()
	// enters returns the number of system calls the driver made.
	enters() uint64
	// close releases the driver's own resources.
	close() error
}

// Loop is one thread-per-core event loop: a goroutine locked to an OS
// thread pinned to one CPU, with its own io_uring or epoll instance, its own
// listener and its own connections. Its methods must be called on its own
// thread (from handlers, timers or posted functions) unless their
// documentation says otherwise.
type Loop struct {
	cfg     Config
	id      int
	cpu     int
	backend Backend
	d       driver
	h       Handler
	ln      *listener.Listener
	log     *slog.Logger

	conns []*Conn  // by slot; nil when free
	gens  []uint32 // by slot: the generation of its last connection
	free  []uint32
	open  int

	timers timerHeap
	now    time.Time

	bufs      bufPool // outbound buffers
	trimTimer *Timer  // gives back pooled buffers a period did not use

	postMu     sync.Mutex
	posted     []func()
	running    []func()
	postClosed bool
	// Written by other goroutines (Post, Go), read by Stats.
	postRejects, goRejects, goDropped atomic.Uint64
	goRunning                         atomic.Int64

	cnt      counters
	pub      publishedStats
	stopping bool
	done     chan struct{}

	// An accept-failure episode: its failures, the current back-off, when
	// it last failed, whether an accept has succeeded since, and whether
	// the timer that ends it after a quiet spell is pending.
	acceptBackoff    time.Duration
	acceptErrs       int
	acceptLastErr    time.Time
	acceptRecovered  bool
	acceptQuietArmed bool

	lastYield time.Time // when the loop last yielded to Go's scheduler
	// Accepting is paused while the loop is at its connection cap or
	// backing off after a resource error; it resumes when neither holds.
	pausedCap, pausedBackoff bool
	paused                   int // connections paused for backpressure

	lag         hist.Histogram // per-turn dispatch time, this window
	lagWindow   time.Time
	postedBatch int // largest batch of posted functions, this window

	onStop []func()
	// stopErr is what went wrong while the loop stopped (closing its
	// listener or its backend), for Runtime.Close; written by the loop
	// before done is closed.
	stopErr error
}

// OnStop registers f to run on the loop's thread when the loop stops, after
// its connections are closed and before its thread exits (a per-loop
// registry removes its entry here). It must be called on the loop's thread.
func (l *Loop) OnStop(f func()) { l.onStop = append(l.onStop, f) }

// ID returns the loop's index, from 0.
func (l *Loop) ID() int { return l.id }

// CPU returns the CPU the loop's thread is pinned to.
func (l *Loop) CPU() int { return l.cpu }

// Backend returns the backend the loop runs (never Auto).
func (l *Loop) Backend() Backend { return l.backend }

// Now returns the loop's clock, read when the kernel returns and again
// after the turn's events are handled.
func (l *Loop) Now() time.Time { return l.now }

// Post queues f to run on the loop's thread and wakes the loop. It is safe
// for concurrent use; wake-ups coalesce. Functions run in the order they
// were posted. The queue is bounded (Config.MaxPosted): when it is full,
// Post returns an error that matches ErrLoopBusy, f does not run, and
// Stats.PostRejects counts it; the caller sheds the work or retries later.
// After the loop stops, Post returns net.ErrClosed and f does not run.
func (l *Loop) Post(f func()) error { return l.post(f, false) }

// post is Post; force skips the bound, for the runtime's own functions
// (shutdown, and the continuations of work Go has already admitted).
func (l *Loop) post(f func(), force bool) error {
	l.postMu.Lock()
	if l.postClosed {
		l.postMu.Unlock()
		return fmt.Errorf("post to loop %d: %w", l.id, net.ErrClosed)
	}
	if !force && l.cfg.MaxPosted > 0 && len(l.posted) >= l.cfg.MaxPosted {
		l.postMu.Unlock()
		l.postRejects.Add(1)
		return fmt.Errorf("post to loop %d: %d functions queued: %w", l.id, l.cfg.MaxPosted, ErrLoopBusy)
	}
	l.posted = append(l.posted, f)
	// Wake under the lock: once the loop marks itself closed (under the
	// same lock) it may close the wake-up descriptor.
	l.d.wake()
	l.postMu.Unlock()
	return nil
}

// Go runs work on a new goroutine, for work that would block the loop, and
// then runs the function work returns (if not nil) on the loop's thread.
// It is safe for concurrent use. At most Config.MaxGo such goroutines run
// per loop: past that Go returns an error that matches ErrLoopBusy (counted
// in Stats.GoRejects) and work does not run. After the loop stops Go
// returns net.ErrClosed; a loop that stops while work runs cannot run its
// continuation, which is then dropped and counted in Stats.GoDropped.
func (l *Loop) Go(work func() (then func())) error {
	l.postMu.Lock()
	closed := l.postClosed
	l.postMu.Unlock()
	if closed {
		return fmt.Errorf("go on loop %d: %w", l.id, net.ErrClosed)
	}
	if n := l.goRunning.Add(1); l.cfg.MaxGo > 0 && n > int64(l.cfg.MaxGo) {
		l.goRunning.Add(-1)
		l.goRejects.Add(1)
		return fmt.Errorf("go on loop %d: %d goroutines running: %w", l.id, l.cfg.MaxGo, ErrLoopBusy)
	}
	go func() {
		defer l.goRunning.Add(-1)
		if then := work(); then != nil {
			if l.post(then, true) != nil {
				l.goDropped.Add(1)
			}
		}
	}()
	return nil
}

// runPosted runs what other goroutines posted. Drivers call it after a
// wake-up.
func (l *Loop) runPosted() {
	l.postMu.Lock()
	l.running, l.posted = l.posted, l.running[:0]
	l.postMu.Unlock()
	l.postedBatch = max(l.postedBatch, len(l.running))
	for i, f := range l.running {
		l.running[i] = nil
		l.cnt.posted++
		l.safely("posted function", f)
	}
}

// safely runs f, recovering a panic: it is logged with its stack and
// counted, and the loop goes on.
func (l *Loop) safely(what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			l.cnt.panics++
			l.log.Error("percore: panic in "+what, "loop", l.id, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	f()
}

// recoverConn is deferred around handler calls: a panic closes only the
// connection the handler was handling.
func (l *Loop) recoverConn(c *Conn) {
	if r := recover(); r != nil {
		l.cnt.panics++
		l.log.Error("percore: handler panicked; closing its connection", "loop", l.id, "panic", r,
			"stack", string(debug.Stack()))
		l.closeConn(c, c.opError("read", ErrHandlerPanic))
	}
}

// run is the loop's body, on its locked and pinned thread.
func (l *Loop) run() {
	defer close(l.done)
	kernelErrors := 0
	for {
		if l.stopping && l.open == 0 && l.d.idle() {
			break
		}
		if l.now.Sub(l.lastYield) >= yieldInterval {
			l.yield()
		}
		timeout := time.Duration(-1)
		if t := l.timers.next(); t != nil {
			timeout = max(time.Until(t.when), 0)
		}
		l.publish()
		if err := l.d.poll(timeout); err != nil {
			// The backend itself failed (not one connection): close
			// everything; if the kernel keeps failing, give up waiting
			// for it rather than spin.
			kernelErrors++
			if kernelErrors == 1 {
				l.log.Error("percore: loop stopping on a kernel error", "loop", l.id, "err", err)
			}
			l.forceStop(err)
			if kernelErrors >= maxKernelErrors {
				break
			}
			continue
		}
		kernelErrors = 0
		l.lag.Record(int64(time.Since(l.now)))
		l.now = time.Now()
		l.cnt.turns++
		l.runTimers()
	}
	for _, f := range l.onStop {
		l.safely("OnStop function", f)
	}
	l.postMu.Lock()
	l.postClosed = true
	l.postMu.Unlock()
	l.runPosted()
	l.publish()
	if err := l.d.close(); err != nil {
		l.log.Error("percore: close loop backend", "loop", l.id, "err", err)
		l.stopErr = errors.Join(l.stopErr, fmt.Errorf("loop %d: close backend: %w", l.id, err))
	}
	l.bufs.releaseAll()
}

// yieldInterval is how often a loop yields its thread to Go's scheduler.
// It is below the scheduler's 10 ms preemption slice: see yield.
const yieldInterval = 5 * time.Millisecond

// yield hands everything prepared to the kernel and lets Go's scheduler
// run once. A loop's goroutine never blocks in the scheduler, so without
// this sysmon sees its P on the same scheduling tick for over 10 ms, takes
// it as a long-running goroutine, and from then on retakes the P at every
// blocking wait, handing it to another thread and keeping itself at its
// shortest period: thousands of futex calls, wake-ups and nanosleeps a
// second. One yield every 5 ms (three futex calls) resets the tick.
// Measured in docs/performance.md.
func (l *Loop) yield() {
	l.d.submit()
	goruntime.Gosched()
	l.lastYield = time.Now()
}

// awoke is called by drivers when the kernel returns, before they dispatch
// what it reported: it reads the loop's clock for the turn.
func (l *Loop) awoke() { l.now = time.Now() }

// forceStop begins the loop's shutdown: stop accepting, close every connection
// with err, exit once the kernel holds nothing of the loop.
func (l *Loop) forceStop(err error) {
	if !l.stopping {
		l.stopping = true
		l.closeListener()
	}
	for _, c := range l.conns {
		if c != nil && c.state&stClosed == 0 {
			l.closeConn(c, c.opError("close", err))
		}
	}
}

func (l *Loop) closeListener() {
	if l.ln == nil {
		return
	}
	l.d.stopListening()
	if err := l.ln.Close(); err != nil {
		l.log.Error("percore: close listener", "loop", l.id, "err", err)
		l.stopErr = errors.Join(l.stopErr, fmt.Errorf("loop %d: close listener: %w", l.id, err))
	}
	l.ln = nil
}

// newConn takes a slot for a connection on fd.
func (l *Loop) newConn(fd int, h Handler) *Conn {
	c := &Conn{loop: l, fd: fd, h: h}
	if n := len(l.free); n > 0 {
		c.slot = l.free[n-1]
		l.free = l.free[:n-1]
	} else {
		c.slot = uint32(len(l.conns))
		l.conns = append(l.conns, nil)
		l.gens = append(l.gens, 0)
	}
	c.gen = (l.gens[c.slot] + 1) & genMask
	l.gens[c.slot] = c.gen
	l.conns[c.slot] = c
	l.open++
	return c
}

// conn returns the connection in slot if its generation matches.
func (l *Loop) conn(slot, gen uint32) *Conn {
	if int(slot) >= len(l.conns) {
		return nil
	}
	c := l.conns[slot]
	if c == nil || c.gen != gen {
		return nil
	}
	return c
}

// freeSlot returns a released connection's slot; drivers call it once the
// kernel holds nothing of c.
func (l *Loop) freeSlot(c *Conn) {
	if l.conns[c.slot] != c {
		return
	}
	l.conns[c.slot] = nil
	l.free = append(l.free, c.slot)
	l.putBuf(c.sending)
	c.sending = nil
	c.dial = nil // the kernel is done with the socket address
}

// accepted is called by drivers with a new connection's descriptor.
func (l *Loop) accepted(fd int) {
	l.acceptOK()
	l.cnt.accepts++
	c := l.newConn(fd, l.h)
	if err := l.d.start(c); err != nil {
		l.closeConn(c, err)
		return
	}
	l.opened(c)
}

// canAccept reports whether the loop is below its connection cap.
func (l *Loop) canAccept() bool {
	return l.cfg.MaxConns == 0 || l.open < l.cfg.MaxConns
}

// capReached pauses accepting at the connection cap; drivers call it when
// canAccept turns false.
func (l *Loop) capReached() {
	if !l.pausedCap {
		l.pausedCap = true
		l.cnt.capPauses++
		l.d.pauseAccept()
	}
}

// maybeResumeAccept resumes accepting when neither the cap nor a back-off
// holds it.
func (l *Loop) maybeResumeAccept() {
	if l.pausedCap && l.canAccept() {
		l.pausedCap = false
		if !l.pausedBackoff && l.ln != nil && !l.stopping {
			l.d.resumeAccept()
		}
	}
}

// opened runs the handler's OnOpen and starts the connection's timers.
func (l *Loop) opened(c *Conn) {
	c.state |= stOpen
	c.opened = l.now
	c.lastRead = l.now
	if l.cfg.IdleTimeout > 0 {
		c.SetIdleTimeout(l.cfg.IdleTimeout)
	}
	if l.cfg.MaxLifetime > 0 {
		c.SetMaxLifetime(l.cfg.MaxLifetime)
	}
	if oh, ok := c.h.(OpenHandler); ok {
		defer l.recoverConn(c)
		oh.OnOpen(c)
	}
}

// received delivers data to the handler.
func (l *Loop) received(c *Conn, data []byte) {
	if c.state&(stClosing|stClosed|stEOF) != 0 {
		return
	}
	l.cnt.bytesIn += uint64(len(data))
	c.lastRead = l.now
	l.deliver(c, data)
	if l.stopping {
		l.closeIfIdle(c)
	}
}

func (l *Loop) deliver(c *Conn, data []byte) {
	defer l.recoverConn(c)
	c.h.OnData(c, data)
}

// queued is called after bytes were added to c's outbound queue: it applies
// the outbound cap.
func (l *Loop) queued(c *Conn) {
	c.watchWrite()
	if l.cfg.MaxOutbound == 0 || c.Buffered() < l.cfg.MaxOutbound || c.state&(stPaused|stClosed) != 0 {
		return
	}
	if l.cfg.OutboundPolicy == CloseSlowConsumer {
		l.cnt.slowConsumers++
		l.closeConn(c, c.opError("write", ErrSlowConsumer))
		return
	}
	c.state |= stPaused | stOverCap
	l.paused++
	l.cnt.pauses++
	l.d.pauseRead(c)
}

// sentSome is called by drivers when the kernel took some of c's queued
// bytes: below the low-water mark a paused connection resumes reading and
// the handler hears that the queue drained.
func (l *Loop) sentSome(c *Conn) {
	c.progress = l.now
	if c.state&stOverCap == 0 || c.Buffered() > l.cfg.OutboundLowWater || c.state&stClosed != 0 {
		return
	}
	c.state &^= stOverCap
	if c.state&stPaused != 0 {
		c.state &^= stPaused
		l.paused--
		l.d.resumeRead(c)
	}
	if dh, ok := c.h.(DrainHandler); ok {
		defer l.recoverConn(c)
		dh.OnDrain(c)
	}
}

// closeIfIdle closes c during a graceful shutdown once it has no request
// in flight and nothing queued.
func (l *Loop) closeIfIdle(c *Conn) {
	if c.requests == 0 && c.Buffered() == 0 && c.state&(stClosing|stClosed|stConnecting) == 0 {
		c.Close()
	}
}

// eof is called by drivers when the peer ended its stream.
func (l *Loop) eof(c *Conn) {
	if c.state&(stClosed|stEOF) != 0 {
		return
	}
	c.state |= stEOF
	if eh, ok := c.h.(EOFHandler); ok && c.state&stClosing == 0 {
		defer l.recoverConn(c)
		eh.OnEOF(c)
		return
	}
	c.Close()
}

// drained is called by drivers when every queued byte has been sent.
func (l *Loop) drained(c *Conn) {
	switch {
	case c.state&stClosed != 0:
	case c.state&stClosing != 0:
		l.closeConn(c, nil)
	case c.state&stShutWrite != 0 && c.state&stWriteShut == 0:
		l.d.shutdownWrite(c)
	case l.stopping:
		l.closeIfIdle(c)
	}
}

// fail closes c because op failed with err.
func (l *Loop) fail(c *Conn, op string, err error) {
	if c.state&stClosed != 0 {
		return
	}
	l.closeConn(c, c.opError(op, err))
}

// closeConn releases c's descriptor and runs OnClose with err.
func (l *Loop) closeConn(c *Conn, err error) {
	if c.state&stClosed != 0 {
		return
	}
	wasOpen := c.state&stOpen != 0
	if c.state&stPaused != 0 {
		l.paused--
	}
	c.state |= stClosed | stClosing
	c.state &^= stPaused
	l.open--
	if l.open == 0 {
		l.lastClosed()
	}
	// A dial that never connected was never counted open. c.dial stays
	// until the slot is freed: a connect still in flight reads the socket
	// address in it.
	d := c.dial
	if d == nil {
		l.cnt.closes++
	}
	c.stopTimers()
	l.d.release(c)
	l.putBuf(c.out)
	c.out = nil
	l.maybeResumeAccept()
	if d != nil && d.done != nil {
		if err == nil {
			err = c.opError("dial", net.ErrClosed)
		}
		done := d.done
		d.done = nil
		l.safely("dial done function", func() { done(nil, err) })
		return
	}
	if !wasOpen {
		return
	}
	if ch, ok := c.h.(CloseHandler); ok {
		l.safely("OnClose", func() { ch.OnClose(c, err) })
	}
}

// maxKernelErrors is how many consecutive backend failures a stopping loop
// tolerates before it exits without waiting for the kernel.
const maxKernelErrors = 16

// acceptOutcome is what an accept error means for the listener.
type acceptOutcome uint8

const (
	acceptSkip   acceptOutcome = iota // one connection's error: accept the next
	acceptIdle                        // out of resources, none waiting: wait for one
	acceptPaused                      // out of resources, one waiting: back off
)

// acceptFailed handles an accept error on the listening socket lnfd.
// Per-connection errors are skipped silently. A shortage of descriptors or
// memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) is only a failure when a
// connection is waiting: the kernel checks for a free descriptor before it
// looks at the backlog, so a loop at its descriptor limit fails every
// accept, also with nobody to refuse. A failure (that, or any other error
// on the listener) pauses accepting for a back-off that grows from 10 ms
// to 1 s, is counted, and is logged once per episode.
func (l *Loop) acceptFailed(err error, lnfd int) acceptOutcome {
	if isTransientAcceptError(err) {
		return acceptSkip
	}
	if isResourceError(err) && !backlogWaiting(lnfd) {
		return acceptIdle
	}
	if l.acceptErrs == 0 {
		l.log.Warn("percore: accept failing, backing off", "loop", l.id, "err", err)
	}
	l.acceptErrs++
	l.acceptLastErr = l.now
	l.acceptRecovered = false
	l.cnt.acceptErrors++
	if l.acceptBackoff == 0 {
		l.acceptBackoff = acceptBackoffMin
	} else {
		l.acceptBackoff = min(2*l.acceptBackoff, acceptBackoffMax)
	}
	if !l.pausedBackoff {
		l.pausedBackoff = true
		l.d.pauseAccept()
		l.AfterFunc(l.acceptBackoff, func() {
			l.pausedBackoff = false
			if !l.pausedCap && l.ln != nil && !l.stopping {
				l.d.resumeAccept()
			}
		})
	}
	return acceptPaused
}

// isResourceError reports an accept error that says the process or the
// system is short of descriptors or memory.
func isResourceError(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) ||
		errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM)
}

// backlogWaiting reports whether a connection waits in the listening
// socket lnfd's backlog. When it cannot tell, it says yes: backing off is
// the safe answer.
func backlogWaiting(lnfd int) bool {
	fds := [1]unix.PollFd{{Fd: int32(lnfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds[:], 0)
	return err != nil || n > 0
}

// acceptOK notes an accepted connection. During an episode, progress
// restarts the back-off from its minimum, but the episode ends only after
// acceptQuiet with no failure: descriptors usually come back one at a
// time, and each would otherwise end one episode and start the next.
func (l *Loop) acceptOK() {
	if l.acceptErrs == 0 {
		return
	}
	l.acceptBackoff = 0
	l.acceptRecovered = true
	if !l.acceptQuietArmed {
		l.acceptQuietArmed = true
		l.AfterFunc(acceptQuiet, l.endAcceptEpisode)
	}
}

// endAcceptEpisode ends the episode if accepts have succeeded since the
// last failure and acceptQuiet has passed without one; if accepting is
// still failing, the next success arms it again.
func (l *Loop) endAcceptEpisode() {
	l.acceptQuietArmed = false
	if l.acceptErrs == 0 || !l.acceptRecovered {
		return
	}
	if quiet := l.now.Sub(l.acceptLastErr); quiet < acceptQuiet {
		l.acceptQuietArmed = true
		l.AfterFunc(acceptQuiet-quiet, l.endAcceptEpisode)
		return
	}
	l.log.Info("percore: accepting again", "loop", l.id, "errors", l.acceptErrs)
	l.acceptErrs = 0
	l.acceptBackoff = 0
}

// isTransientAcceptError reports errors that concern one connection (it
// was aborted before it was accepted, a firewall refused it): skip them.
func isTransientAcceptError(err error) bool {
	return errors.Is(err, unix.ECONNABORTED) || errors.Is(err, unix.EPROTO) ||
		errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENETDOWN) ||
		errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EHOSTDOWN) ||
		errors.Is(err, unix.ENONET) || errors.Is(err, unix.EHOSTUNREACH) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENETUNREACH) ||
		errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)
}
