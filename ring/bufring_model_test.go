package ring

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// kernelModel consumes a BufRing's descriptors as the kernel does: from
// its own head up to the tail the ring published, a bundle taking
// buffers of their descriptor's length until the bytes run out
// (io_bundle_nbufs), an incremental ring's receive taking bytes from the
// head buffer's current address and moving it on (io_kbuf_inc_commit).
// It reads only what the kernel can see: the descriptors and the tail.
type kernelModel struct {
	b    *BufRing
	head uint16
}

func (k *kernelModel) tail() uint16 { return *(*uint16)(unsafe.Pointer(&k.b.ringMem[14])) }

// used is one buffer a completion used: its id, and where the bytes lie.
type used struct {
	id   uint16
	addr uintptr
	n    int
}

// bundle consumes n bytes' worth of buffers (at most the published ones)
// and returns the completion and what it used; ok is false when nothing
// is published.
func (k *kernelModel) bundle(n int) (c Completion, us []used, ok bool) {
	if k.tail() == k.head {
		return Completion{}, nil, false
	}
	total := 0
	first := k.b.desc(k.head).bid
	for n > 0 && k.tail() != k.head {
		d := k.b.desc(k.head)
		take := min(int(d.len), n)
		us = append(us, used{d.bid, uintptr(d.addr), take})
		total += take
		n -= take
		k.head++
	}
	return Completion{Res: int32(total), Flags: cqeFBuffer | uint32(first)<<cqeBufferShift}, us, true
}

// incremental consumes up to n bytes from the head buffer of an
// incremental ring.
func (k *kernelModel) incremental(n int) (c Completion, u used, ok bool) {
	if k.tail() == k.head {
		return Completion{}, used{}, false
	}
	d := k.b.desc(k.head)
	take := min(int(d.len), n)
	u = used{d.bid, uintptr(d.addr), take}
	c = Completion{Res: int32(take), Flags: cqeFBuffer | uint32(d.bid)<<cqeBufferShift}
	d.addr += uint64(take)
	d.len -= uint32(take)
	if d.len == 0 {
		k.head++
	} else {
		c.Flags |= cqeFBufMore
	}
	return c, u, true
}

// TestBufRingRecordModel drives a BufRing against kernelModel in seeded
// random orders: completions of random sizes, buffers recycled in random
// order at random times, publishes in between. At every completion what
// Bundle or Received reports (ids, where the bytes lie, how many, whether
// the buffer is done) must be what the kernel used, and the buffers
// must be conserved: each is with the kernel, staged, or held by the
// caller, never two of them.
func TestBufRingRecordModel(t *testing.T) {
	for _, incremental := range []bool{false, true} {
		for seed := uint64(1); seed <= 40; seed++ {
			name := fmt.Sprintf("incremental=%v/seed=%d", incremental, seed)
			t.Run(name, func(t *testing.T) {
				runModel(t, seed, incremental)
			})
		}
	}
}

func runModel(t *testing.T, seed uint64, incremental bool) {
	rng := rand.New(rand.NewPCG(seed, 0x28))
	count := 1 << (1 + rng.IntN(4)) // 2..16
	size := 8 << rng.IntN(4)        // 8..64
	// On the heap: the descriptors hold the buffers' addresses, and a
	// small slice may be on the stack, which moves.
	mem := onHeap(t, make([]uint64, count*bufDescSizeWords))
	b := &BufRing{
		group: 3, mask: uint16(count - 1), size: size,
		ringMem: unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), count*int(unsafe.Sizeof(bufDesc{}))),
		bufMem:  onHeap(t, make([]byte, count*size)),
		slotID:  make([]uint16, count), slotLen: make([]uint32, count),
		incremental: incremental,
	}
	if incremental {
		b.filled = make([]uint32, count)
	}
	for i := range count {
		b.Recycle(uint16(i))
	}
	b.Publish()
	k := &kernelModel{b: b}
	base := uintptr(unsafe.Pointer(&b.bufMem[0]))
	where := func(id uint16) uintptr { return base + uintptr(id)*uintptr(size) }
	// The caller's side: buffers it holds (done with by the kernel), and
	// buffers the kernel has partly consumed (incremental).
	var held []uint16
	staged := 0
	inKernel := count
	for step := range 400 {
		switch op := rng.IntN(10); {
		case op < 6: // a completion
			n := 1 + rng.IntN(3*size)
			if !incremental {
				c, us, ok := k.bundle(n)
				if !ok {
					continue
				}
				u, err := b.Bundle(c)
				if err != nil {
					t.Fatalf("seed %d step %d: Bundle: %v", seed, step, err)
				}
				if u.Len() != len(us) || u.Bytes() != int(c.Res) {
					t.Fatalf("seed %d step %d: Bundle of %d buffers (%d bytes), the kernel used %d (%d)",
						seed, step, u.Len(), u.Bytes(), len(us), c.Res)
				}
				for i, want := range us {
					d := u.Data(i)
					if u.ID(i) != want.id || len(d) != want.n || want.n > 0 && uintptr(unsafe.Pointer(&d[0])) != want.addr {
						t.Fatalf("seed %d step %d: buffer %d of the bundle: id %d, %d bytes at %#x; the kernel used id %d, %d bytes at %#x",
							seed, step, i, u.ID(i), len(d), uintptr(unsafe.Pointer(unsafe.SliceData(d))), want.id, want.n, want.addr)
					}
					if want.addr != where(want.id) {
						t.Fatalf("seed %d step %d: the kernel read buffer %d at the wrong address", seed, step, want.id)
					}
					held = append(held, want.id)
					inKernel--
				}
			} else {
				c, want, ok := k.incremental(n)
				if !ok {
					continue
				}
				p, last := b.Received(want.id, c)
				if len(p) != want.n || uintptr(unsafe.Pointer(&p[0])) != want.addr || last == c.BufMore() {
					t.Fatalf("seed %d step %d: Received %d bytes at +%d (last %v); the kernel used %d at +%d (BufMore %v)",
						seed, step, len(p), uintptr(unsafe.Pointer(&p[0]))-where(want.id), last,
						want.n, want.addr-where(want.id), c.BufMore())
				}
				if last {
					held = append(held, want.id)
					inKernel--
				}
			}
		case op < 9: // recycle a held buffer, any of them
			if len(held) == 0 {
				continue
			}
			i := rng.IntN(len(held))
			id := held[i]
			held = append(held[:i], held[i+1:]...)
			b.Recycle(id)
			staged++
		default:
			b.Publish()
			inKernel += staged
			staged = 0
		}
		if got := int(k.tail() - k.head); got+len(held)+staged != count || inKernel != got {
			t.Fatalf("seed %d step %d: %d with the kernel, %d held, %d staged: not the %d buffers (model: %d with the kernel)",
				seed, step, got, len(held), staged, count, inKernel)
		}
	}
}
