//go:build linux

package runtime

import (
	"math/bits"

	"github.com/percore/percore/ring"
)

// The io_uring driver's incremental receive buffers (UringIncrementalBuffers,
// docs/decisions/0069). The loop's provided-buffer ring is registered with
// IOU_PBUF_RING_INC: the kernel fills the buffer at the ring's head a
// receive at a time, each receive (of any connection) taking only what
// arrived, and a completion with BufMore leaves the rest of the buffer
// with the kernel. A buffer therefore holds the parts of several receives
// of several connections, and goes back to the ring only when every
// reference to it has ended: the kernel's (the completion that ends the
// buffer, without BufMore) and each part's the loop holds (a receive
// being delivered, or one waiting for a later turn in a connection's
// deferred receives: uring_recv.go). Handlers see a part only during their
// callback, and what they keep they copy (DESIGN.md; runtime/frame), so a
// part is held past its completion only by a deferred receive.
//
// Without the feature the same calls treat each buffer as one part
// (takePart, releasePart), so that the receive path is one path.

// IncrementalBufferSize is the size of each buffer of an incremental ring
// (UringIncrementalBuffers), unless Config.BufferSize is larger: large
// enough that a 16 KiB message is rarely split between two buffers (at
// most one split in four such receives), and that small receives of many
// connections share a buffer.
const IncrementalBufferSize = 64 << 10

// incGeometry returns the count and size of an incremental ring for a loop
// whose plain ring would have count buffers of size bytes: buffers of
// max(size, IncrementalBufferSize), as many as hold a quarter of the plain
// ring's bytes (rounded down to a power of two, at least two): 32 of 64
// KiB for the default 512 of 16 KiB. An incremental ring keeps resident
// every page of the buffers it cycles through, where a plain ring keeps
// the pages its receives filled (one per buffer for small ones), so the
// plain ring's bytes would keep four times its resident memory under
// small requests; a quarter keeps the same under small requests and a
// quarter under large ones, and still takes far more small receives
// between two publishes (docs/performance.md, "io_uring features, part
// 6", and decision 0069).
func incGeometry(count, size int) (int, int) {
	incSize := max(size, IncrementalBufferSize)
	n := max(count*size/4/incSize, 2)
	return 1 << (bits.Len(uint(n)) - 1), incSize
}

// newRecvBufRing registers the loop's receive ring on r: incremental with
// UringIncrementalBuffers (incGeometry's), else cfg's plain one, which a
// ring that refuses the incremental one (the probe said it would take it)
// gets too, with the bit taken off feats. It returns the ring and its
// count of buffers.
func newRecvBufRing(r *ring.Ring, cfg Config, feats *UringFeatures) (*ring.BufRing, int, error) {
	if *feats&UringIncrementalBuffers != 0 {
		count, size := incGeometry(cfg.BufferCount, cfg.BufferSize)
		if br, err := r.NewIncrementalBufRing(0, count, size); err == nil {
			return br, count, nil
		}
		*feats &^= UringIncrementalBuffers
	}
	br, err := r.NewBufRing(0, cfg.BufferCount, cfg.BufferSize)
	return br, cfg.BufferCount, err
}

// partReceiver is what the driver needs of an incremental ring beyond
// recvBuffers: *ring.BufRing, or the model's stand-in.
type partReceiver interface {
	// Received returns the bytes completion c received into buffer id,
	// and whether c is the last completion into it (ring.BufRing.Received).
	Received(id uint16, c ring.Completion) (p []byte, last bool)
}

// incParts is the loop's record of an incremental ring's buffers: for
// each, its references, 1 while the kernel may fill more of it, plus one
// per part the loop holds. A buffer is recycled when they reach 0, and
// counts the kernel's reference again from then on.
type incParts struct {
	rb       partReceiver
	refs     []int32
	held     int    // parts the loop holds, over every buffer
	recycled uint64 // buffers given back to the kernel (the tests' sign of sharing)
	// copyHeld copies every deferred part out (into a pooled buffer) and
	// releases it at once, where the loop holds parts by reference: the
	// alternative decision 0069 measured (BenchmarkIncrementalHeld).
	copyHeld bool
}

// useIncremental makes the driver read its buffers (bufs, of count
// buffers) as parts of an incremental ring rb. The driver calls it before
// any receive is armed: every buffer starts out the kernel's.
func (d *uringDriver) useIncremental(rb partReceiver, count int) {
	d.inc = &incParts{rb: rb, refs: make([]int32, count)}
	for i := range d.inc.refs {
		d.inc.refs[i] = 1
	}
}

// recvBufCount is how many buffers the loop's receive ring holds.
func (d *uringDriver) recvBufCount() int {
	if d.inc != nil {
		return len(d.inc.refs)
	}
	return d.cfg.BufferCount
}

// takePart returns the bytes receive completion e (of e.Res > 0 bytes)
// left in buffer id, now a part the loop holds until releasePart, and
// whether the buffer had room left after them (the receive took what the
// socket held, not what the buffer could: the throttle's sign that the
// connection drained its socket).
func (d *uringDriver) takePart(id uint16, e *ring.Completion) (p []byte, room bool) {
	if d.inc == nil {
		n := max(int(e.Res), 0)
		return d.bufs.Bytes(id, n), n < d.bufs.Size()
	}
	p, last := d.inc.rb.Received(id, *e)
	d.inc.held++
	if last {
		// The kernel's reference ends as the part's begins.
		return p, false
	}
	d.inc.refs[id]++
	return p, true
}

// releasePart gives back the loop's part of buffer id: the buffer goes
// back to the kernel (staged for the next Publish) with its last reference.
func (d *uringDriver) releasePart(id uint16) {
	if d.inc != nil {
		d.inc.held--
		if d.inc.refs[id]--; d.inc.refs[id] > 0 {
			return
		}
		d.inc.refs[id] = 1 // the kernel's once published
		d.inc.recycled++
	}
	d.bufs.Recycle(id)
}

// deliverOrDefer delivers p, a part of buffer id, to c now, or defers it
// behind c's waiting receives (over its turn budget, or paused). With
// incremental buffers a part larger than BufferSize goes as several of at
// most BufferSize, each a part of its own: a receive into a plain ring
// (and a read of the epoll loop) is never larger, and the turn budget is
// counted in deliveries of that size.
func (d *uringDriver) deliverOrDefer(c *Conn, id uint16, p []byte) {
	for len(p) > 0 {
		q := p
		if d.inc != nil && len(p) > d.cfg.BufferSize {
			q = p[:d.cfg.BufferSize]
			d.inc.refs[id]++ // the rest is a part of its own
			d.inc.held++
		}
		p = p[len(q):]
		switch {
		case c.closed():
			d.releasePart(id) // closed by the callback of the part before
		case c.ur.hasWaiting() || c.readPaused() || d.overBudget(c):
			d.deferRecv(c, id, q, int32(len(q)))
		default:
			d.deliverBuf(c, id, q)
		}
	}
}

// copiesHeld reports whether deferred receives copy their parts out
// rather than hold them (incParts.copyHeld).
func (d *uringDriver) copiesHeld() bool { return d.inc != nil && d.inc.copyHeld }

// dropPart takes and releases at once the part of a receive completion
// that nobody reads (its connection closed or gone).
func (d *uringDriver) dropPart(id uint16, e *ring.Completion) {
	if d.bundles != nil {
		d.dropBundle(e) // every buffer it filled (uring_bundle.go)
		return
	}
	d.takePart(id, e)
	d.releasePart(id)
}

// partsHeld counts the parts of incremental buffers the loop holds (0
// without the feature): the model's oracle checks it against the deferred
// receives.
func (d *uringDriver) partsHeld() int {
	if d.inc == nil {
		return 0
	}
	return d.inc.held
}
