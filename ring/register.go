//go:build linux

package ring

import (
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Registrations with io_uring_register(2) beyond the buffer rings: the
// ring's own descriptor, the fixed file table of direct descriptors, and
// NAPI busy polling. Each returns an *UnavailableError (errors.Is
// ErrUnavailable) where the kernel refuses it as unknown, so that a caller
// can fall back; Probe's Features say the same in advance.

// RegisterRing registers the ring's descriptor in the calling thread's
// table of registered rings (IORING_REGISTER_RING_FDS, 5.18+): from then
// on every enter passes the table's index with
// IORING_ENTER_REGISTERED_RING, and the kernel skips the descriptor
// lookup (fdget/fdput) it otherwise does on each enter. The table belongs
// to the OS thread, not the ring, so the owner must stay on the thread
// that registered (runtime.LockOSThread, as a loop does) until Close,
// which unregisters it. Where the kernel refuses (an older kernel, or
// EBUSY when the thread's 16 slots are taken) the ring keeps entering
// through its descriptor, and the error says why.
func (r *Ring) RegisterRing() error {
	if r.enterFlags&enterRegisteredRing != 0 {
		return nil
	}
	up := &rsrcUpdate{offset: registerRingFdAlloc, data: uint64(r.fd)}
	if err := sysRegister(r.fd, registerRingFds, unsafe.Pointer(up), 1); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("register ring descriptor: this thread's registered rings are all taken: %w",
				os.NewSyscallError("io_uring_register(RING_FDS)", err))
		}
		return fmt.Errorf("register ring descriptor: %w", classify("io_uring_register(RING_FDS)",
			RegisteredRing.String(), err))
	}
	r.regTid = unix.Gettid()
	r.enterFd = int(up.offset)
	r.enterFlags = enterRegisteredRing
	return nil
}

// RingRegistered reports whether enters use the registered descriptor,
// and, when Config.RegisterRing asked for it and it is not, why.
func (r *Ring) RingRegistered() (bool, error) {
	return r.enterFlags&enterRegisteredRing != 0, r.regErr
}

// unregisterRing undoes RegisterRing. On another thread than the one that
// registered, the index would name that thread's slot (perhaps another
// ring's), so it leaves the registration to the kernel, which drops it
// when the registering thread exits, and says so.
func (r *Ring) unregisterRing() error {
	if r.enterFlags&enterRegisteredRing == 0 {
		return nil
	}
	idx := r.enterFd
	r.enterFd, r.enterFlags = r.fd, 0
	if tid := unix.Gettid(); tid != r.regTid {
		return fmt.Errorf("unregister ring descriptor: closed on thread %d, registered on thread %d: "+
			"the registration stays until that thread exits", tid, r.regTid)
	}
	up := &rsrcUpdate{offset: uint32(idx)}
	if err := sysRegister(r.fd, unregisterRingFds, unsafe.Pointer(up), 1); err != nil {
		return fmt.Errorf("unregister ring descriptor: %w", os.NewSyscallError("io_uring_register(UNREGISTER_RING_FDS)", err))
	}
	return nil
}

// RegisterFiles gives the ring a fixed file table of n empty slots
// (IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE, 5.19+), for
// direct descriptors: PrepareAcceptMultishotDirect fills its slots, and
// operations on a slot (FixedFile, PrepareCloseDirect) skip the
// process's descriptor table. n may not exceed RLIMIT_NOFILE (EMFILE); a
// direct descriptor does not count against that limit once it is in the
// table. The ring holds one table: a second registration is EBUSY.
func (r *Ring) RegisterFiles(n uint32) error {
	reg := &rsrcRegister{nr: n, flags: rsrcRegisterSparse}
	if err := sysRegister(r.fd, registerFiles2, unsafe.Pointer(reg), uint32(unsafe.Sizeof(*reg))); err != nil {
		return fmt.Errorf("register %d direct descriptors: %w", n, classify("io_uring_register(FILES2)",
			DirectDescriptors.String(), err))
	}
	r.files = n
	return nil
}

// Files returns the size of the fixed file table, 0 without one.
func (r *Ring) Files() uint32 { return r.files }

// UnregisterFiles drops the fixed file table, closing every direct
// descriptor still in it. Closing the ring does the same.
func (r *Ring) UnregisterFiles() error {
	if err := sysRegister(r.fd, unregisterFiles, nil, 0); err != nil {
		return fmt.Errorf("unregister direct descriptors: %w", os.NewSyscallError("io_uring_register(UNREGISTER_FILES)", err))
	}
	r.files = 0
	return nil
}

// RegisterNAPI turns NAPI busy polling on for this ring
// (IORING_REGISTER_NAPI, 6.9+, on a kernel built with
// CONFIG_NET_RX_BUSY_POLL): while the ring waits for completions, the
// kernel polls the receive queues of the NICs its sockets use for up to
// busyPoll (rounded down to microseconds; at least one) before it
// sleeps, and with prefer also defers the device's interrupts
// (SO_PREFER_BUSY_POLL). It tracks the queues dynamically, from the
// sockets' NAPI ids. Loopback and other virtual devices have no NAPI
// context: the registration succeeds and polls nothing.
func (r *Ring) RegisterNAPI(busyPoll time.Duration, prefer bool) error {
	reg := &napiReg{busyPollTo: uint32(min(max(busyPoll/time.Microsecond, 1), 1<<32-1))}
	if prefer {
		reg.preferBusyPoll = 1
	}
	if err := sysRegister(r.fd, registerNAPI, unsafe.Pointer(reg), 1); err != nil {
		return fmt.Errorf("register NAPI busy polling: %w", classify("io_uring_register(NAPI)", NAPI.String(), err))
	}
	return nil
}

// UnregisterNAPI turns NAPI busy polling off and returns the settings it
// had (zero if it was off).
func (r *Ring) UnregisterNAPI() (busyPoll time.Duration, prefer bool, err error) {
	reg := &napiReg{}
	if err := sysRegister(r.fd, unregisterNAPI, unsafe.Pointer(reg), 1); err != nil {
		return 0, false, fmt.Errorf("unregister NAPI busy polling: %w", classify("io_uring_register(UNREGISTER_NAPI)", NAPI.String(), err))
	}
	return time.Duration(reg.busyPollTo) * time.Microsecond, reg.preferBusyPoll != 0, nil
}
