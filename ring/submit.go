package ring

// Handing prepared entries to the kernel: the enter, the wait for an SQPOLL
// thread, and making room in a full submission queue.

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Pending returns how many prepared submissions have not been handed to the
// kernel yet.
func (r *Ring) Pending() uint32 {
	return r.sq.sqeTail - atomic.LoadUint32(r.sq.head)
}

// flush publishes the prepared entries to the kernel and returns how many
// the kernel has not consumed yet.
func (r *Ring) flush() uint32 {
	sq := &r.sq
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
	flags := uint32(enterGetEvents)
	if r.flags&SQPoll != 0 {
		sqFlags := atomic.LoadUint32(r.sq.flags)
		if sqFlags&sqNeedWakeup != 0 {
			flags |= enterSQWakeup
		} else if !wait && sqFlags&(sqCQOverflow|sqTaskrun) == 0 {
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
			flags |= enterExtArg
		}
		if timeout >= 0 {
			r.ts = unix.NsecToTimespec(int64(timeout))
			r.arg.ts = uint64(uintptr(unsafe.Pointer(&r.ts)))
			argp = unsafe.Pointer(&r.arg)
			argSize = unsafe.Sizeof(r.arg)
			flags |= enterExtArg
		}
	}
	r.enters++
	var errno syscall.Errno
	if wait {
		_, _, errno = unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.enterFd), uintptr(submit),
			minComplete, uintptr(flags|r.enterFlags), uintptr(argp), argSize)
	} else {
		_, _, errno = unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.enterFd), uintptr(submit),
			0, uintptr(flags|r.enterFlags), 0, 0)
	}
	return enterError(errno)
}

// sqWait waits until the SQPoll thread has consumed entries from a full
// submission queue (IORING_ENTER_SQ_WAIT), waking it first if it sleeps.
// It uses the ordinary syscall path: the poller may take a moment.
func (r *Ring) sqWait() error {
	r.flush()
	flags := uint32(enterSQWait)
	if atomic.LoadUint32(r.sq.flags)&sqNeedWakeup != 0 {
		flags |= enterSQWakeup
	}
	r.enters++
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.enterFd), 0, 0, uintptr(flags|r.enterFlags), 0, 0)
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

// sqe returns the next free submission entry, handing the queue to the
// kernel first when it is full (with SQPoll, waiting for the poller thread to
// take entries). It fails only when the kernel will not take entries at all.
func (r *Ring) sqe() (*sqe, error) {
	sq := &r.sq
	if sq.sqeTail+1-atomic.LoadUint32(sq.head) > sq.entries {
		if err := r.makeRoom(1); err != nil {
			return nil, err
		}
	}
	e := (*sqe)(unsafe.Add(sq.sqes, uintptr(sq.sqeTail&sq.mask)*unsafe.Sizeof(sqe{})))
	sq.sqeTail++
	*e = sqe{}
	return e, nil
}

// Tries without progress before makeRoom gives up. Without SQPoll, Submit
// consumes the entries in the call, so a queue still full after a few
// submits means the kernel refuses them. With SQPoll, IORING_ENTER_SQ_WAIT
// sleeps until the poller thread has taken entries and comes back early only
// for a signal, and Go's runtime signals its threads (preemption, profiling,
// the race detector's); on a loaded machine the poller may be off the CPU
// across several of them (CI saw 8 in a row), so a full queue after the
// enter says nothing about the kernel: only the count bounds a broken one.
const (
	submitTries = 8
	sqWaitTries = 1 << 14
)

// makeRoom hands the queue to the kernel until n entries are free.
func (r *Ring) makeRoom(n uint32) error {
	sq := &r.sq
	tries := submitTries
	if r.flags&SQPoll != 0 {
		tries = sqWaitTries
	}
	for try := 0; sq.sqeTail+n-atomic.LoadUint32(sq.head) > sq.entries; try++ {
		if try == tries {
			return fmt.Errorf("submission queue full: the kernel took no entries after %d submits", try)
		}
		var err error
		if r.flags&SQPoll != 0 {
			err = r.sqWait()
		} else {
			err = r.Submit()
		}
		if err != nil && !errors.Is(err, ErrBusy) {
			return err
		}
	}
	return nil
}

// Reserve makes room for n submissions, handing the queue to the kernel
// first if it has fewer free entries, so that the next n Prepare calls
// land in one submission: a chain made with Link must not be split
// between two enters. It fails when the kernel takes nothing, or when n
// is more than the queue holds.
func (r *Ring) Reserve(n uint32) error {
	if n > r.sq.entries {
		return fmt.Errorf("reserve %d submissions: the queue holds %d", n, r.sq.entries)
	}
	return r.makeRoom(n)
}
