//go:build linux

package ring

import "fmt"

// Bundle is the buffers of a provided-buffer ring that one completion
// consumed: of a bundle receive (PrepareRecvBundle), several filled in
// ring order, the last perhaps in part; of a bundle send
// (PrepareSendBundle), several sent, the last perhaps in part. A
// completion names only the first buffer's id (and the bytes in all),
// so the ring tracks which ids it put in which slots (Recycle, Provide)
// and where the kernel's consumption has reached. The zero Bundle has no
// buffers.
type Bundle struct {
	b     *BufRing
	pos   uint16 // ring position of the first buffer
	n     uint16 // buffers
	last  uint32 // bytes used of the last buffer
	bytes int
}

// Bundle returns the buffers completion c consumed from b, advancing b's
// record of the kernel's position past them. Every completion that
// consumed buffers from b (bundle or not) must be passed to Bundle or
// Received, in the order the completions arrive, for the record to stay
// true; a completion whose first buffer is not the one at the recorded
// position is an error, and so is one that needs more buffers than were
// published. A completion without a buffer (an error, end of stream)
// returns the zero Bundle. An incremental ring's buffers are read with
// Received instead.
func (b *BufRing) Bundle(c Completion) (Bundle, error) {
	id, ok := c.Buffer()
	if !ok || c.Res <= 0 {
		return Bundle{}, nil
	}
	if b.incremental {
		return Bundle{}, fmt.Errorf("buffer ring %d: bundles of an incremental ring: read it with Received", b.group)
	}
	if got := b.slotID[b.head&b.mask]; got != id {
		return Bundle{}, fmt.Errorf("buffer ring %d: completion used buffer %d first, the ring's head holds %d: "+
			"a completion from this group was skipped or reordered", b.group, id, got)
	}
	u := Bundle{b: b, pos: b.head, bytes: int(c.Res)}
	published := b.tail - b.head
	for left := uint32(c.Res); left > 0; {
		if u.n == published {
			return Bundle{}, fmt.Errorf("buffer ring %d: completion of %d bytes from buffer %d needs more than the %d buffers published",
				b.group, c.Res, id, published)
		}
		l := b.slotLen[(u.pos+u.n)&b.mask]
		u.last = min(l, left)
		left -= u.last
		u.n++
		if l == 0 {
			return Bundle{}, fmt.Errorf("buffer ring %d: an empty buffer in a completion", b.group)
		}
	}
	b.head += u.n
	return u, nil
}

// Len returns how many buffers the completion consumed.
func (u Bundle) Len() int { return int(u.n) }

// Bytes returns how many bytes the completion moved in all.
func (u Bundle) Bytes() int { return u.bytes }

// ID returns the id of the i-th buffer, in the order the kernel used them.
func (u Bundle) ID(i int) uint16 { return u.b.slotID[(u.pos+uint16(i))&u.b.mask] }

// Data returns the bytes of the i-th buffer that the completion filled
// (a receive) or sent (a send): all of each buffer's but perhaps the
// last's. It is valid until the buffer is recycled.
func (u Bundle) Data(i int) []byte {
	n := u.b.slotLen[(u.pos+uint16(i))&u.b.mask]
	if i == int(u.n)-1 {
		n = u.last
	}
	return u.b.Bytes(u.ID(i), int(n))
}

// Unsent returns the bytes of the last buffer that the completion did not
// move. For a send that completed in part these are the bytes not sent
// (the kernel consumed the buffer all the same): the caller sends them
// again, ahead of anything newer. For a send that sent all it took it is
// empty; for a receive it is the last buffer's room left unfilled.
func (u Bundle) Unsent() []byte {
	if u.n == 0 {
		return nil
	}
	id, full := u.ID(int(u.n)-1), u.b.slotLen[(u.pos+u.n-1)&u.b.mask]
	return u.b.Bytes(id, int(full))[u.last:]
}

// Received returns the bytes completion c received into buffer id (c's
// Buffer), and whether c is the last completion into that buffer, which
// is then the caller's to recycle. On a plain ring every completion is
// its buffer's last and its bytes start at the buffer's start. On an
// incremental ring (NewIncrementalBufRing) they start where the previous
// completion into the buffer ended, and c is the last unless it has
// BufMore. It keeps b's record of the kernel's position (see Bundle). A
// completion without a buffer consumed none: Received returns nothing.
func (b *BufRing) Received(id uint16, c Completion) (p []byte, last bool) {
	if _, ok := c.Buffer(); !ok {
		return nil, false // consumed nothing
	}
	n := max(int(c.Res), 0)
	if !b.incremental {
		b.head++
		return b.Bytes(id, n), true
	}
	off := int(b.filled[id])
	end := min(off+n, b.size)
	p = b.bufMem[int(id)*b.size+off : int(id)*b.size+end : int(id)*b.size+b.size]
	if c.BufMore() {
		b.filled[id] = uint32(end)
		return p, false
	}
	b.filled[id] = 0
	b.head++
	return p, true
}
