//go:build linux

package poller

import (
	"unsafe"

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
// descriptor is non-blocking and close-on-exec.
func Accept(fd int) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(fd), 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(r), 0
}

// Connect starts a connect of the non-blocking socket fd to the raw socket
// address sa of n bytes; unix.EINPROGRESS means it goes on.
func Connect(fd int, sa unsafe.Pointer, n uint32) unix.Errno {
	_, _, errno := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(sa), uintptr(n))
	return errno
}
