package ring

import (
	"unsafe"

	"github.com/pawelgaczynski/giouring"
)

// giouring keeps the queue pointers, the setup parameters and the ring's
// flags unexported, and its own submit and wait functions always enter the
// kernel through the blocking syscall path and allocate their wait
// arguments. percore needs a raw non-blocking enter, an allocation-free
// timed wait and CQ sizing, so it reads giouring's structures through these
// mirrors of their layout at the pinned version
// (v0.0.0-20230826085535-69588b89acb9). TestLayout checks the sizes and that
// the mirrors see what giouring's own accessors see; a giouring upgrade that
// changes a layout fails that test. See docs/decisions/0005-ring-on-giouring.md.

type ringLayout struct {
	sq          *sqLayout
	cq          *cqLayout
	flags       uint32
	ringFd      int
	features    uint32
	enterRingFd int
	intFlags    uint8
	pad         [3]uint8
	pad2        uint32
}

type sqLayout struct {
	head        *uint32
	tail        *uint32
	ringMask    *uint32
	ringEntries *uint32
	flags       *uint32
	_           *uint32 // dropped
	_           *uint32 // array
	sqes        *giouring.SubmissionQueueEntry
	_           uint           // ringSize
	_           unsafe.Pointer // ringPtr
	sqeHead     uint32
	sqeTail     uint32
	_           [2]uint32
}

type cqLayout struct {
	head     *uint32
	tail     *uint32
	ringMask *uint32
	_        *uint32 // ringEntries
	_        *uint32 // flags
	_        *uint32 // overflow
	cqes     *giouring.CompletionQueueEvent
	_        uint           // ringSize
	_        unsafe.Pointer // ringPtr
	_        [2]uint32
}

type offsetsLayout struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type paramsLayout struct {
	sqEntries    uint32
	cqEntries    uint32
	flags        uint32
	sqThreadCPU  uint32
	sqThreadIdle uint32
	features     uint32
	wqFd         uint32
	resv         [3]uint32
	sqOff        offsetsLayout
	cqOff        offsetsLayout
}

func viewRing(r *giouring.Ring) *ringLayout { return (*ringLayout)(unsafe.Pointer(r)) }

func viewParams(p *giouring.Params) *paramsLayout { return (*paramsLayout)(unsafe.Pointer(p)) }
