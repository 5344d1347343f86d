package ring

import (
	"unsafe"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// Each Prepare method queues one submission; the next Submit or
// SubmitAndWait hands it to the kernel. A queue that is full is submitted
// first, so they fail only when the kernel takes nothing at all. Memory
// passed in must stay referenced until the completion: see the package
// documentation.

// PrepareAcceptMultishot queues a multishot accept on the listening socket
// fd. Each accepted connection completes with its descriptor (non-blocking,
// close-on-exec); the operation stays armed while completions carry More.
func (r *Ring) PrepareAcceptMultishot(fd int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareMultishotAccept(fd, 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	e.UserData = userData
	return nil
}

// PrepareRecvMultishot queues a multishot receive on fd that fills buffers
// from the provided-buffer ring b. A completion with Res 0 is end of stream;
// the operation stays armed while completions carry More.
func (r *Ring) PrepareRecvMultishot(fd int, b *BufRing, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareRecvMultishot(fd, 0, 0, 0)
	e.Flags |= giouring.SqeBufferSelect
	e.BufIG = b.group
	e.UserData = userData
	return nil
}

// PrepareRecv queues a single receive into p.
func (r *Ring) PrepareRecv(fd int, p []byte, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareRecv(fd, bufAddr(p), uint32(len(p)), 0)
	e.UserData = userData
	return nil
}

// PrepareSend queues a send of p on the socket fd, with MSG_NOSIGNAL so that
// a reset peer is an EPIPE result, not a signal.
func (r *Ring) PrepareSend(fd int, p []byte, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareSend(fd, bufAddr(p), uint32(len(p)), unix.MSG_NOSIGNAL)
	e.UserData = userData
	return nil
}

// PrepareSendmsg queues a gathered send described by msg (its iovecs and the
// buffers they point at must stay referenced until the completion).
func (r *Ring) PrepareSendmsg(fd int, msg *unix.Msghdr, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.OpCode = giouring.OpSendmsg
	e.Fd = int32(fd)
	e.Addr = uint64(uintptr(unsafe.Pointer(msg)))
	e.Len = 1
	e.OpcodeFlags = unix.MSG_NOSIGNAL
	e.UserData = userData
	return nil
}

// PrepareConnect queues a connect of the socket fd to the raw socket address
// sa of length n.
func (r *Ring) PrepareConnect(fd int, sa unsafe.Pointer, n uint32, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.OpCode = giouring.OpConnect
	e.Fd = int32(fd)
	e.Addr = uint64(uintptr(sa))
	e.Off = uint64(n)
	e.UserData = userData
	return nil
}

// PrepareClose queues a close of fd.
func (r *Ring) PrepareClose(fd int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareClose(fd)
	e.UserData = userData
	return nil
}

// PrepareShutdown queues a shutdown(2) of the socket fd (unix.SHUT_WR, ...).
func (r *Ring) PrepareShutdown(fd, how int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareShutdown(fd, how)
	e.UserData = userData
	return nil
}

// PrepareCancel queues a cancel of every operation whose user data is
// target. The cancelled operations complete with -ECANCELED (their memory
// must stay referenced until then); the cancel itself completes with the
// number it found, which is 0 (not -ENOENT) when it found none.
func (r *Ring) PrepareCancel(target, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareCancel64(target, int(giouring.AsyncCancelAll))
	e.UserData = userData
	return nil
}

// PrepareTimeout queues a timeout that completes with -ETIME after ts (which
// must stay referenced until the completion).
func (r *Ring) PrepareTimeout(ts *unix.Timespec, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.OpCode = giouring.OpTimeout
	e.Fd = -1
	e.Addr = uint64(uintptr(unsafe.Pointer(ts)))
	e.Len = 1
	e.UserData = userData
	return nil
}

// PrepareRead queues a read of fd into p at offset off (files; use an offset
// of ^uint64(0) for the current position, and any offset for an eventfd).
func (r *Ring) PrepareRead(fd int, p []byte, off uint64, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareRead(fd, bufAddr(p), uint32(len(p)), off)
	e.UserData = userData
	return nil
}

// PrepareWrite queues a write of p to fd at offset off.
func (r *Ring) PrepareWrite(fd int, p []byte, off uint64, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareWrite(fd, bufAddr(p), uint32(len(p)), off)
	e.UserData = userData
	return nil
}

func bufAddr(p []byte) uintptr {
	if len(p) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(p)))
}

// PrepareCancelFd queues a cancel of every operation on fd. The cancelled
// operations complete with -ECANCELED; the cancel completes with the number
// it found, which is 0 (not -ENOENT) when it found none.
func (r *Ring) PrepareCancelFd(fd int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareCancelFd(fd, giouring.AsyncCancelAll)
	e.UserData = userData
	return nil
}

// PrepareAccept queues a single accept on the listening socket fd; the
// connection's descriptor is non-blocking and close-on-exec.
func (r *Ring) PrepareAccept(fd int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareAccept(fd, 0, 0, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	e.UserData = userData
	return nil
}

// PreparePollIn queues a one-shot poll of fd for input: it completes with
// the ready event mask (POLLIN, or POLLERR/POLLHUP) once fd is readable.
func (r *Ring) PreparePollIn(fd int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PreparePollAdd(fd, unix.POLLIN)
	e.UserData = userData
	return nil
}

// PrepareRecvSelect queues a single receive on fd into one buffer picked
// from the provided-buffer ring b.
func (r *Ring) PrepareRecvSelect(fd int, b *BufRing, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.PrepareRecv(fd, 0, 0, 0)
	e.Flags |= giouring.SqeBufferSelect
	e.BufIG = b.group
	e.UserData = userData
	return nil
}
