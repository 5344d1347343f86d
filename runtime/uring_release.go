//go:build linux

package runtime

import (
	"time"
)

// The io_uring driver's release of a closed connection: cancels by user
// data, then the close, with a retry next turn when the submission queue
// takes no entry; the slot is freed with the last completion.

// retryWait bounds a loop's wait while a connection's release waits for
// room in the submission queue.
const retryWait = time.Millisecond

// cancel queues a cancel of c's operation of kind, found by its user data:
// the kernel looks that up in a hash table, where a cancel by descriptor
// walks every request the ring holds (closing n connections that way costs
// n², measured in docs/performance.md). It reports false when the
// submission queue took no entry.
func (d *uringDriver) cancel(c *Conn, kind uint8) bool {
	if d.r.PrepareCancel(userData(kind, c.slot, c.gen), userData(kindCancel, c.slot, c.gen)) != nil {
		return false
	}
	c.ur.ops++
	return true
}

// release cancels what the kernel still holds of c (the armed receive, a
// send or a connect in flight: their memory stays referenced by c until
// they complete) and queues the close of its descriptor behind the
// cancels. Should the submission queue take no entry, c goes on the retry
// list and release runs again next turn, after the completions are reaped:
// until its close is queued, c keeps its descriptor open, so that its
// number cannot go to a new socket that an entry still queued for c would
// then reach, and its slot, so that the loop does not exit with its
// receive still armed.
func (d *uringDriver) release(c *Conn) {
	if !holdsSocket(c) {
		return
	}
	u := &c.ur
	d.dropWaiting(c)
	if !d.cancelRecv(c) ||
		!d.cancelSend(c) || // uring_zc.go: a zero-copy send's user data is its own
		!d.cancelOnce(c, c.state&stConnecting != 0, 0, kindConnect) ||
		!d.cancelOnce(c, c.sendingFile(), 0, kindSplice) ||
		!d.cancelOnce(c, c.sendingFile(), 0, kindSplicePoll) ||
		!d.closeFd(c) {
		if u.flags&ufReleasing == 0 {
			u.flags |= ufReleasing
			d.retry = append(d.retry, c)
		}
		return
	}
	u.flags &^= ufReleasing
	c.fd = -1
	if u.ops == 0 {
		d.l.freeSlot(c)
	}
}

// cancelOnce cancels c's operation of kind if inFlight and its cancel is
// not queued yet (flag; 0 for an operation that a release cancels once
// anyway); it reports false when the cancel could not be queued.
func (d *uringDriver) cancelOnce(c *Conn, inFlight bool, flag uringFlags, kind uint8) bool {
	if !inFlight || c.ur.flags&flag != 0 {
		return true
	}
	if !d.cancel(c, kind) {
		return false
	}
	c.ur.flags |= flag
	return true
}

// closeFd queues the close of c's slot, if it has one (uring_fixed.go),
// and of its descriptor, if it has one.
func (d *uringDriver) closeFd(c *Conn) bool {
	if !d.closeSlot(c) {
		return false
	}
	if c.fd < 0 {
		return true
	}
	if d.r.PrepareClose(int(c.fd), userData(kindClose, c.slot, c.gen)) != nil {
		return false
	}
	c.ur.ops++
	return true
}

// retryReleases runs release again for the connections whose cancels or
// close found the submission queue full, after the shutdown of a slot
// that found it full (uring_fixed.go).
func (d *uringDriver) retryReleases() {
	retry := d.retry
	d.retry = d.spareRetry[:0]
	for i, c := range retry {
		retry[i] = nil
		if c.ur.flags&ufShutRetry != 0 {
			d.retryShutdown(c)
		}
		if c.ur.flags&ufReleasing != 0 {
			c.ur.flags &^= ufReleasing
			d.release(c)
		}
	}
	d.spareRetry = retry[:0]
}
