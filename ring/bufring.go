//go:build linux

package ring

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BufRing is a provided-buffer ring (IORING_REGISTER_PBUF_RING, 5.19+): a
// group of equal buffers that the kernel picks from for multishot receives,
// so that a connection holds no receive buffer while it is idle. Both the
// ring of descriptors and the buffers are anonymous mmap memory: the Go
// collector never scans or moves them, and pages the kernel never filled
// cost nothing. Close unregisters the group and unmaps both regions.
//
// Buffers go back to the kernel with Recycle, which stages them, and
// Publish, which makes every staged buffer visible with one store; a loop
// publishes once per batch of completions.
type BufRing struct {
	r       *Ring
	group   uint16
	mask    uint16
	size    int
	ringMem []byte
	bufMem  []byte
	tail    uint16
	staged  uint16
	closed  bool

	// What ring, not the kernel, knows about the ring's slots, for
	// completions that do not name each buffer they used (Bundle,
	// Received): the buffer id and length put in each slot (by ring
	// position, masked), and head, the position of the first slot the
	// kernel has not consumed yet as the completions seen so far say.
	slotID  []uint16
	slotLen []uint32
	head    uint16
	// incremental rings (IOU_PBUF_RING_INC) keep, per buffer id, how
	// far the kernel has filled the buffer.
	incremental bool
	filled      []uint32
}

// NewBufRing registers a provided-buffer ring of count buffers of size bytes
// as buffer group group. count must be a power of two no larger than 32768.
// Every buffer starts out given to the kernel.
func (r *Ring) NewBufRing(group uint16, count, size int) (*BufRing, error) {
	return r.newBufRing(group, count, size, 0, true)
}

// NewSendBufRing registers a provided-buffer ring for sends
// (PrepareSendBundle): like NewBufRing's, but no buffer starts out given
// to the kernel, since a send's buffer holds what the caller wrote into
// it (Bytes, then Provide and Publish).
func (r *Ring) NewSendBufRing(group uint16, count, size int) (*BufRing, error) {
	return r.newBufRing(group, count, size, 0, false)
}

// NewIncrementalBufRing is NewBufRing for a ring whose buffers the kernel
// consumes in part (IOU_PBUF_RING_INC, 6.12+: the IncrementalBuffers
// feature): a receive takes only the bytes it needs from the buffer at
// the ring's head, and the next one continues in the same buffer, so that
// a few large buffers serve many small receives without one buffer held
// per completion. Read a completion's bytes with Received, which knows
// where in the buffer they start; a buffer is the caller's to recycle
// only after the completion that ends it (without BufMore), and only when
// every earlier part of it (perhaps another connection's) is released
// too. On an older kernel it returns an *UnavailableError.
func (r *Ring) NewIncrementalBufRing(group uint16, count, size int) (*BufRing, error) {
	return r.newBufRing(group, count, size, pbufRingInc, true)
}

func (r *Ring) newBufRing(group uint16, count, size int, flags uint16, provide bool) (*BufRing, error) {
	if count <= 0 || count > 1<<15 || count&(count-1) != 0 {
		return nil, fmt.Errorf("buffer ring: count %d is not a power of two in [1, 32768]", count)
	}
	if size <= 0 {
		return nil, fmt.Errorf("buffer ring: size %d is not positive", size)
	}
	ringMem, err := unix.Mmap(-1, 0, count*int(unsafe.Sizeof(bufDesc{})),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("buffer ring: %w", os.NewSyscallError("mmap", err))
	}
	bufMem, err := unix.Mmap(-1, 0, count*size,
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		_ = unix.Munmap(ringMem)
		return nil, fmt.Errorf("buffer ring: %w", os.NewSyscallError("mmap", err))
	}
	reg := &bufReg{
		ringAddr:    uint64(uintptr(unsafe.Pointer(&ringMem[0]))),
		ringEntries: uint32(count),
		bgid:        group,
		flags:       flags,
	}
	if err := sysRegister(r.fd, registerPbufRing, unsafe.Pointer(reg), 1); err != nil {
		_ = unix.Munmap(ringMem)
		_ = unix.Munmap(bufMem)
		// A kernel without provided buffer rings refuses the
		// registration with EINVAL, which classify reports as
		// unavailable.
		feature := "provided buffer rings (IORING_REGISTER_PBUF_RING, 5.19+)"
		if flags&pbufRingInc != 0 {
			feature = IncrementalBuffers.String()
		}
		return nil, fmt.Errorf("buffer ring: %w", classify("io_uring_register(PBUF_RING)", feature, err))
	}
	b := &BufRing{
		r: r, group: group, mask: uint16(count - 1),
		size: size, ringMem: ringMem, bufMem: bufMem,
		slotID: make([]uint16, count), slotLen: make([]uint32, count),
		incremental: flags&pbufRingInc != 0,
	}
	if b.incremental {
		b.filled = make([]uint32, count)
	}
	if provide {
		for i := range count {
			b.Recycle(uint16(i))
		}
		b.Publish()
	}
	return b, nil
}

// Group returns the buffer group id.
func (b *BufRing) Group() uint16 { return b.group }

// Size returns the size of each buffer.
func (b *BufRing) Size() int { return b.size }

// Bytes returns the first n bytes of buffer id. The slice is valid until the
// buffer is recycled.
func (b *BufRing) Bytes(id uint16, n int) []byte {
	off := int(id) * b.size
	return b.bufMem[off : off+n : off+b.size]
}

func (b *BufRing) desc(i uint16) *bufDesc {
	return (*bufDesc)(unsafe.Pointer(&b.ringMem[int(i&b.mask)*int(unsafe.Sizeof(bufDesc{}))]))
}

// Recycle stages buffer id for return to the kernel; Publish returns it.
func (b *BufRing) Recycle(id uint16) { b.stage(id, b.size) }

// Provide stages buffer id holding its first n bytes (written through
// Bytes) for a send that selects from this ring (PrepareSendBundle):
// the kernel sends exactly those n bytes. Publish hands it over.
func (b *BufRing) Provide(id uint16, n int) {
	b.stage(id, min(max(n, 0), b.size))
}

func (b *BufRing) stage(id uint16, n int) {
	pos := b.tail + b.staged
	d := b.desc(pos)
	d.addr = uint64(uintptr(unsafe.Pointer(&b.bufMem[int(id)*b.size])))
	d.len = uint32(n)
	d.bid = id
	b.slotID[pos&b.mask] = id
	b.slotLen[pos&b.mask] = uint32(n)
	if b.incremental {
		b.filled[id] = 0
	}
	b.staged++
}

// Publish hands every staged buffer to the kernel with one release store of
// the ring's tail.
func (b *BufRing) Publish() {
	if b.staged == 0 {
		return
	}
	b.tail += b.staged
	b.staged = 0
	// The kernel reads the 16-bit tail with an acquire load, and
	// sync/atomic has no 16-bit store: store the aligned 32-bit word
	// that holds entry 0's bid and the tail, rewriting the bid as it is
	// (the kernel never writes a bid; on an incremental ring it writes
	// the addr and len of the entry it consumes in part, which this
	// store does not touch).
	d0 := b.desc(0)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&d0.bid)), tailWord(bigEndian(), d0.bid, b.tail))
}

// tailWord returns the 32-bit word that, stored at entry 0's bid, leaves bid
// in the bid field and tail in the tail field after it: tail<<16 | bid on a
// little-endian host, whose word starts with its low half, and bid<<16 |
// tail on a big-endian one.
func tailWord(bigEndian bool, bid, tail uint16) uint32 {
	if bigEndian {
		return uint32(bid)<<16 | uint32(tail)
	}
	return uint32(tail)<<16 | uint32(bid)
}

// Discard gives the buffers' pages back to the kernel (MADV_DONTNEED): the
// memory stays mapped and the buffers stay provided, and a page the kernel
// fills again later is faulted back in, zeroed. Call it only while no
// operation that selects from the group is armed or in flight, and no
// buffer is held: the kernel could be filling one as its page is dropped.
// A loop with no connection open calls it, so that a quiet server does not
// keep resident the pages a burst touched.
func (b *BufRing) Discard() error {
	if err := unix.Madvise(b.bufMem, unix.MADV_DONTNEED); err != nil {
		return os.NewSyscallError("madvise", err)
	}
	return nil
}

// Close unregisters the buffer group and unmaps its memory. It is
// idempotent. Operations that select from the group must have completed.
func (b *BufRing) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	var errs []error
	if !b.r.closed {
		reg := &bufReg{bgid: b.group}
		if err := sysRegister(b.r.fd, unregisterPbufRing, unsafe.Pointer(reg), 1); err != nil {
			errs = append(errs, fmt.Errorf("buffer ring: unregister: %w",
				os.NewSyscallError("io_uring_register(UNREGISTER_PBUF_RING)", err)))
		}
	}
	if err := unix.Munmap(b.ringMem); err != nil {
		errs = append(errs, os.NewSyscallError("munmap", err))
	}
	if err := unix.Munmap(b.bufMem); err != nil {
		errs = append(errs, os.NewSyscallError("munmap", err))
	}
	return errors.Join(errs...)
}
