package runtime

import (
	"time"

	"github.com/percore/percore/ring"
)

// SetOpenRing replaces how loops open their io_uring, for the fallback
// tests, and returns a function that restores it.
func SetOpenRing(f func(ring.Config) (*ring.Ring, error)) (restore func()) {
	old := openRing
	openRing = f
	return func() { openRing = old }
}

// SetStopWarnEvery changes how often Close warns about a loop that does not
// stop, and returns a function that restores it.
func SetStopWarnEvery(d time.Duration) (restore func()) {
	old := stopWarnEvery
	stopWarnEvery = d
	return func() { stopWarnEvery = old }
}

// SetPrepareFault makes io_uring loops fail to queue a connection's cancels
// ("cancel") and closes ("close") while f returns true, as a submission
// queue the kernel takes nothing from would; it returns a function that
// removes the fault.
func SetPrepareFault(f func(op string) bool) (restore func()) {
	g := func(kind uint8) bool {
		if kind == kindClose {
			return f("close")
		}
		return f("cancel")
	}
	prepareFault.Store(&g)
	return func() { prepareFault.Store(nil) }
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
func DialStateHeld(c *Conn) bool { return c.dial != nil }

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
	d.dispatch(&e)
	return true
}

// StopLoop stops l alone, as Runtime.Close does for each loop. On l's
// thread.
func StopLoop(l *Loop) { l.forceStop(ErrShutdown) }

// LoopExited reports whether l has exited its cross-loop calls for good.
func LoopExited(l *Loop) bool { return l.calls.exited.Load() }

// SetEventfdWake makes io_uring loops wake each other through the eventfd
// instead of MSG_RING while on is true, and returns a function that
// restores the default.
func SetEventfdWake(on bool) (restore func()) {
	eventfdWakeOnly.Store(on)
	return func() { eventfdWakeOnly.Store(false) }
}

// SetSendFallback makes every Conn.SendFile read and send instead of
// splicing or calling sendfile, and returns a function that restores it.
func SetSendFallback(on bool) (restore func()) {
	old := forceSendFallback.Swap(on)
	return func() { forceSendFallback.Store(old) }
}
