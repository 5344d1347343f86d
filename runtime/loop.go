//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/internal/hist"
)

// Loop is one thread-per-core event loop: a goroutine locked to an OS
// thread pinned to one CPU, with its own io_uring or epoll instance, its own
// listener and its own connections. Its methods must be called on its own
// thread (from handlers, timers or posted functions) unless their
// documentation says otherwise.
//
// The loop's code is split by concern: the turn and the callbacks (this
// file), the connections' lifecycle (lifecycle.go), the loop's stop
// (stop.go), accepting (accept.go), the door for other goroutines
// (post.go), outbound buffers (buffers.go), timers (timer.go), and the
// contract with its driver (driver.go).
type Loop struct {
	cfg     Config
	id      int
	cpu     int
	backend Backend
	d       driver
	h       Handler
	// lns are the loop's listeners (listen.go), in Runtime.Listeners
	// order; streams and packets count those it serves, until
	// closeListener (lnClosed) stops them all.
	lns      []*loopListener
	streams  int
	packets  int
	lnClosed bool
	pk       packetState // the datagram sockets' shared state (packet.go)
	spread   int         // this loop's accepts on shared listeners, for spreadConn
	log      *slog.Logger
	clock    func() time.Time // time.Now, or a test's clock
	rt       *Runtime         // nil in the kernel-free tests

	conns []*Conn  // by slot; nil when free
	gens  []uint32 // by slot: the generation of its last connection
	free  []uint32
	open  int

	timers timerHeap
	now    time.Time

	// epoch is what stamps count from (conn_side.go); spare, spareSides
	// and spareOut are connections' write and idle timers, stopped, side
	// states and outbound queues no longer used, to reuse (conn_timers.go,
	// conn_side.go, conn_out.go).
	epoch      time.Time
	spare      burstSpares[Timer]
	spareSides []*connSide
	spareOut   burstSpares[outQueue] // outbound queues no connection holds (conn_out.go)

	bufs      bufPool // outbound buffers
	trimTimer *Timer  // gives back pooled buffers a period did not use

	postMu     sync.Mutex
	posted     []func()
	running    []func()
	postClosed bool
	// wakeMu guards the wake-up descriptor's lifetime, apart from postMu:
	// a wake-up is written under its read lock while wakeClosed is false,
	// and the loop sets wakeClosed under its write lock before it closes
	// the descriptor. A poster the kernel preempts inside the wake-up's
	// system call (the loop it wakes shares its CPU) then holds no lock
	// the loop needs to run what was posted.
	wakeMu     sync.RWMutex
	wakeClosed bool
	// Written by other goroutines (Post, Go), read by Stats.
	postRejects, goRejects, goDropped atomic.Uint64
	goRunning                         atomic.Int64

	cnt      [numStats]uint64 // the loop's own counters
	pub      published        // what Stats reads
	stopping bool
	forced   bool // stopping by Close or a deadline: nothing more is served
	done     chan struct{}

	accept acceptState
	calls  loopCalls
	tls    loopTLS
	files  fileTable // file operations in flight and open files (file.go)

	// depth counts the user callbacks running (handler callbacks, timers,
	// posted functions); notes are the OnClose and OnDrain calls (and the
	// done functions of failed dials) that wait for the outermost one to
	// return, so that none runs inside the callback that caused it.
	depth int
	notes []note

	// sendFallback makes every file send read and send (set by tests).
	sendFallback bool

	lastYield time.Time // when the loop last yielded to Go's scheduler
	paused    int       // connections paused for backpressure

	// lag is the per-turn dispatch time of this window: 5 KB of buckets,
	// allocated apart (newLoop) so that the fields each turn touches stay
	// on a few cache lines.
	lag         *hist.Histogram
	lagWindow   time.Time
	postedBatch int // largest batch of posted functions, this window

	// ho is the hand-over of connections to a new process, while one
	// runs (handoff.go); nil otherwise.
	ho *loopHandoff

	onStop []func()
	// onShed are what code on the loop registered to let go of its own
	// spares when the loop sheds its own (shed.go).
	onShed   []func()
	shedding atomic.Bool // while onShed runs: ShedSpares from one of them does nothing
	// stopErr is what went wrong while the loop stopped (closing its
	// listener or its backend), for Runtime.Close; written by the loop
	// before done is closed.
	stopErr error
}

// newLoop returns loop id, to run on cpu, with its own parts allocated;
// its driver is set up on its thread (Runtime.setup), or by a test.
func newLoop(cfg Config, id, cpu int, h Handler, clock func() time.Time) *Loop {
	return &Loop{
		cfg: cfg, id: id, cpu: cpu, h: h, log: cfg.Logger, clock: clock,
		done: make(chan struct{}), lag: new(hist.Histogram),
	}
}

// OnStop registers f to run on the loop's thread when the loop stops, after
// its connections are closed and before its thread exits (a per-loop
// registry removes its entry here). It must be called on the loop's thread.
func (l *Loop) OnStop(f func()) { l.onStop = append(l.onStop, f) }

// ID returns the loop's index, from 0.
func (l *Loop) ID() int { return l.id }

// Runtime returns the runtime l belongs to: what a handler, a timer or a
// posted function uses to reach the other loops (Runtime.Loops, then Call
// or Post) and the runtime's listeners and counters. It is valid from the
// loop's first callback on, Config.LoopSetup included, also while New has
// not returned yet, and it is safe for concurrent use. Every loop takes
// calls and posted functions from the first handler callback, timer or
// posted function of any loop, since none of these runs before every loop
// is set up. LoopSetup may keep the loops and Call them (the calls go at
// the loop's first turn), but must not Post to a loop that may not be
// set up yet.
func (l *Loop) Runtime() *Runtime { return l.rt }

// CPU returns the CPU the loop's thread is pinned to.
func (l *Loop) CPU() int { return l.cpu }

// Backend returns the backend the loop runs (never Auto).
func (l *Loop) Backend() Backend { return l.backend }

// Now returns the loop's clock, read when the kernel returns and again
// after the turn's events are handled.
func (l *Loop) Now() time.Time { return l.now }

// run is the loop's body, on its locked and pinned thread.
func (l *Loop) run() {
	defer close(l.done)
	kernelErrors := 0
	for {
		if l.stopping && l.open == 0 && l.files.busy == 0 && l.d.idle() {
			break
		}
		if l.now.Sub(l.lastYield) >= yieldInterval {
			l.yield()
		}
		if err := l.turn(); err != nil {
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
	}
	// Past the last enter: what is pushed to other loops from here on
	// wakes them through their eventfds (a MSG_RING would never go out).
	l.calls.exiting = true
	for _, f := range l.onStop {
		l.safely("OnStop function", f)
	}
	l.postMu.Lock()
	l.postClosed = true
	l.postMu.Unlock()
	l.wakeMu.Lock()
	l.wakeClosed = true
	l.wakeMu.Unlock()
	l.forced = true // what is posted now finds the loop gone (adopt)
	l.runPosted()
	l.exitCalls()
	l.closeFiles()
	l.publish()
	if err := l.d.close(); err != nil {
		l.log.Error("percore: close loop backend", "loop", l.id, "err", err)
		l.stopErr = errors.Join(l.stopErr, fmt.Errorf("loop %d: close backend: %w", l.id, err))
	}
	l.bufs.releaseAll()
}

// turn is one loop turn, in its phases, the same on both backends:
//
//	prepare   hand over what the last turn's callbacks made: cross-loop
//	          calls, the GSO batches, the driver's prepare (its gathered
//	          writes, its sends). Callbacks can run here (a drained
//	          queue's OnDrain, a file send's done function, a failed
//	          call's done function), and they may schedule timers, call
//	          other loops, write.
//	enter     how long to wait is computed after prepare, and nothing a
//	          handler sees runs between that and the kernel's wait
//	          (driver.enter; it only looks when prepare's callbacks listed
//	          more work, which the next prepare sends). Then the clock.
//	dispatch  the driver hands over what the kernel reported
//	          (driver.dispatch)
//	after     the clock, then the expired timers
//
// So a timer due now, or a call made, by a callback of the turn's own
// prepare is never slept past.
func (l *Loop) turn() error {
	l.prepare()
	timeout := l.waitTimeout()
	l.publish()
	if err := l.d.enter(timeout); err != nil {
		return err
	}
	l.now = l.clock() // the kernel returned: the turn's clock
	l.d.dispatch()
	now := l.clock()
	l.lag.Record(int64(now.Sub(l.now)))
	l.now = now
	l.cnt[sTurns]++
	l.runTimers()
	return nil
}

// prepare is the turn's first phase: everything the last turn's callbacks
// made goes to the kernel and to the other loops.
func (l *Loop) prepare() {
	if len(l.calls.dirty) > 0 || len(l.calls.held) > 0 {
		l.flushCalls()
	}
	if len(l.pk.gso) > 0 {
		l.flushGSO() // the turn's GSO batches, before the driver sends
	}
	l.d.prepare()
}

// waitTimeout is how long the turn may wait in the kernel: until the next
// timer (none: no limit), not at all when prepare's callbacks made calls or
// datagram batches that the next prepare hands over, and at most
// heldCallsWait while a queue to another loop is full.
func (l *Loop) waitTimeout() time.Duration {
	if len(l.calls.dirty) > 0 || len(l.pk.gso) > 0 {
		return 0
	}
	timeout := time.Duration(-1)
	if t := l.timers.next(); t != nil {
		timeout = max(t.when.Sub(l.clock()), 0)
	}
	if len(l.calls.held) > 0 && (timeout < 0 || timeout > heldCallsWait) {
		// A full queue to another loop: try again soon, whether or not
		// anything wakes this one.
		timeout = heldCallsWait
	}
	return timeout
}

// beginPass and endPass bracket a driver's pass whose reports to the
// loop cause callbacks (OnDrain, OnClose, a file send's done function):
// they run at endPass, once the pass has put its own state in order,
// as they run once a handler's callback returns.
func (l *Loop) beginPass() { l.depth++ }

func (l *Loop) endPass() {
	l.depth--
	if l.depth == 0 && len(l.notes) > 0 {
		l.runNotes()
	}
}

// heldCallsWait bounds a loop's wait while a queue to another loop is full.
const heldCallsWait = time.Millisecond

// maxKernelErrors is how many consecutive backend failures a stopping loop
// tolerates before it exits without waiting for the kernel.
const maxKernelErrors = 16

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
	l.lastYield = l.clock()
}

// The callbacks. Every call into user code goes through one of these, so
// that a panic is contained, and so that the OnClose and OnDrain calls a
// callback causes (by closing, by writing) run once it has returned, on
// both backends alike.

// noteKind says which deferred callback a note is.
type noteKind uint8

const (
	noteClose      noteKind = iota // the handler's OnClose
	noteDrain                      // the handler's OnDrain
	noteDialFailed                 // a failed dial's done function
	noteFileSent                   // a file send's done function (sendfile.go)
)

// note is a callback waiting for the callback that caused it to return.
type note struct {
	kind noteKind
	c    *Conn
	err  error
	done func(*Conn, error)
	sf   *fileSend
}

// notify runs n, at once when no user callback is running, else when the
// outermost one returns.
func (l *Loop) notify(n note) {
	l.notes = append(l.notes, n)
	if l.depth == 0 {
		l.runNotes()
	}
}

// runNotes runs the waiting notes in order, and those they cause after
// them. It counts as a callback itself, so that the notes it runs queue
// theirs behind them instead of running them inside.
func (l *Loop) runNotes() {
	l.depth++
	defer func() { l.depth-- }()
	for i := 0; i < len(l.notes); i++ {
		n := l.notes[i]
		l.notes[i] = note{}
		switch n.kind {
		case noteClose:
			if ch, ok := n.c.h.(CloseHandler); ok {
				l.safely("OnClose", func() { ch.OnClose(n.c, n.err) })
			}
		case noteDrain:
			if dh, ok := n.c.h.(DrainHandler); ok && !n.c.closed() {
				l.depth++
				func() {
					defer l.endCall(n.c)
					dh.OnDrain(n.c)
				}()
			}
		case noteDialFailed:
			l.safely("dial done function", func() { n.done(nil, n.err) })
		case noteFileSent:
			l.safely("file send done function", func() { n.sf.done(n.sf.sent, n.err) })
		}
	}
	l.notes = l.notes[:0]
}

// safely runs f, a callback that does not belong to one connection (a
// timer, a posted function, OnClose), recovering a panic: it is logged
// with its stack and counted, and the loop goes on.
func (l *Loop) safely(what string, f func()) {
	l.depth++
	defer l.endSafely(what)
	f()
}

// safelyConn is safely for a function of a connection (a connection's
// timer: Timer.cf), without a closure to bind the two.
func (l *Loop) safelyConn(what string, f func(*Conn), c *Conn) {
	l.depth++
	defer l.endSafely(what)
	f(c)
}

// endSafely is deferred by safely and safelyConn, with l.depth raised: a
// panic is recovered, logged and counted, and the notes the call caused
// run once the outermost call has returned.
func (l *Loop) endSafely(what string) {
	if r := recover(); r != nil {
		l.cnt[sPanics]++
		l.log.Error("percore: panic in "+what, "loop", l.id, "panic", r, "stack", string(debug.Stack()))
	}
	l.depth--
	if l.depth == 0 && len(l.notes) > 0 {
		l.runNotes()
	}
}

// endCall is deferred around a handler callback for c (with l.depth raised
// before the call): a panic closes only c, and the notes the callback
// caused run once the outermost callback has returned.
func (l *Loop) endCall(c *Conn) {
	if r := recover(); r != nil {
		l.cnt[sPanics]++
		l.log.Error("percore: handler panicked; closing its connection", "loop", l.id, "panic", r,
			"stack", string(debug.Stack()))
		l.closeConn(c, c.opError("read", ErrHandlerPanic))
	}
	l.depth--
	if l.depth == 0 && len(l.notes) > 0 {
		l.runNotes()
	}
}

// callOnData hands data to c's handler.
func (l *Loop) callOnData(c *Conn, data []byte) {
	l.depth++
	defer l.endCall(c)
	c.h.OnData(c, data)
}

// callOnOpen runs c's handler's OnOpen, if it has one.
func (l *Loop) callOnOpen(c *Conn) {
	oh, ok := c.h.(OpenHandler)
	if !ok {
		return
	}
	l.depth++
	defer l.endCall(c)
	oh.OnOpen(c)
}

// callOnEOF runs c's handler's OnEOF and reports whether it has one.
func (l *Loop) callOnEOF(c *Conn) bool {
	eh, ok := c.h.(EOFHandler)
	if !ok {
		return false
	}
	l.depth++
	defer l.endCall(c)
	eh.OnEOF(c)
	return true
}

// callOnShutdown runs c's handler's OnShutdown, if it has one.
func (l *Loop) callOnShutdown(c *Conn) {
	sh, ok := c.h.(ShutdownHandler)
	if !ok {
		return
	}
	l.depth++
	defer l.endCall(c)
	sh.OnShutdown(c)
}
