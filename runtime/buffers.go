//go:build linux

package runtime

import (
	"time"
	"unsafe"

	"github.com/percore/percore/internal/sys"
)

// bufPool is a loop's outbound buffers (and the copies of deferred
// receives): free lists by power-of-two size class from 4 KiB to 1 MiB,
// each kept within a byte budget. Buffers of mmapMin bytes and more (a
// class of 16 KiB or above, and anything past the largest class) are
// anonymous mappings, not Go heap: a queue that grew to
// megabytes for a slow consumer goes back to the kernel the moment it is
// dropped, instead of waiting for a collection and the scavenger while the
// process's RSS stays high. A free list also gives back, once per
// trimEvery, the buffers it did not need during the whole period (its
// low-water mark), so that memory kept after a burst returns within
// seconds. Only the owning loop uses it.
type bufPool struct {
	free [numBufClasses][][]byte
	// low is each free list's shortest length since the last trim: the
	// buffers below it were not taken during the period.
	low [numBufClasses]int
	// mapped holds the base and length of every live mapping, so that
	// only what this pool mapped is ever unmapped (a heap buffer that
	// stands in when mmap fails goes back to the collector).
	mapped map[*byte]int
	// mappedBytes is the total length of the live mappings; pooledBytes,
	// of the buffers in the free lists.
	mappedBytes, pooledBytes int
}

const (
	minBuf         = 4 << 10
	numBufClasses  = 9 // 4 KiB .. 1 MiB
	maxPooledBytes = 4 << 20
	mmapMin        = 16 << 10
	trimEvery      = time.Second
)

// get returns an empty buffer with room for at least n bytes.
func (p *bufPool) get(n int) []byte {
	class := bufClass(n)
	if class < 0 {
		return p.alloc(roundPage(n))
	}
	if free := p.free[class]; len(free) > 0 {
		b := free[len(free)-1]
		free[len(free)-1] = nil
		p.free[class] = free[:len(free)-1]
		p.low[class] = min(p.low[class], len(p.free[class]))
		p.pooledBytes -= cap(b)
		return b
	}
	return p.alloc(minBuf << class)
}

// put takes back a buffer that get returned (nil is ignored). The caller
// must hold no slice of it any more: a mapping may be unmapped at once.
func (p *bufPool) put(b []byte) {
	if b == nil {
		return
	}
	class := bufClass(cap(b))
	if class >= 0 && cap(b) == minBuf<<class && (len(p.free[class])+1)*cap(b) <= maxPooledBytes {
		p.free[class] = append(p.free[class], b[:0])
		p.pooledBytes += cap(b)
		return
	}
	p.release(b)
}

// trim gives back the buffers each free list did not need since the last
// trim, and reports whether any list still holds buffers (so that the
// caller knows whether to trim again).
func (p *bufPool) trim() (more bool) {
	for class := range p.free {
		free := p.free[class]
		drop := p.low[class]
		for i := range drop {
			p.pooledBytes -= cap(free[i])
			p.release(free[i])
			free[i] = nil
		}
		p.free[class] = append(free[:0], free[drop:]...)
		clear(free[len(p.free[class]):])
		p.low[class] = len(p.free[class])
		more = more || len(p.free[class]) > 0
	}
	return more
}

// alloc makes a buffer of capacity n: a mapping from mmapMin on, else heap.
func (p *bufPool) alloc(n int) []byte {
	if n < mmapMin {
		return make([]byte, 0, n)
	}
	mem, err := sys.Map(n)
	if err != nil {
		// Out of mappings or address space: the heap may still have room.
		return make([]byte, 0, n)
	}
	base := unsafe.SliceData(mem)
	if p.mapped == nil {
		p.mapped = make(map[*byte]int)
	}
	p.mapped[base] = n
	p.mappedBytes += n
	return unsafe.Slice(base, n)[:0]
}

// release unmaps b if this pool mapped it; a heap buffer is left to the
// collector.
func (p *bufPool) release(b []byte) {
	base := unsafe.SliceData(b[:cap(b)])
	n, ok := p.mapped[base]
	if !ok {
		return
	}
	delete(p.mapped, base)
	p.mappedBytes -= n
	_ = sys.Unmap(unsafe.Slice(base, n))
}

// releaseAll gives back every pooled buffer; the loop calls it as it exits.
func (p *bufPool) releaseAll() {
	for class, free := range p.free {
		for i, b := range free {
			p.release(b)
			free[i] = nil
		}
		p.free[class] = nil
		p.low[class] = 0
	}
	p.pooledBytes = 0
}

// bufClass returns the size class that holds n bytes, or -1 past the
// largest.
func bufClass(n int) int {
	for c := range numBufClasses {
		if n <= minBuf<<c {
			return c
		}
	}
	return -1
}

func roundPage(n int) int {
	const page = 4 << 10
	return (n + page - 1) &^ (page - 1)
}

// getBuf returns an empty output buffer with room for at least n bytes.
func (l *Loop) getBuf(n int) []byte { return l.bufs.get(n) }

// putBuf takes back a buffer from getBuf, and starts the trim timer if it
// is not running.
func (l *Loop) putBuf(b []byte) {
	if b == nil {
		return
	}
	l.bufs.put(b)
	l.armTrimOnce()
}

// armTrimOnce starts the trim timer if it is not running.
func (l *Loop) armTrimOnce() {
	if l.trimTimer == nil || l.trimTimer.index < 0 {
		l.armTrim()
	}
}

func (l *Loop) armTrim() {
	if l.trimTimer == nil {
		l.trimTimer = l.AfterFunc(trimEvery, l.trimBufs)
		return
	}
	l.trimTimer.Reset(trimEvery)
}

// trimBufs runs every trimEvery while the free lists hold buffers or
// more spare outbound queues or timers than a trim leaves (burstSpares),
// and once
// the loop has no connection left: then the driver may also give back the
// pages of its receive buffers.
func (l *Loop) trimBufs() {
	more := l.bufs.trim()
	if l.spareOut.trim() {
		more = true
	}
	if l.spare.trim() {
		more = true
	}
	if l.open == 0 && !l.d.discardBuffers() {
		more = true // a released connection's last operation is still in flight
	}
	if more {
		l.armTrim()
	}
}

// shedSpares gives up at once what the loop keeps of a burst: the write
// timers of connections whose queues have drained (checkWrite would let
// them go within a second), every pooled buffer, and the spare outbound
// queues and timers above what a trim leaves (keepSpares), as the next two
// trims would (trimBufs). The return after a storm asks it of every loop
// before it collects (heapreturn.go), so that what the storm left is
// garbage the collection frees and returns, not the collection's survivor
// that a second later turns into garbage nothing returns. It looks at
// every connection of the loop: once per return, a few milliseconds at a
// hundred thousand connections. Last, what code on the loop registered
// with OnShedSpares lets go of its own spares.
func (l *Loop) shedSpares() {
	for _, c := range l.conns {
		if c != nil && c.writeTimer != nil && c.idleOut() {
			l.spareTimer(c.writeTimer)
			c.writeTimer = nil
		}
	}
	for class := range l.bufs.free {
		l.bufs.low[class] = len(l.bufs.free[class])
	}
	l.bufs.trim()
	l.spareOut.shed()
	l.spare.shed()
	l.timers.ts = shrunk(l.timers.ts) // a storm's write timers grew it
	if l.calls.exiting {
		return // past OnStop: what the functions shed may be gone
	}
	l.shedding.Store(true)
	defer l.shedding.Store(false)
	for _, f := range l.onShed {
		l.safely("OnShedSpares function", f)
	}
}

// lastClosed is called when the loop's last connection closes: the next
// trim looks at the receive buffers too.
func (l *Loop) lastClosed() {
	if l.trimTimer == nil || l.trimTimer.index < 0 {
		l.armTrim()
	}
}
