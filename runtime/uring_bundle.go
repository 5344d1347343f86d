//go:build linux

package runtime

import (
	"fmt"

	"github.com/percore/percore/ring"
)

// The io_uring driver's bundle receives (UringBundles, docs/decisions/0071).
// A connection's multishot receive is armed as a bundle: one completion
// may fill several buffers of the loop's provided-buffer ring, in ring
// order, and names only the first. The ring's own record of which id sits
// in which slot (ring.BufRing.Bundle) names the rest; it stays true only
// while every completion that consumed buffers of the ring, bundle or not
// (the throttled single receive, a receive for a connection closed or
// gone), is read through it in the order the completions arrive, so every
// such completion comes here (received, dropPart). Each buffer of a
// bundle is then delivered as its own part, in order, exactly as a
// receive of one buffer is (deliverOrDefer): a handler that closes,
// pauses or goes over its turn budget in the middle of a bundle has the
// rest dropped, or held back in order.

// bundleBuf is one buffer of a bundle completion: its id and the bytes the
// completion left in it.
type bundleBuf struct {
	id uint16
	n  int32
}

// bundleReader reads the buffers of a completion from the loop's ring:
// ringBundles over *ring.BufRing, or the model's stand-in.
type bundleReader interface {
	// bundle appends to dst the buffers completion c filled, in the order
	// the kernel filled them; none for a completion without a buffer.
	// An error says the ring's record and the completions disagree (one
	// skipped or read out of order): a fault of the driver.
	bundle(c ring.Completion, dst []bundleBuf) ([]bundleBuf, error)
}

// ringBundles reads bundles with ring.BufRing.Bundle.
type ringBundles struct{ br *ring.BufRing }

func (r ringBundles) bundle(c ring.Completion, dst []bundleBuf) ([]bundleBuf, error) {
	u, err := r.br.Bundle(c)
	if err != nil {
		return dst, err
	}
	for i := range u.Len() {
		dst = append(dst, bundleBuf{id: u.ID(i), n: int32(len(u.Data(i)))})
	}
	return dst, nil
}

// useBundles makes the driver read its receive completions as bundles
// from rb and arm its multishot receives as bundles. The driver calls it
// before any receive is armed.
func (d *uringDriver) useBundles(rb bundleReader) {
	d.bundles = rb
	d.bundleBufs = make([]bundleBuf, 0, 16)
}

// readBundle returns the buffers receive completion e filled, in order;
// its result is valid until the next call (no completion is dispatched
// from inside a callback: an install that waits stashes what it reaps,
// uring_fixed_install.go).
//
// A completion the record refuses (one skipped or read out of order: a
// fault of the driver, or of a kernel that orders bundles wrongly)
// leaves the record behind the kernel for good: every later completion
// of the ring would be refused too, or worse, read from the wrong
// buffers. So the first refusal breaks the driver: no completion is read
// from then on, and the next enter reports the error once, which stops
// the loop (its connections closed, as on any kernel error).
func (d *uringDriver) readBundle(e *ring.Completion) ([]bundleBuf, error) {
	if d.bundleErr != nil {
		return nil, d.bundleErr
	}
	bufs, err := d.bundles.bundle(*e, d.bundleBufs[:0])
	d.bundleBufs = bufs[:0]
	if err != nil {
		d.bundleErr = fmt.Errorf("receive bundles: %w", err)
		return nil, d.bundleErr
	}
	if len(bufs) > 1 {
		d.cnt[sBundles]++
		d.cnt[sBundleBuffers] += uint64(len(bufs))
	}
	return bufs, nil
}

// bundleFailed returns, once, the error that broke the driver's reading of
// bundles (readBundle), for enter to report.
func (d *uringDriver) bundleFailed() error {
	if d.bundleErr == nil || d.bundleErrTold {
		return nil
	}
	d.bundleErrTold = true
	return d.bundleErr
}

// receivedBundle delivers the buffers of receive completion e (of e.Res >
// 0 bytes, with a buffer) to the open connection c, each as its own part.
func (d *uringDriver) receivedBundle(c *Conn, e *ring.Completion) {
	bufs, err := d.readBundle(e)
	if err == nil && len(bufs) == 0 {
		err = errRecvNoBuffer // the record names none for a completion that has one
	}
	if err != nil {
		d.l.fail(c, "read", err)
		return
	}
	if last := bufs[len(bufs)-1]; c.ur.flags&ufThrottled != 0 && int(last.n) < d.bufs.Size() {
		c.ur.flags &^= ufThrottled // it drained its socket: multishot again
	}
	for _, b := range bufs {
		// Closed, paused or over budget by the callback of the buffer
		// before: deliverOrDefer drops or holds back the rest, in order.
		d.deliverOrDefer(c, b.id, d.bufs.Bytes(b.id, int(b.n)))
	}
}

// dropBundle gives back every buffer of a receive completion that nobody
// reads (its connection closed or gone).
func (d *uringDriver) dropBundle(e *ring.Completion) {
	bufs, err := d.readBundle(e)
	if err != nil {
		return // the driver is broken (readBundle): enter reports it
	}
	for _, b := range bufs {
		d.bufs.Recycle(b.id)
	}
}
