//go:build linux

package poller

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// Event bits, as epoll reports them.
const (
	In    = unix.EPOLLIN
	Out   = unix.EPOLLOUT
	RDHup = unix.EPOLLRDHUP
	Err   = unix.EPOLLERR
	Hup   = unix.EPOLLHUP
	// EdgeTriggered asks for edge-triggered notification.
	EdgeTriggered = unix.EPOLLET
)

// Event is one readiness event, laid out as the kernel's packed struct
// epoll_event.
type Event struct {
	raw unix.EpollEvent
}

// Events returns the event bits that fired.
func (e *Event) Events() uint32 { return e.raw.Events }

// Data returns the 64-bit value the descriptor was registered with.
func (e *Event) Data() uint64 { return *(*uint64)(unsafe.Pointer(&e.raw.Fd)) }

// NewEvent returns the event that reports events for the descriptor
// registered with data, for code that stands in for a Poller in tests.
func NewEvent(events uint32, data uint64) Event {
	e := Event{raw: unix.EpollEvent{Events: events}}
	*(*uint64)(unsafe.Pointer(&e.raw.Fd)) = data
	return e
}

// Poller is one epoll instance with its wake-up (an eventfd under the
// coalescing flag of internal/sys.Waker, the same primitive the io_uring
// loops use).
type Poller struct {
	epfd   int
	wakefd int
	ev     sys.Eventfd
	wake   *sys.Waker
	events []unix.EpollEvent
	// ts is epoll_pwait2's timeout, kept here so that a wait allocates
	// nothing; pwait1 says the kernel lacks epoll_pwait2 (before 5.11,
	// or refused by a seccomp filter): waits round up to milliseconds.
	ts     unix.Timespec
	pwait1 bool
	waits  uint64
	closed bool
}

// WakeData is the Data of the events that Wake causes.
const WakeData = ^uint64(0)

// Open creates an epoll instance that reports up to batch events per wait
// (zero means 256).
func Open(batch int) (*Poller, error) {
	if batch <= 0 {
		batch = 256
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	ev, err := sys.OpenEventfd(true)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	p := &Poller{epfd: epfd, wakefd: ev.Fd(), ev: ev, wake: sys.NewWaker(ev), events: make([]unix.EpollEvent, batch)}
	if err := p.Add(p.wakefd, In, WakeData); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

func (p *Poller) ctl(op, fd int, events uint32, data uint64) error {
	ev := unix.EpollEvent{Events: events}
	*(*uint64)(unsafe.Pointer(&ev.Fd)) = data
	if err := unix.EpollCtl(p.epfd, op, fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// Add registers fd for events, reported with data.
func (p *Poller) Add(fd int, events uint32, data uint64) error {
	return p.ctl(unix.EPOLL_CTL_ADD, fd, events, data)
}

// Modify changes the events and data fd is registered for.
func (p *Poller) Modify(fd int, events uint32, data uint64) error {
	return p.ctl(unix.EPOLL_CTL_MOD, fd, events, data)
}

// Delete removes fd from the poller.
func (p *Poller) Delete(fd int) error {
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// Wait waits up to timeout for events (a negative timeout waits without
// limit, zero only looks) and returns them in the poller's own buffer, valid
// until the next Wait. A wait cut short by a signal returns no events and no
// error. The timeout is kept to the nanosecond with epoll_pwait2 (Linux
// 5.11); where the kernel lacks it, epoll_pwait rounds it up to the next
// millisecond, so that a timer is never woken for early.
func (p *Poller) Wait(timeout time.Duration) ([]Event, error) {
	p.waits++
	var n uintptr
	var errno syscall.Errno
	evp := unsafe.Pointer(&p.events[0])
	nev := uintptr(len(p.events))
	if !p.pwait1 {
		var tsp unsafe.Pointer // nil: no limit
		if timeout >= 0 {
			p.ts = unix.NsecToTimespec(int64(timeout))
			tsp = unsafe.Pointer(&p.ts)
		}
		if timeout == 0 {
			n, _, errno = unix.RawSyscall6(unix.SYS_EPOLL_PWAIT2, uintptr(p.epfd), uintptr(evp), nev, uintptr(tsp), 0, 0)
		} else {
			n, _, errno = unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(p.epfd), uintptr(evp), nev, uintptr(tsp), 0, 0)
		}
		if errno == unix.ENOSYS || errno == unix.EPERM {
			// epoll_pwait2 fails with neither otherwise: the kernel
			// lacks it, or a seccomp filter refuses it.
			p.pwait1 = true
		}
	}
	if p.pwait1 {
		msec := -1
		if timeout >= 0 {
			msec = int((timeout + time.Millisecond - 1) / time.Millisecond)
		}
		if msec == 0 {
			n, _, errno = unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.epfd), uintptr(evp), nev, 0, 0, 0)
		} else {
			n, _, errno = unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(p.epfd), uintptr(evp), nev, uintptr(msec), 0, 0)
		}
	}
	if errno != 0 {
		if errno == unix.EINTR {
			return nil, nil
		}
		return nil, os.NewSyscallError("epoll_pwait", errno)
	}
	return unsafe.Slice((*Event)(evp), int(n)), nil
}

// Waits returns how many times Wait entered the kernel.
func (p *Poller) Waits() uint64 { return p.waits }

// Wake makes the owner's current or next Wait return with a WakeData event.
// It is safe for concurrent use; wake-ups coalesce until the owner calls
// Drain.
func (p *Poller) Wake() error { return p.wake.Wake() }

// Drain consumes the wake-up after a WakeData event, re-enabling Wake. Call
// it before running the work that the wake-up announced.
func (p *Poller) Drain() {
	p.ev.Read()
	p.wake.Woke()
}

// Close closes the epoll instance and the eventfd. It is idempotent.
func (p *Poller) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	err1 := p.wake.Close()
	err2 := unix.Close(p.epfd)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("poller: close: %w", err)
	}
	return nil
}
