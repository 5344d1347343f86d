//go:build linux

package sys

import (
	"encoding/binary"
	"errors"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Waker is a loop's one wake-up primitive, for both backends: a
// descriptor another goroutine signals to interrupt the loop's wait (an
// Eventfd), and a flag that coalesces the wake-ups between two of the
// loop's acknowledgements (Woke) into one signal. epoll waits for the
// eventfd's readability (poller.Poller), io_uring keeps a read of it armed
// in its ring, and io_uring loops that wake each other by MSG_RING do it
// under the same flag (Claim), so that a loop woken either way is woken
// once.
type Waker struct {
	s     Signaler
	woken atomic.Bool
}

// Signaler is what a Waker signals: an Eventfd, or a test's stand-in.
type Signaler interface {
	Fd() int
	Signal() error
	Close() error
}

// NewWaker returns a Waker over s, which it then owns (Close closes it).
func NewWaker(s Signaler) *Waker { return &Waker{s: s} }

// Fd returns the signalled descriptor, for the loop's wait.
func (w *Waker) Fd() int { return w.s.Fd() }

// Wake makes the loop's current or next wait return, unless a wake-up is
// on its way already. It is safe for concurrent use.
func (w *Waker) Wake() error {
	if w.woken.Swap(true) {
		return nil
	}
	return w.s.Signal()
}

// Signal signals whatever the flag says: for a wake-up that was claimed
// (Claim) and must now go through the descriptor after all.
func (w *Waker) Signal() error { return w.s.Signal() }

// Claim sets the flag for a wake-up that the caller delivers some other
// way (a MSG_RING) and reports whether it was clear: false means a wake-up
// is on its way already.
func (w *Waker) Claim() bool { return !w.woken.Swap(true) }

// Woke clears the flag: the loop has seen the wake-up (its read of the
// eventfd, or a MSG_RING, arrived, or one it claimed failed), and the next
// Wake signals again. The loop calls it before it runs the work the
// wake-up announced.
func (w *Waker) Woke() { w.woken.Store(false) }

// Pending reports whether the flag is set: a wake-up is on its way.
func (w *Waker) Pending() bool { return w.woken.Load() }

// Close closes the signalled descriptor.
func (w *Waker) Close() error { return w.s.Close() }

// Eventfd is an eventfd(2) descriptor.
type Eventfd int

// OpenEventfd opens an eventfd: non-blocking when the loop reads it with
// read(2) after epoll reports it (Read), blocking when the ring reads it
// (the read completes when the counter is written, not with EAGAIN).
func OpenEventfd(nonblock bool) (Eventfd, error) {
	flags := unix.EFD_CLOEXEC
	if nonblock {
		flags |= unix.EFD_NONBLOCK
	}
	fd, err := unix.Eventfd(0, flags)
	if err != nil {
		return -1, os.NewSyscallError("eventfd", err)
	}
	return Eventfd(fd), nil
}

// Fd returns the descriptor.
func (e Eventfd) Fd() int { return int(e) }

// Signal adds one to the counter. A full counter (EAGAIN, non-blocking)
// is a wake-up already pending.
func (e Eventfd) Signal() error {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	if _, err := unix.Write(int(e), one[:]); err != nil && !errors.Is(err, unix.EAGAIN) {
		return os.NewSyscallError("write", err)
	}
	return nil
}

// Read consumes the counter of a non-blocking eventfd.
func (e Eventfd) Read() {
	var buf [8]byte
	_, _ = unix.Read(int(e), buf[:])
}

// Close closes the descriptor.
func (e Eventfd) Close() error {
	if err := unix.Close(int(e)); err != nil {
		return os.NewSyscallError("close", err)
	}
	return nil
}
