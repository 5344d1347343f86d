//go:build linux

package runtime

// The io_uring driver's wake-ups: the eventfd read the ring keeps armed,
// and the MSG_RING messages io_uring loops wake each other with, both
// under one sys.Waker flag.

func (d *uringDriver) armWake() error {
	return d.r.PrepareRead(d.waker.Fd(), d.wakeBuf, 0, userData(kindWake, 0, 0))
}

func (d *uringDriver) wake() { _ = d.waker.Wake() }

// wakeAnyway signals the eventfd with the flag set: a wake-up is on its
// way now, whatever was claimed before.
func (d *uringDriver) wakeAnyway() {
	d.waker.Claim()
	_ = d.waker.Signal()
}

// wakeFrom wakes this loop on behalf of another loop's thread through the
// caller's own ring (a MSG_RING submitted with its next enter, no system
// call of its own) when both loops run io_uring; otherwise, or when the
// caller's submission queue is full, it reports false and the caller
// writes the eventfd. The MSG_RING's own completion on the caller names
// this loop, so that a failed one wakes it through the eventfd instead
// (msgFailed).
func (d *uringDriver) wakeFrom(src driver) bool {
	s, ok := src.(*uringDriver)
	if !ok || !d.msgRing || !s.msgRing {
		return false
	}
	if !d.waker.Claim() {
		return true // a wake-up is on its way already
	}
	if s.r.PrepareMsgRing(d.r.Fd(), 0, userData(kindMsgWake, 0, 0), userData(kindMsgSent, uint32(d.id), 0)) != nil {
		d.waker.Woke()
		return false
	}
	return true
}

// msgFailed handles the failure of a MSG_RING this loop sent to wake loop
// id: the target's wake-up flag, set for it, is cleared and the target
// woken through its eventfd; otherwise every later wake-up of it would be
// swallowed.
func (d *uringDriver) msgFailed(id uint32) { d.l.rewake(id) }
