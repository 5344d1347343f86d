//go:build linux

package sys

import (
	"os"

	"golang.org/x/sys/unix"
)

// StreamSocket creates a non-blocking, close-on-exec stream socket of
// family, for a dial. An AF_INET or AF_INET6 socket gets TCP_NODELAY, as
// the loop's accepted connections do (a failure to set it is ignored: the
// socket still works, only slower for small writes).
func StreamSocket(family int) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if family != unix.AF_UNIX {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}
	return fd, nil
}

// Accept accepts a connection on the listening socket fd with accept4(2),
// as a raw system call (the socket is non-blocking: the kernel never
// blocks it, and no scheduler hand-off is needed); the new descriptor is
// non-blocking and close-on-exec. It returns the kernel's errno as it is
// (unix.EAGAIN included).
func Accept(fd int) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(fd), 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(r), 0
}

// SocketInfo is what an inherited descriptor is, as getsockopt(2) tells.
type SocketInfo struct {
	Domain    int  // SO_DOMAIN: unix.AF_INET, AF_INET6, AF_UNIX, ...
	Type      int  // SO_TYPE: unix.SOCK_STREAM, SOCK_DGRAM, ...
	Listening bool // SO_ACCEPTCONN: listen(2) was called (stream sockets)
}

// InspectSocket reports what the socket fd is. It fails (with ENOTSOCK)
// for a descriptor that is not a socket; the error names the option that
// could not be read.
func InspectSocket(fd int) (SocketInfo, error) {
	var si SocketInfo
	var err error
	if si.Domain, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil {
		return si, os.NewSyscallError("getsockopt SO_DOMAIN", err)
	}
	if si.Type, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil {
		return si, os.NewSyscallError("getsockopt SO_TYPE", err)
	}
	if si.Type == unix.SOCK_STREAM {
		on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		si.Listening = err == nil && on != 0
	}
	return si, nil
}

// Domain returns the socket's address family (SO_DOMAIN).
func Domain(fd int) (int, error) { return unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN) }

// SetInt sets an integer socket option.
func SetInt(fd, level, opt, value int) error { return unix.SetsockoptInt(fd, level, opt, value) }

// SetNoDelay turns Nagle's algorithm off on a TCP socket.
func SetNoDelay(fd int) error { return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1) }

// ConnectError returns the result of a non-blocking connect that epoll
// reported writable (SO_ERROR): nil when it connected.
func ConnectError(fd int) error {
	soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && soerr != 0 {
		err = unix.Errno(soerr)
	}
	return err
}

// Readable reports whether fd has input waiting (poll(2) without waiting):
// for a listening socket, a connection in its backlog. When it cannot tell
// it reports true.
func Readable(fd int) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds[:], 0)
	return err != nil || n > 0
}

// ShutdownWrite shuts the write side of the socket down.
func ShutdownWrite(fd int) error { return unix.Shutdown(fd, unix.SHUT_WR) }

// Close closes fd.
func Close(fd int) error { return unix.Close(fd) }

// DupCloexec duplicates fd, close-on-exec, onto the lowest free number.
func DupCloexec(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) }

// DupNonblock returns a close-on-exec, non-blocking duplicate of fd. (The
// file description is shared: O_NONBLOCK is set on it for every holder.)
func DupNonblock(fd int) (int, error) {
	dup, err := DupCloexec(fd)
	if err != nil {
		return -1, os.NewSyscallError("fcntl", err)
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return -1, os.NewSyscallError("fcntl", err)
	}
	return dup, nil
}

// IsOpen reports an error unless fd is an open descriptor (F_GETFD).
func IsOpen(fd int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err
}

// SetCloseOnExec marks fd close-on-exec.
func SetCloseOnExec(fd int) { unix.CloseOnExec(fd) }

// StatusFlags returns the file status flags of fd (F_GETFL: O_DIRECT,
// O_NONBLOCK, ...).
func StatusFlags(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0) }

// KernelRelease returns the running kernel's release (uname -r), or
// "unknown".
func KernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}
