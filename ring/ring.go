package ring

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
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
		s |= giouring.SetupSingleIssuer
	}
	if f&DeferTaskrun != 0 {
		s |= giouring.SetupDeferTaskrun
	}
	if f&CoopTaskrun != 0 {
		s |= giouring.SetupCoopTaskrun | giouring.SetupTaskrunFlag
	}
	if f&SQPoll != 0 {
		s |= giouring.SetupSQPoll
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
}

// Ring is one io_uring instance. It is owned by one goroutine: see the
// package documentation.
type Ring struct {
	gr       *giouring.Ring
	sq       *sqLayout
	cq       *cqLayout
	features uint32
	fd       int
	flags    Flags

	// The wait arguments live here, not on the stack, so that a timed
	// wait allocates nothing. arg.minWait (microseconds) is set by
	// SetBatchWait and is zero unless batching is on.
	arg getEventsArg
	ts  unix.Timespec

	enters uint64
	closed bool

	// Batched waits: wait for waitNr completions, but no longer than
	// arg.minWait once at least one is there (IORING_FEAT_MIN_TIMEOUT).
	waitNr uint32
}

// featMinTimeout is IORING_FEAT_MIN_TIMEOUT (6.12+), which giouring at the
// pinned version does not name.
const featMinTimeout = 1 << 15

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
	if r.features&featMinTimeout == 0 {
		return fmt.Errorf("batched waits need IORING_FEAT_MIN_TIMEOUT (6.12+): %w", errors.ErrUnsupported)
	}
	r.waitNr = uint32(n)
	r.arg.minWait = uint32(min(max(minWait/time.Microsecond, 1), math.MaxUint32))
	return nil
}

// getEventsArg is struct io_uring_getevents_arg.
type getEventsArg struct {
	sigmask   uint64
	sigmaskSz uint32
	minWait   uint32
	ts        uint64
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
	var p giouring.Params
	pv := viewParams(&p)
	pv.flags = cfg.Flags.setup() | giouring.SetupCQSize | giouring.SetupClamp
	pv.cqEntries = cqEntries
	if cfg.Flags&SQPoll != 0 {
		pv.sqThreadIdle = sqThreadIdle(cfg.SQPollIdle)
	}
	gr := giouring.NewRing()
	if err := gr.QueueInitParams(entries, &p); err != nil {
		feature := ""
		if errors.Is(err, unix.EINVAL) && cfg.Flags != 0 {
			feature = "setup flags " + cfg.Flags.String()
		}
		return nil, classify("io_uring_setup", feature, err)
	}
	v := viewRing(gr)
	r := &Ring{
		gr:       gr,
		sq:       v.sq,
		cq:       v.cq,
		features: v.features,
		fd:       v.ringFd,
		flags:    cfg.Flags,
	}
	r.arg.sigmaskSz = 8 // _NSIG / 8
	for _, f := range requiredFeatures {
		if r.features&f.bit == 0 {
			r.gr.QueueExit()
			return nil, &UnavailableError{Feature: f.name, Err: errors.ErrUnsupported}
		}
	}
	return r, nil
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
	{giouring.FeatNoDrop, "IORING_FEAT_NODROP (5.5+)"},
	{giouring.FeatFastPoll, "IORING_FEAT_FAST_POLL (5.7+)"},
	{giouring.FeatExtArg, "IORING_FEAT_EXT_ARG (5.11+)"},
}

// Close unmaps the ring and closes its descriptor. It is idempotent. Close
// the buffer rings first.
func (r *Ring) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.gr.QueueExit()
	return nil
}

// Fd returns the ring's file descriptor.
func (r *Ring) Fd() int { return r.fd }

// Flags returns the setup flags the ring was opened with.
func (r *Ring) Flags() Flags { return r.flags }

// Enters returns how many times this ring entered the kernel.
func (r *Ring) Enters() uint64 { return r.enters }

// Pending returns how many prepared submissions have not been handed to the
// kernel yet.
func (r *Ring) Pending() uint32 {
	return r.sq.sqeTail - atomic.LoadUint32(r.sq.head)
}

// flush publishes the prepared entries to the kernel and returns how many
// the kernel has not consumed yet.
func (r *Ring) flush() uint32 {
	sq := r.sq
	if sq.sqeHead != sq.sqeTail {
		sq.sqeHead = sq.sqeTail
		atomic.StoreUint32(sq.tail, sq.sqeTail)
	}
	return sq.sqeTail - atomic.LoadUint32(sq.head)
}

// Submit hands every prepared entry to the kernel and collects whatever
// completions are ready, without waiting. It uses a raw syscall: the kernel
// never blocks it. With SQPoll it enters the kernel only when the poller
// thread needs a wake-up or completions wait to be flushed; otherwise
// publishing the entries is enough.
func (r *Ring) Submit() error {
	return r.enter(false, -1)
}

// SubmitAndWait hands every prepared entry to the kernel and waits until at
// least one completion is ready or timeout passes (a negative timeout waits
// without limit). It uses the ordinary syscall path, so that Go's scheduler
// can hand this thread's P to other goroutines while it sleeps. A timeout
// that passes is not an error.
func (r *Ring) SubmitAndWait(timeout time.Duration) error {
	return r.enter(true, timeout)
}

func (r *Ring) enter(wait bool, timeout time.Duration) error {
	submit := r.flush()
	flags := giouring.EnterGetEvents
	if r.flags&SQPoll != 0 {
		sqFlags := atomic.LoadUint32(r.sq.flags)
		if sqFlags&giouring.SQNeedWakeup != 0 {
			flags |= giouring.EnterSQWakeup
		} else if !wait && sqFlags&(giouring.SQCQOverflow|giouring.SQTaskrun) == 0 {
			// The poller thread is awake and will see the entries
			// just published, and the kernel holds no completions
			// back: the enter would do nothing (liburing skips it
			// too).
			return nil
		}
		submit = 0 // the poller thread consumes them
	}
	var minComplete uintptr
	var argp unsafe.Pointer
	argSize := uintptr(0)
	if wait {
		minComplete = 1
		if r.waitNr > 1 {
			minComplete = uintptr(r.waitNr)
			r.arg.ts = 0 // no timeout unless one is set below
			argp = unsafe.Pointer(&r.arg)
			argSize = unsafe.Sizeof(r.arg)
			flags |= giouring.EnterExtArg
		}
		if timeout >= 0 {
			r.ts = unix.NsecToTimespec(int64(timeout))
			r.arg.ts = uint64(uintptr(unsafe.Pointer(&r.ts)))
			argp = unsafe.Pointer(&r.arg)
			argSize = unsafe.Sizeof(r.arg)
			flags |= giouring.EnterExtArg
		}
	}
	r.enters++
	var errno syscall.Errno
	if wait {
		_, _, errno = unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(submit),
			minComplete, uintptr(flags), uintptr(argp), argSize)
	} else {
		_, _, errno = unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(submit),
			0, uintptr(flags), 0, 0)
	}
	return enterError(errno)
}

// sqWait waits until the SQPoll thread has consumed entries from a full
// submission queue (IORING_ENTER_SQ_WAIT), waking it first if it sleeps.
// It uses the ordinary syscall path: the poller may take a moment.
func (r *Ring) sqWait() error {
	r.flush()
	flags := giouring.EnterSQWait
	if atomic.LoadUint32(r.sq.flags)&giouring.SQNeedWakeup != 0 {
		flags |= giouring.EnterSQWakeup
	}
	r.enters++
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 0, 0, uintptr(flags), 0, 0)
	return enterError(errno)
}

// enterError maps the errno of io_uring_enter to what Submit and
// SubmitAndWait return.
func enterError(errno syscall.Errno) error {
	switch errno {
	case 0, unix.ETIME, unix.EINTR:
		return nil
	case unix.EAGAIN, unix.EBUSY:
		// The kernel is short of resources or holds overflowed
		// completions: reap, then enter again.
		return ErrBusy
	}
	return os.NewSyscallError("io_uring_enter", errno)
}

// ErrBusy reports that the kernel did not take the submissions this time:
// reap the completion queue and enter again.
var ErrBusy = errors.New("io_uring busy: reap completions and retry")

// Completion is one completion queue entry.
type Completion struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// More reports whether a multishot operation stays armed after this
// completion.
func (c Completion) More() bool { return c.Flags&giouring.CQEFMore != 0 }

// Buffer returns the provided buffer this completion filled, if any.
func (c Completion) Buffer() (id uint16, ok bool) {
	if c.Flags&giouring.CQEFBuffer == 0 {
		return 0, false
	}
	return uint16(c.Flags >> giouring.CQEBufferShift), true
}

// Reap copies up to len(dst) ready completions into dst, releases their
// queue slots to the kernel and returns how many it copied.
func (r *Ring) Reap(dst []Completion) int {
	cq := r.cq
	head := *cq.head
	tail := atomic.LoadUint32(cq.tail)
	n := int(tail - head)
	if n > len(dst) {
		n = len(dst)
	}
	if n == 0 {
		return 0
	}
	mask := *cq.ringMask
	base := unsafe.Pointer(cq.cqes)
	for i := 0; i < n; i++ {
		e := (*giouring.CompletionQueueEvent)(unsafe.Add(base, uintptr((head+uint32(i))&mask)*unsafe.Sizeof(giouring.CompletionQueueEvent{})))
		dst[i] = Completion{UserData: e.UserData, Res: e.Res, Flags: e.Flags}
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
	return atomic.LoadUint32(r.sq.flags)&giouring.SQCQOverflow != 0
}

// sqe returns the next free submission entry, handing the queue to the
// kernel first when it is full (with SQPoll, waiting for the poller thread to
// take entries). It fails only when the kernel will not take entries at all.
func (r *Ring) sqe() (*giouring.SubmissionQueueEntry, error) {
	sq := r.sq
	for try := 0; ; try++ {
		next := sq.sqeTail + 1
		if next-atomic.LoadUint32(sq.head) <= *sq.ringEntries {
			e := (*giouring.SubmissionQueueEntry)(unsafe.Add(unsafe.Pointer(sq.sqes),
				uintptr(sq.sqeTail&*sq.ringMask)*unsafe.Sizeof(giouring.SubmissionQueueEntry{})))
			sq.sqeTail = next
			*e = giouring.SubmissionQueueEntry{}
			return e, nil
		}
		if try == 8 {
			return nil, fmt.Errorf("submission queue full: the kernel took no entries after %d submits", try)
		}
		var err error
		if r.flags&SQPoll != 0 {
			err = r.sqWait()
		} else {
			err = r.Submit()
		}
		if err != nil && !errors.Is(err, ErrBusy) {
			return nil, err
		}
	}
}
