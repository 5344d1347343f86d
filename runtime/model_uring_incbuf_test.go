package runtime

import (
	"github.com/percore/percore/ring"
)

// The stand-in kernel's incremental provided buffers (IOU_PBUF_RING_INC),
// for the connection model with UringIncrementalBuffers: the kernel fills
// the buffer at the head of the ring a receive at a time, each taking what
// it needs (at most the room left), so that the receives of several
// connections are parts of one buffer; a completion that leaves room has
// BufMore and the buffer stays the kernel's, the one that fills it ends it
// and hands it to the loop. The oracle's side: every completion's part is
// the next one the kernel put in its buffer, read once (Received); a buffer
// is recycled only once the kernel has ended it (Recycle); the loop holds
// exactly the parts its deferred receives account for, a filled buffer
// only while a part of it waits (checkParts); and at the end every part
// is released and every buffer back with the kernel (settleParts).

const cqeBufMore = 1 << 4 // IORING_CQE_F_BUF_MORE

// simPart is a part of a buffer the kernel handed over in a completion.
type simPart struct{ off, n int }

// incBufs is simBufs' state of an incremental ring.
type incBufs struct {
	filled []int       // the kernel's fill of each buffer
	parts  [][]simPart // the parts handed over and not yet read with Received, in order
	head   int         // the buffer the kernel fills, -1 for none yet
	owner  []int       // the connection whose part came last into each buffer (-1: none)
}

// makeIncremental makes b an incremental ring.
func (b *simBufs) makeIncremental() {
	n := len(b.mem)
	b.inc = &incBufs{filled: make([]int, n), parts: make([][]simPart, n), head: -1, owner: make([]int, n)}
	for i := range b.inc.owner {
		b.inc.owner[i] = -1
	}
}

// fillPart hands the loop a part of the buffer at the ring's head holding
// the start of p (as much as the buffer has room for) for connection
// conn: the buffer's id, the bytes taken, whether the buffer has room
// left (BufMore) and whether another connection's part came before in the
// same buffer; ok is false when no buffer is left.
func (b *simBufs) fillPart(p []byte, conn int) (id uint16, n int, more, shared, ok bool) {
	in := b.inc
	if in.head < 0 {
		i := -1
		for j, s := range b.state {
			if s == bufKernel {
				i = j
				break
			}
		}
		if i < 0 {
			return 0, 0, false, false, false
		}
		in.head = i
	}
	i := in.head
	off := in.filled[i]
	n = min(len(p), len(b.mem[i])-off)
	copy(b.mem[i][off:], p[:n])
	in.filled[i] += n
	in.parts[i] = append(in.parts[i], simPart{off, n})
	shared = in.owner[i] >= 0 && in.owner[i] != conn
	in.owner[i] = conn
	more = in.filled[i] < len(b.mem[i])
	if !more {
		b.state[i] = bufLoop // ended: the kernel moves to the next buffer
		in.head = -1
	}
	return uint16(i), n, more, shared, true
}

// Received is ring.BufRing.Received's stand-in: the part completion c
// names must be the next the kernel put in buffer id.
func (b *simBufs) Received(id uint16, c ring.Completion) ([]byte, bool) {
	in := b.inc
	if in == nil {
		b.k.fault("Received on a plain ring")
		return nil, true
	}
	if len(in.parts[id]) == 0 {
		b.k.fault("a completion of %d bytes read from buffer %d, which holds no part not yet read", c.Res, id)
		return nil, true
	}
	p := in.parts[id][0]
	in.parts[id] = in.parts[id][1:]
	if p.n != int(c.Res) {
		b.k.fault("a completion of %d bytes read as the next part of buffer %d, which is of %d bytes", c.Res, id, p.n)
	}
	last := !c.BufMore()
	if last != (len(in.parts[id]) == 0 && b.state[id] == bufLoop) {
		b.k.fault("buffer %d: a part read as its last (%v) while the kernel's state is %d with %d parts unread", id, last, b.state[id], len(in.parts[id]))
	}
	return b.mem[id][p.off : p.off+p.n], last
}

// recycleInc checks a recycle of an incremental buffer: only once the kernel
// ended it and the loop read every part.
func (b *simBufs) recycleInc(id uint16) {
	in := b.inc
	if b.state[id] == bufKernel && in.filled[id] > 0 {
		b.k.fault("buffer %d recycled while the kernel may fill more of it (%d bytes in)", id, in.filled[id])
	}
	if len(in.parts[id]) > 0 {
		b.k.fault("buffer %d recycled with %d parts the loop has not read", id, len(in.parts[id]))
	}
	in.filled[id], in.owner[id] = 0, -1
}

// checkParts is the model's check between steps (the loop waits; inCQ are
// the ids of the buffers whose parts are in completions not yet reaped):
// the parts the driver holds are its deferred receives' parts, and a
// buffer the kernel ended is the loop's only while a part waits in it or
// a completion not yet reaped ends it.
func (m *connModel) checkParts(inCQ map[uint16]bool) {
	d, b := m.d, m.r.bufs
	waiting := map[uint16]int{}
	n := 0
	for _, mc := range m.conns {
		if mc.c == nil {
			continue
		}
		for _, r := range mc.c.ur.held() {
			if r.n > 0 && !r.copied {
				waiting[r.id]++
				n++
			}
		}
	}
	if n != d.waitingBufs || n != d.partsHeld() {
		m.faultf("the deferred receives hold %d parts; the driver counts %d waiting and %d held", n, d.waitingBufs, d.partsHeld())
	}
	if n > 0 {
		m.seen["incremental part held"]++
	}
	for id, k := range waiting {
		if b.state[id] == bufStaged || b.state[id] == bufKernel && b.inc.filled[id] == 0 {
			m.faultf("buffer %d: %d deferred receives hold parts of it, and it is back with the kernel (state %d)", id, k, b.state[id])
		}
		if refs := d.inc.refs[id]; int(refs) < k {
			m.faultf("buffer %d: %d parts wait in it and it counts %d references", id, k, refs)
		}
	}
	for id, s := range b.state {
		if s == bufLoop && waiting[uint16(id)] == 0 && !inCQ[uint16(id)] {
			m.faultf("buffer %d: filled, no part of it held, and not back with the kernel", id)
		}
	}
}

// settleParts checks, at the end, that the loop holds no part and that every
// buffer counts only the kernel's reference.
func (m *connModel) settleParts() {
	d := m.d
	if d.partsHeld() != 0 {
		m.faultf("at the end the loop holds %d parts of incremental buffers", d.partsHeld())
	}
	for id, r := range d.inc.refs {
		if r != 1 {
			m.faultf("at the end buffer %d counts %d references, not the kernel's alone", id, r)
		}
	}
}
