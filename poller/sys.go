//go:build linux

package poller

import (
	"unsafe"

	"github.com/percore/percore/internal/sys"

	"golang.org/x/sys/unix"
)

// The socket calls of an epoll loop, on non-blocking descriptors: the
// kernel never blocks them, so they use raw system calls (no scheduler
// hand-off) and allocate nothing. Each returns the kernel's errno as it is
// (unix.EAGAIN included); the caller turns it into an error. They keep the
// runtime free of raw syscall code, as package ring does for io_uring.

// Read reads into p.
func Read(fd int, p []byte) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}

// Write writes p.
func Write(fd int, p []byte) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)))
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}

// Writev writes the buffers iov describes (see SetIovec).
func Writev(fd int, iov []unix.Iovec) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}

// SetIovec points v at p.
func SetIovec(v *unix.Iovec, p []byte) {
	v.Base = unsafe.SliceData(p)
	v.SetLen(len(p))
}

// Accept accepts a connection on the listening socket fd; the new
// descriptor is non-blocking and close-on-exec (internal/sys.Accept, which
// the io_uring loop uses too).
func Accept(fd int) (int, unix.Errno) { return sys.Accept(fd) }

// Connect starts a connect of the non-blocking socket fd to the raw socket
// address sa of n bytes; unix.EINPROGRESS means it goes on.
func Connect(fd int, sa unsafe.Pointer, n uint32) unix.Errno {
	_, _, errno := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(sa), uintptr(n))
	return errno
}

// Mmsghdr is the kernel's struct mmsghdr: one message of a Recvmmsg or
// Sendmmsg batch and, after the call, its length.
type Mmsghdr struct {
	Hdr unix.Msghdr
	Len uint32
	_   [4]byte
}

// Recvmmsg receives up to len(msgs) datagrams on fd in one system call
// (recvmmsg(2)) and returns how many arrived; each one's length is in its
// Len, and its Hdr's Namelen, Controllen and Flags are the kernel's.
func Recvmmsg(fd int, msgs []Mmsghdr, flags int) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(msgs))),
		uintptr(len(msgs)), uintptr(flags), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}

// Sendmmsg sends up to len(msgs) datagrams on fd in one system call
// (sendmmsg(2)) and returns how many the kernel took. An error on the
// first is returned as its errno; one on a later datagram ends the batch
// there, and the next call reports it.
func Sendmmsg(fd int, msgs []Mmsghdr, flags int) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(msgs))),
		uintptr(len(msgs)), uintptr(flags), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), 0
}
