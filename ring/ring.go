//go:build linux

package ring

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Flags are io_uring setup flags.
type Flags uint32

const (
	// SingleIssuer tells the kernel that only the thread that created the
	// ring submits to it (IORING_SETUP_SINGLE_ISSUER, 6.0+).
	SingleIssuer Flags = 1 << iota
	// DeferTaskrun defers completion work until the owner enters the kernel
	// to wait for it (IORING_SETUP_DEFER_TASKRUN, 6.1+; needs SingleIssuer).
	DeferTaskrun
	// CoopTaskrun stops the kernel from interrupting the owner to run
	// completion work (IORING_SETUP_COOP_TASKRUN with TASKRUN_FLAG, 5.19+).
	CoopTaskrun
	// SQPoll starts a kernel thread that polls the submission queue
	// (IORING_SETUP_SQPOLL): fewer enters for a core's worth of CPU.
	SQPoll
)

var flagNames = []string{"SINGLE_ISSUER", "DEFER_TASKRUN", "COOP_TASKRUN", "SQPOLL"}

// String lists the flags in the kernel's names, joined by "|".
func (f Flags) String() string {
	var names []string
	for i, name := range flagNames {
		if f&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

func (f Flags) setup() uint32 {
	var s uint32
	if f&SingleIssuer != 0 {
		s |= setupSingleIssuer
	}
	if f&DeferTaskrun != 0 {
		s |= setupDeferTaskrun
	}
	if f&CoopTaskrun != 0 {
		s |= setupCoopTaskrun | setupTaskrunFlag
	}
	if f&SQPoll != 0 {
		s |= setupSQPoll
	}
	return s
}

// Config sets a ring up. The zero value is a 1024-entry ring with no flags.
type Config struct {
	// Entries is the submission queue size, rounded up to a power of two.
	// Zero means 1024.
	Entries uint32
	// CQEntries is the completion queue size. Zero means four times
	// Entries: multishot operations post many completions per submission.
	CQEntries uint32
	// Flags are the setup flags. Zero means none.
	Flags Flags
	// SQPollIdle is how long the SQPoll thread spins before it sleeps,
	// rounded up to whole milliseconds (the kernel's unit). Zero means the
	// kernel's default (one second). Used only with SQPoll.
	SQPollIdle time.Duration
	// RegisterRing registers the ring's descriptor with the kernel
	// (Ring.RegisterRing), so that every enter skips the file lookup;
	// where the kernel refuses, the ring enters through its descriptor
	// as before and RingRegistered says why. Only for an owner that
	// stays on one locked OS thread. False (zero) means no.
	RegisterRing bool
}

// Ring is one io_uring instance. It is owned by one goroutine: see the
// package documentation.
type Ring struct {
	sq     sqRing
	cq     cqRing
	maps   mappings
	params params // as the kernel filled it in
	fd     int
	flags  Flags

	// The wait arguments live here, not on the stack, so that a timed
	// wait allocates nothing. arg.minWait (microseconds) is set by
	// SetBatchWait and is zero unless batching is on.
	arg getEventsArg
	ts  unix.Timespec

	enters uint64
	closed bool

	// What io_uring_enter gets: the descriptor, or the index of the
	// registered ring with enterRegisteredRing in enterFlags.
	enterFd    int
	enterFlags uint32
	// The registration of the ring's descriptor: the thread it belongs
	// to, and why Config.RegisterRing's attempt failed.
	regTid int
	regErr error

	files uint32 // the fixed file table's size (RegisterFiles)

	// Batched waits: wait for waitNr completions, but no longer than
	// arg.minWait once at least one is there (IORING_FEAT_MIN_TIMEOUT).
	waitNr uint32
}

// sqRing is the submission queue: head, tail and flags are shared with the
// kernel; sqeHead and sqeTail count the entries ring has prepared and
// published, as liburing's io_uring_sq does.
type sqRing struct {
	head, tail, flags *uint32
	sqes              unsafe.Pointer // [entries]sqe
	mask, entries     uint32
	sqeHead, sqeTail  uint32
}

// cqRing is the completion queue: head and tail are shared with the kernel.
type cqRing struct {
	head, tail *uint32
	cqes       unsafe.Pointer // [mask+1]cqe
	mask       uint32
}

// mappings are the ring's three regions of kernel memory. With
// IORING_FEAT_SINGLE_MMAP (5.4+) the submission and completion rings share
// one mapping, and cqRing is sqRing.
type mappings struct {
	sqRing, cqRing, sqes             unsafe.Pointer
	sqRingSize, cqRingSize, sqesSize uintptr
}

// SetBatchWait makes SubmitAndWait wait for up to n completions, returning
// as soon as at least one is ready once minWait has passed (so a lone
// completion waits at most minWait longer). It trades that much latency
// for fewer kernel enters under load. It needs IORING_FEAT_MIN_TIMEOUT
// (kernel 6.12+) and returns errors.ErrUnsupported without it; n <= 1 or
// minWait <= 0 turns batching off.
func (r *Ring) SetBatchWait(n int, minWait time.Duration) error {
	if n <= 1 || minWait <= 0 {
		r.waitNr, r.arg.minWait = 0, 0
		return nil
	}
	if r.params.features&featMinTimeout == 0 {
		return fmt.Errorf("batched waits need IORING_FEAT_MIN_TIMEOUT (6.12+): %w", errors.ErrUnsupported)
	}
	r.waitNr = uint32(n)
	r.arg.minWait = uint32(min(max(minWait/time.Microsecond, 1), math.MaxUint32))
	return nil
}

// Open sets up a ring. A failure that means io_uring cannot be used on this
// host (seccomp, kernel.io_uring_disabled, an old kernel, an unsupported flag
// or feature) is an *UnavailableError, so that errors.Is(err,
// ErrUnavailable) tells it from a real error such as ENOMEM or EMFILE.
func Open(cfg Config) (*Ring, error) {
	if err := openHook(); err != nil {
		return nil, classify("io_uring_setup", "", err)
	}
	entries := cfg.Entries
	if entries == 0 {
		entries = 1024
	}
	cqEntries := cfg.CQEntries
	if cqEntries == 0 {
		cqEntries = 4 * entries
	}
	p := params{
		flags:     cfg.Flags.setup() | setupCQSize | setupClamp,
		cqEntries: cqEntries,
	}
	if cfg.Flags&SQPoll != 0 {
		p.sqThreadIdle = sqThreadIdle(cfg.SQPollIdle)
	}
	fd, err := sysSetup(entries, &p)
	if err != nil {
		feature := ""
		if errors.Is(err, unix.EINVAL) && cfg.Flags != 0 {
			feature = "setup flags " + cfg.Flags.String()
		}
		return nil, classify("io_uring_setup", feature, err)
	}
	for _, f := range requiredFeatures {
		if p.features&f.bit == 0 {
			unix.Close(fd)
			return nil, &UnavailableError{Feature: f.name, Err: errors.ErrUnsupported}
		}
	}
	r := &Ring{fd: fd, flags: cfg.Flags, params: p, enterFd: fd}
	if err := r.mmap(); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("io_uring: map the rings: %w", os.NewSyscallError("mmap", err))
	}
	r.arg.sigmaskSz = sigsetSize
	if cfg.RegisterRing {
		r.regErr = r.RegisterRing()
	}
	return r, nil
}

// sigsetSize is the kernel's sigset size (_NSIG / 8), which
// io_uring_getevents_arg.sigmask_sz must give even without a mask.
const sigsetSize = 8

// setupSyscall is io_uring_setup(2): it creates a ring of entries
// submission entries as p asks, fills in the rest of p and returns the
// ring's descriptor.
func setupSyscall(entries uint32, p *params) (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// registerSyscall is io_uring_register(2).
func registerSyscall(fd int, op uint32, arg unsafe.Pointer, nrArgs uint32) error {
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), uintptr(op), uintptr(arg),
		uintptr(nrArgs), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// mmap maps the submission ring, the completion ring (the same mapping
// where the kernel has IORING_FEAT_SINGLE_MMAP) and the submission entries,
// at the offsets io_uring_setup returned, and points r's queues into them.
// It unmaps what it mapped when it fails.
func (r *Ring) mmap() error {
	p := &r.params
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED | unix.MAP_POPULATE
	m := &r.maps
	m.sqRingSize = uintptr(p.sqOff.array) + uintptr(p.sqEntries)*unsafe.Sizeof(uint32(0))
	m.cqRingSize = uintptr(p.cqOff.cqes) + uintptr(p.cqEntries)*unsafe.Sizeof(cqe{})
	single := p.features&featSingleMmap != 0
	if single {
		m.sqRingSize = max(m.sqRingSize, m.cqRingSize)
		m.cqRingSize = m.sqRingSize
	}
	var err error
	if m.sqRing, err = unix.MmapPtr(r.fd, offSQRing, nil, m.sqRingSize, prot, flags); err != nil {
		m.sqRing = nil
		return err
	}
	if single {
		m.cqRing = m.sqRing
	} else if m.cqRing, err = unix.MmapPtr(r.fd, offCQRing, nil, m.cqRingSize, prot, flags); err != nil {
		m.cqRing = nil
		r.unmap()
		return err
	}
	m.sqesSize = uintptr(p.sqEntries) * unsafe.Sizeof(sqe{})
	if m.sqes, err = unix.MmapPtr(r.fd, offSQEs, nil, m.sqesSize, prot, flags); err != nil {
		m.sqes = nil
		r.unmap()
		return err
	}
	r.point(m.sqRing, m.cqRing, m.sqes)
	return nil
}

// point sets r's queues up over the rings at sqMem and cqMem and the
// entries at sqes, as the offsets in r.params place them, and maps each
// slot of the submission ring's index array to the entry of the same index
// (so a slot never needs writing again).
func (r *Ring) point(sqMem, cqMem, sqes unsafe.Pointer) {
	p := &r.params
	at := func(base unsafe.Pointer, off uint32) *uint32 { return (*uint32)(unsafe.Add(base, off)) }
	r.sq = sqRing{
		head:    at(sqMem, p.sqOff.head),
		tail:    at(sqMem, p.sqOff.tail),
		flags:   at(sqMem, p.sqOff.flags),
		sqes:    sqes,
		mask:    *at(sqMem, p.sqOff.ringMask),
		entries: *at(sqMem, p.sqOff.ringEntries),
	}
	for i := range r.sq.entries {
		*at(sqMem, p.sqOff.array+i*uint32(unsafe.Sizeof(uint32(0)))) = i
	}
	r.cq = cqRing{
		head: at(cqMem, p.cqOff.head),
		tail: at(cqMem, p.cqOff.tail),
		cqes: unsafe.Add(cqMem, p.cqOff.cqes),
		mask: *at(cqMem, p.cqOff.ringMask),
	}
}

// unmap unmaps whatever of the three regions is mapped.
func (r *Ring) unmap() error {
	m := &r.maps
	var errs []error
	unmap := func(p *unsafe.Pointer, size uintptr) {
		if *p != nil {
			if err := unix.MunmapPtr(*p, size); err != nil {
				errs = append(errs, os.NewSyscallError("munmap", err))
			}
			*p = nil
		}
	}
	unmap(&m.sqes, m.sqesSize)
	if m.cqRing == m.sqRing {
		m.cqRing = nil
	}
	unmap(&m.cqRing, m.cqRingSize)
	unmap(&m.sqRing, m.sqRingSize)
	return errors.Join(errs...)
}

// sqThreadIdle converts Config.SQPollIdle to the kernel's milliseconds,
// rounding up so that a positive idle below 1 ms does not become 0 (which
// the kernel reads as its one-second default).
func sqThreadIdle(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	return uint32(min((d+time.Millisecond-1)/time.Millisecond, math.MaxUint32))
}

var requiredFeatures = []struct {
	bit  uint32
	name string
}{
	{featNoDrop, "IORING_FEAT_NODROP (5.5+)"},
	{featFastPoll, "IORING_FEAT_FAST_POLL (5.7+)"},
	{featExtArg, "IORING_FEAT_EXT_ARG (5.11+)"},
}

// Close unmaps the ring and closes its descriptor. It is idempotent. Close
// the buffer rings first.
func (r *Ring) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.unregisterRing()
	err = errors.Join(err, r.unmap())
	if cerr := unix.Close(r.fd); cerr != nil {
		err = errors.Join(err, os.NewSyscallError("close", cerr))
	}
	return err
}

// Fd returns the ring's file descriptor.
func (r *Ring) Fd() int { return r.fd }

// Flags returns the setup flags the ring was opened with.
func (r *Ring) Flags() Flags { return r.flags }

// Enters returns how many times this ring entered the kernel.
func (r *Ring) Enters() uint64 { return r.enters }

// Completion is one completion queue entry.
type Completion struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// More reports whether a multishot operation stays armed after this
// completion.
func (c Completion) More() bool { return c.Flags&cqeFMore != 0 }

// Buffer returns the provided buffer this completion filled, if any.
func (c Completion) Buffer() (id uint16, ok bool) {
	if c.Flags&cqeFBuffer == 0 {
		return 0, false
	}
	return uint16(c.Flags >> cqeBufferShift), true
}

// Reap copies up to len(dst) ready completions into dst, releases their
// queue slots to the kernel and returns how many it copied.
func (r *Ring) Reap(dst []Completion) int {
	cq := &r.cq
	head := *cq.head
	tail := atomic.LoadUint32(cq.tail)
	n := int(tail - head)
	if n > len(dst) {
		n = len(dst)
	}
	if n == 0 {
		return 0
	}
	for i := 0; i < n; i++ {
		e := (*cqe)(unsafe.Add(cq.cqes, uintptr((head+uint32(i))&cq.mask)*unsafe.Sizeof(cqe{})))
		dst[i] = Completion{UserData: e.userData, Res: e.res, Flags: e.flags}
	}
	atomic.StoreUint32(cq.head, head+uint32(n))
	return n
}

// Ready returns how many completions wait in the completion queue.
func (r *Ring) Ready() int {
	return int(atomic.LoadUint32(r.cq.tail) - *r.cq.head)
}

// Overflowed reports whether the kernel holds completions that did not fit
// in the completion queue (they are delivered by the next enter: nothing is
// lost with IORING_FEAT_NODROP).
func (r *Ring) Overflowed() bool {
	return atomic.LoadUint32(r.sq.flags)&sqCQOverflow != 0
}
