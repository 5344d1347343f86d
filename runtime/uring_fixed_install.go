//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// A real descriptor for a connection on a slot of the io_uring driver's
// fixed file table (uring_fixed.go), made once where one is needed
// (Conn.Fd, the addresses, SendFile, the hand-over to a new process) with
// IORING_OP_FIXED_FD_INSTALL, submitted and waited for on the loop's
// thread; the completions reaped meanwhile are kept (stash) and
// dispatched first, in the kernel's order.

// installWait bounds the wait for an install's completion. The kernel
// completes it inline, within the submit; only a completion queue that
// overflowed delays it to the next enter.
const installWait = time.Second

// descriptor returns c's descriptor, installing one for its slot the
// first time.
func (d *uringDriver) descriptor(c *Conn) (int, error) {
	if c.fd >= 0 {
		return int(c.fd), nil
	}
	if c.ur.fixed == 0 {
		return -1, net.ErrClosed
	}
	fd, err := d.install(int(c.ur.fixed - 1))
	if err != nil {
		return -1, err
	}
	c.fd = int32(fd)
	return fd, nil
}

// install makes a real descriptor of the table's slot: it submits an
// IORING_OP_FIXED_FD_INSTALL and waits for its completion, keeping every
// other completion it reaps meanwhile for dispatch. A submission queue
// that takes no entry (the kernel refuses entries while the completions
// it holds back have no room: ring.ErrBusy) is reaped and tried again
// within the wait, as the wait for the completion is. An install whose
// wait gives up once prepared is counted in the loop's operations until
// its completion, which closes the descriptor (installLate), so that the
// loop does not exit with it in flight.
func (d *uringDriver) install(slot int) (int, error) {
	fx := &d.fx
	wait := installWait
	if fx.wait > 0 {
		wait = fx.wait
	}
	deadline := time.Now().Add(wait)
	fx.seq++
	ud := userData(kindInstall, fx.seq, 0)
	for {
		err := fx.r.PrepareFixedFdInstall(slot, ud)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("install a descriptor: %w", err)
		}
		if err := d.r.Submit(); err != nil && !errors.Is(err, ring.ErrBusy) {
			return -1, fmt.Errorf("install a descriptor: %w", err)
		}
		d.stashReady(0)
	}
	for first := true; ; first = false {
		var err error
		if first {
			err = d.r.Submit()
		} else {
			err = d.r.SubmitAndWait(10 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, ring.ErrBusy) {
			d.loopOps++ // prepared, perhaps submitted: installLate
			return -1, fmt.Errorf("install a descriptor: %w", err)
		}
		if e, found := d.stashReady(ud); found && e.Res < 0 {
			return -1, fmt.Errorf("install a descriptor: %w", os.NewSyscallError("io_uring FIXED_FD_INSTALL", unix.Errno(-e.Res)))
		} else if found {
			return int(e.Res), nil
		}
		if time.Now().After(deadline) {
			d.loopOps++ // its completion, when it comes: installLate
			return -1, fmt.Errorf("install a descriptor: no completion after %v", wait)
		}
	}
}

// stashReady reaps every completion ready into the stash, but for the
// one with user data ud (an install's; 0 for none: no kind is 0), which
// it returns if found.
func (d *uringDriver) stashReady(ud uint64) (ring.Completion, bool) {
	var batch [64]ring.Completion
	var got ring.Completion
	found := false
	for {
		n := d.r.Reap(batch[:])
		for _, e := range batch[:n] {
			if ud != 0 && e.UserData == ud {
				got, found = e, true
				continue
			}
			d.fx.stash = append(d.fx.stash, e)
		}
		if n < len(batch) {
			return got, found
		}
	}
}

// installLate handles the completion of an install whose wait gave up
// (counted in the loop's operations meanwhile): it closes the descriptor.
func (d *uringDriver) installLate(e *ring.Completion) {
	d.loopOps--
	if e.Res >= 0 {
		_ = unix.Close(int(e.Res))
	}
}

// reap copies up to len(dst) completions into dst: those an install
// stashed first, then the ring's, in the order the kernel posted them.
func (d *uringDriver) reap(dst []ring.Completion) int {
	n := 0
	if s := d.fx.stash; len(s) > 0 {
		n = copy(dst, s)
		rest := copy(s, s[n:])
		d.fx.stash = s[:rest]
		if n == len(dst) {
			return n
		}
	}
	return n + d.r.Reap(dst[n:])
}

// ready is how many completions reap has to hand on.
func (d *uringDriver) ready() int { return len(d.fx.stash) + d.r.Ready() }
