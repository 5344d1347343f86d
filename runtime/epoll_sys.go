//go:build linux

package runtime

import (
	"time"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/poller"
	"golang.org/x/sys/unix"
)

// The epoll driver's seams to the kernel (epoll.go): its epoll instance
// and the system calls it makes, each the kernel's or the model test's
// stand-in (epoll_model_test.go).

// epollPoller is what the driver needs of its epoll instance: a
// *poller.Poller, or the model test's stand-in.
type epollPoller interface {
	Add(fd int, events uint32, data uint64) error
	Modify(fd int, events uint32, data uint64) error
	Delete(fd int) error
	Wait(timeout time.Duration) ([]poller.Event, error)
	Drain()
	Wake() error
	Waits() uint64
	Close() error
}

// epollSys is the system calls the driver makes on a connection and on the
// file it sends: the kernel's (kernelSys), or the model test's stand-in
// socket, as Go's internal/poll swaps its system call hooks in tests.
type epollSys interface {
	read(fd int, p []byte) (int, unix.Errno)
	write(fd int, p []byte) (int, unix.Errno)
	writev(fd int, iov []unix.Iovec) (int, unix.Errno)
	sendfile(out, in int, off *int64, n int) (int, error)
	// preadNowait is preadv2 with RWF_NOWAIT into one buffer.
	preadNowait(fd int, p []byte, off int64) (int, error)
	shutdownWrite(fd int) error
	close(fd int) error
}

// kernelSys is epollSys on the kernel.
type kernelSys struct{}

func (kernelSys) read(fd int, p []byte) (int, unix.Errno)           { return poller.Read(fd, p) }
func (kernelSys) write(fd int, p []byte) (int, unix.Errno)          { return poller.Write(fd, p) }
func (kernelSys) writev(fd int, iov []unix.Iovec) (int, unix.Errno) { return poller.Writev(fd, iov) }
func (kernelSys) sendfile(out, in int, off *int64, n int) (int, error) {
	return sys.Sendfile(out, in, off, n)
}
func (kernelSys) preadNowait(fd int, p []byte, off int64) (int, error) {
	return sys.PreadNowait(fd, p, off)
}
func (kernelSys) shutdownWrite(fd int) error { return sys.ShutdownWrite(fd) }
func (kernelSys) close(fd int) error         { return sys.Close(fd) }
