package runtime

import (
	"time"

	"github.com/percore/percore/ring"
)

// SetStopWarnEvery changes how often Close warns about a loop that does not
// stop, and returns a function that restores it.
func SetStopWarnEvery(d time.Duration) (restore func()) {
	old := stopWarnEvery
	stopWarnEvery = d
	return func() { stopWarnEvery = old }
}

// Dialing returns the loop's connection whose connect is in flight, or nil.
// On the loop's thread.
func Dialing(l *Loop) *Conn {
	for _, c := range l.conns {
		if c != nil && c.state&stConnecting != 0 {
			return c
		}
	}
	return nil
}

// DialStateHeld reports whether c still references its dial state (the
// socket address a connect in flight reads). On the loop's thread.
func DialStateHeld(c *Conn) bool { return c.dialing() != nil }

// SlotFreed reports whether c's slot has been given back. On the loop's
// thread.
func SlotFreed(c *Conn) bool { return c.loop.conns[c.slot] != c }

// InjectRecvWithoutBuffer hands c's io_uring driver a receive completion
// with data and the "more" flag but no provided buffer. It reports false on
// another backend. On the loop's thread.
func InjectRecvWithoutBuffer(c *Conn) bool {
	d, ok := c.loop.d.(*uringDriver)
	if !ok {
		return false
	}
	const cqeFlagMore = 1 << 1 // IORING_CQE_F_MORE, and no IORING_CQE_F_BUFFER
	e := ring.Completion{UserData: userData(kindRecv, c.slot, c.gen), Res: 7, Flags: cqeFlagMore}
	d.complete(&e)
	return true
}

// StopLoop stops l alone, as Runtime.Close does for each loop. On l's
// thread.
func StopLoop(l *Loop) { l.forceStop(ErrShutdown) }

// LoopExited reports whether l has exited its cross-loop calls for good.
func LoopExited(l *Loop) bool { return l.calls.exited.Load() }

// EventfdWake returns cfg with io_uring loops set to wake each other
// through their eventfds instead of MSG_RING when on, to compare the two.
func EventfdWake(cfg Config, on bool) Config {
	cfg.eventfdWake = on
	return cfg
}

// SetSendFallback makes every Conn.SendFile on rt's loops read and send
// instead of splicing or calling sendfile. It returns once every loop has
// taken it.
func SetSendFallback(rt *Runtime, on bool) {
	for _, l := range rt.Loops() {
		done := make(chan struct{})
		if err := l.Post(func() { l.sendFallback = on; close(done) }); err != nil {
			panic(err)
		}
		<-done
	}
}

// HoldsOutQueue reports whether c holds an outbound queue (decision 0072).
// On the loop's thread.
func HoldsOutQueue(c *Conn) bool { return c.out != nil }

// SetHeapReturnClock makes the process's return after storms
// (heapreturn.go) tick when ticks delivers, call stepped after each tick's
// step, and call free instead of debug.FreeOSMemory, for the runtimes
// started from now on, with the settler as in a new process; it returns
// a function that restores them. Call it
// while no runtime with the return on is open, and restore once they are
// closed.
func SetHeapReturnClock(ticks <-chan time.Time, stepped, free func()) (restore func()) {
	p := &procReturn
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		panic("SetHeapReturnClock with a runtime open")
	}
	oldTicks, oldStepped, oldFree := p.ticks, p.stepped, p.free
	p.ticks = func() (<-chan time.Time, func()) { return ticks, func() {} }
	p.stepped, p.free = stepped, free
	// The settler starts afresh, as in a new process: a test's clock
	// does not follow the last test's returns.
	p.s = settler{last: p.retired, returned: p.retired, lastB: p.retiredB}
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.ticks, p.stepped, p.free = oldTicks, oldStepped, oldFree
	}
}

// HoldsSideState reports whether c holds its side state (connSide:
// decisions 0065, 0075). On the loop's thread.
func HoldsSideState(c *Conn) bool { return c.side != nil }
