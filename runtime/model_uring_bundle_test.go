package runtime

import (
	"errors"
	"unsafe"

	"github.com/percore/percore/ring"
)

// The stand-in kernel's bundle receives (IORING_RECVSEND_BUNDLE), for the
// connection model with UringBundles: the ring keeps its buffers in ring
// order (recycled, then published, in that order), and a receive armed as
// a bundle fills several from the front of the ring in one completion,
// every one full but perhaps the last, as many as the split the model
// draws (sometimes less than the socket holds, sometimes fewer than it
// wanted because the ring ran short); a receive not armed as a bundle (the
// throttled single receive) fills one. The completion names only its
// first buffer. The oracle's side: the driver reads every completion of
// the ring through bundle, in the order they were posted (a completion
// skipped, read twice or out of order is a fault, as the real ring's record
// would go wrong), and the rest is the model's usual oracle: bytes in
// order, each buffer recycled once and only while the loop holds it, none
// held at the end.

// simBundles is simBufs' ring order, with UringBundles.
type simBundles struct {
	order  []uint16      // the published buffers, in ring order: the kernel fills from the front
	staged []uint16      // recycled and not yet published, in order
	posted [][]bundleBuf // the buffers of each completion posted and not yet read, in the order posted

	// For the model's record of what it reached (bundlePart): each
	// buffer's place in the completion that last handed it over, and how
	// many completions the driver has read.
	place []bundlePlace
	reads uint64
	read  func(userData uint64) // told of each completion the driver reads, if set
}

// bundlePlace is a buffer's place in its completion: the part it is, of
// how many, and the number of the driver's read of that completion (one
// more than the reads before it).
type bundlePlace struct {
	part, of int
	read     uint64
}

// makeBundles gives b a ring order, every buffer published in id order.
func (b *simBufs) makeBundles() {
	b.bun = &simBundles{place: make([]bundlePlace, len(b.mem))}
	for i := range b.mem {
		b.bun.order = append(b.bun.order, uint16(i))
	}
}

// fillBundle hands the loop the buffers at the front of the ring holding
// the start of p: one when bundle is false, else as many as p needs (all
// full but the last) while the ring has them. It returns the first
// buffer's id and the bytes taken; ok is false when the ring is empty.
func (b *simBufs) fillBundle(p []byte, bundle bool) (id uint16, n int, ok bool) {
	bn := b.bun
	if len(bn.order) == 0 {
		return 0, 0, false
	}
	size := b.Size()
	var bufs []bundleBuf
	for len(p) > 0 && len(bn.order) > 0 && (bundle || len(bufs) == 0) {
		i := bn.order[0]
		bn.order = bn.order[1:]
		if b.state[i] != bufKernel {
			b.k.fault("buffer %d in the ring's order and not the kernel's (state %d)", i, b.state[i])
		}
		k := copy(b.mem[i], p[:min(len(p), size)])
		p = p[k:]
		n += k
		b.state[i] = bufLoop
		bufs = append(bufs, bundleBuf{id: i, n: int32(k)})
	}
	bn.posted = append(bn.posted, bufs)
	return bufs[0].id, n, true
}

// errSimBundle is the stand-in's answer to a completion read out of turn
// (the fault is recorded too).
var errSimBundle = errors.New("a bundle read out of turn")

// bundle is ring.BufRing.Bundle's stand-in (bundleReader): c must be the
// next completion of the ring posted with buffers.
func (b *simBufs) bundle(c ring.Completion, dst []bundleBuf) ([]bundleBuf, error) {
	id, ok := c.Buffer()
	if !ok || c.Res <= 0 {
		return dst, nil
	}
	bn := b.bun
	if len(bn.posted) == 0 {
		b.k.fault("a completion of %d bytes in buffer %d read as a bundle, and the kernel posted none not yet read", c.Res, id)
		return dst, errSimBundle
	}
	u := bn.posted[0]
	total := 0
	for _, x := range u {
		total += int(x.n)
	}
	if u[0].id != id || total != int(c.Res) {
		b.k.fault("a completion of %d bytes from buffer %d read as a bundle where the next one posted is %d bytes from buffer %d: "+
			"a completion of the ring skipped or read out of order", c.Res, id, total, u[0].id)
		return dst, errSimBundle
	}
	bn.posted = bn.posted[1:]
	if bn.read != nil {
		bn.read(c.UserData)
	}
	bn.reads++
	for i, x := range u {
		bn.place[x.id] = bundlePlace{part: i, of: len(u), read: bn.reads}
	}
	return append(dst, u...), nil
}

// bundlePart finds the buffer that data (given to OnData) lies in, and
// tells its place in its completion: more is true when parts of the same
// completion come after it, late when its completion was not the last one
// the driver read (the part was held back: a pause, or the turn's budget,
// stopped the completion's delivery before it). ok is false without
// bundles, or for bytes that are not in a buffer (a copy).
func (b *simBufs) bundlePart(data []byte) (more, late, ok bool) {
	bn := b.bun
	if bn == nil || len(data) == 0 {
		return false, false, false
	}
	at := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	for i, m := range b.mem {
		start := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
		if at >= start && at < start+uintptr(len(m)) {
			pl := bn.place[i]
			return pl.part < pl.of-1, pl.read != bn.reads, pl.of > 0
		}
	}
	return false, false, false
}

// inCompletions counts the buffers of the completions posted and not yet
// read.
func (bn *simBundles) inCompletions() int {
	n := 0
	for _, u := range bn.posted {
		n += len(u)
	}
	return n
}
