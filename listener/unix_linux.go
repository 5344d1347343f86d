//go:build linux

package listener

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// listenUnix returns a listening Unix stream socket bound to path, after
// clearing a stale socket file there.
func listenUnix(path string, cfg Config) (*Listener, error) {
	addr := &net.UnixAddr{Name: path, Net: "unix"}
	fail := func(err error) (*Listener, error) {
		return nil, &net.OpError{Op: "listen", Net: "unix", Addr: addr, Err: err}
	}
	// A path name lives in the filesystem; "" (autobind) and "@name" are in
	// the abstract namespace and vanish with the socket.
	onDisk := path != "" && path[0] != '@'
	// sun_path holds a path name and its terminating NUL, or an abstract
	// name without one.
	if room := len(unix.RawSockaddrUnix{}.Path) - boolInt(onDisk); len(path) > room {
		return fail(fmt.Errorf("the name is %d bytes, more than the %d a unix socket address holds", len(path), room))
	}
	n := backlog(cfg.Backlog, somaxconnPath)
	var occupant string
	if onDisk {
		var err error
		if occupant, err = clearStale(path); err != nil {
			return fail(err)
		}
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(os.NewSyscallError("socket", err))
	}
	// No SO_REUSEADDR or SO_REUSEPORT: they mean nothing for AF_UNIX, and
	// recent kernels refuse SO_REUSEPORT on it.
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		err = os.NewSyscallError("bind", err)
		if occupant != "" && errors.Is(err, unix.EADDRINUSE) {
			err = fmt.Errorf("%w (%s)", err, occupant)
		}
		return fail(err)
	}
	undo := func(err error) (*Listener, error) {
		if onDisk {
			_ = unix.Unlink(path)
		}
		unix.Close(fd)
		return fail(err)
	}
	if onDisk && cfg.UnixMode != 0 {
		if err := unix.Fchmodat(unix.AT_FDCWD, path, uint32(cfg.UnixMode.Perm()), 0); err != nil {
			return undo(os.NewSyscallError("chmod", err))
		}
	}
	if err := unix.Listen(fd, n); err != nil {
		return undo(os.NewSyscallError("listen", err))
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		return undo(os.NewSyscallError("getsockname", err))
	}
	l := &Listener{network: "unix", stream: true, sa: bound, addr: sys.Addr(bound, false)}
	if onDisk {
		l.unlink = path
	}
	l.fd.Store(int64(fd))
	return l, nil
}

// clearStale removes path when it is a socket file that nothing listens on,
// so that bind can create it again. It leaves every other file alone and
// returns what occupies path ("" for nothing or a removed stale socket), to
// explain the EADDRINUSE that bind will then give.
func clearStale(path string) (occupant string, err error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", nil // nothing there, or nothing we may look at: bind will say
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return "the path exists and is " + describe(fi.Mode()) + ", not a socket", nil
	}
	live, err := listening(path)
	if err != nil {
		return "", err
	}
	if live {
		return "another socket is bound to the path", nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("remove stale socket: %w", err)
	}
	return "", nil
}

// listening reports whether a socket is bound to the socket file at path:
// a connect that the kernel refuses (ECONNREFUSED) means none is. A stream
// listener there sees a connection that is closed at once; a datagram socket
// there refuses the stream connect with EPROTOTYPE, which counts as live.
func listening(path string) (bool, error) {
	probe, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false, os.NewSyscallError("socket", err)
	}
	defer unix.Close(probe)
	switch err := unix.Connect(probe, &unix.SockaddrUnix{Name: path}); {
	case err == nil, err == unix.EAGAIN, err == unix.EPROTOTYPE:
		return true, nil
	case err == unix.ECONNREFUSED:
		return false, nil
	default:
		return false, fmt.Errorf("probe existing socket: %w", os.NewSyscallError("connect", err))
	}
}

func describe(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeSymlink:
		return "a symbolic link"
	case fs.ModeNamedPipe:
		return "a named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "a device"
	}
	return "a file of mode " + m.String()
}
