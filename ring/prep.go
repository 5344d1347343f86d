//go:build linux

package ring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Each Prepare method queues one submission; the next Submit or
// SubmitAndWait hands it to the kernel. A queue that is full is submitted
// first, so they fail only when the kernel takes nothing at all. Memory
// passed in must stay referenced until the completion: see the package
// documentation.
//
// Each fills its entry as liburing's io_uring_prep_* helper of the same
// operation does (an entry starts zeroed); oracle_test.go compares every
// one with giouring's, byte for byte.

// PrepareAcceptMultishot queues a multishot accept on the listening socket
// fd. Each accepted connection completes with its descriptor (non-blocking,
// close-on-exec); the operation stays armed while completions carry More.
func (r *Ring) PrepareAcceptMultishot(fd int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpAccept, fd, 0, 0, 0)
	e.opFlags = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	e.ioprio = acceptMultishot
	e.userData = userData
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
	e.rw(OpRecv, fd, 0, 0, 0)
	e.ioprio = recvMultishot
	e.flags = sqeBufferSelect
	e.bufGroup = b.group
	e.userData = userData
	return nil
}

// PrepareRecvmsgMultishot queues a multishot recvmsg on the datagram socket
// fd that fills buffers from the provided-buffer ring b (5.20+). The kernel
// reads only msg's Namelen and Controllen: each completion's buffer starts
// with an io_uring_recvmsg_out header (see RecvmsgOut), then Namelen bytes
// for the source address, Controllen bytes of control messages, and the
// payload. flags are recvmsg's (MSG_TRUNC makes the header's Payloadlen
// the datagram's full length when it did not fit). msg must stay
// referenced while the receive is armed.
func (r *Ring) PrepareRecvmsgMultishot(fd int, msg *unix.Msghdr, flags uint32, b *BufRing, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpRecvmsg, fd, uintptr(unsafe.Pointer(msg)), 1, 0)
	e.opFlags = flags
	e.ioprio = recvMultishot
	e.flags = sqeBufferSelect
	e.bufGroup = b.group
	e.userData = userData
	return nil
}

// RecvmsgOut is the header the kernel writes at the start of a multishot
// recvmsg's buffer (struct io_uring_recvmsg_out).
type RecvmsgOut struct {
	Namelen    uint32 // the source address's full length (may exceed the room)
	Controllen uint32 // the control messages' length
	Payloadlen uint32 // the datagram's full length (more than fitted when Flags has MSG_TRUNC)
	Flags      uint32 // MSG_TRUNC, MSG_CTRUNC
}

// SizeofRecvmsgOut is the size of RecvmsgOut.
const SizeofRecvmsgOut = 16

// PrepareMsgRing queues a message to another ring (IORING_OP_MSG_RING,
// 5.18+): the ring whose descriptor is fd gets a completion with user data
// data and result res, as if one of its own operations had completed, and
// is woken if it waits. This ring gets a completion of its own, with
// userData, once the message is posted (a negative Res if it could not
// be: the target ring is gone, or its queue is full).
func (r *Ring) PrepareMsgRing(fd int, res uint32, data, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpMsgRing, fd, 0, res, data) // addr 0 is IORING_MSG_DATA
	e.userData = userData
	return nil
}

// PrepareRecv queues a single receive into p.
func (r *Ring) PrepareRecv(fd int, p []byte, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpRecv, fd, bufAddr(p), uint32(len(p)), 0)
	e.userData = userData
	return nil
}

// PrepareSend queues a send of p on the socket fd, with MSG_NOSIGNAL so that
// a reset peer is an EPIPE result, not a signal.
func (r *Ring) PrepareSend(fd int, p []byte, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpSend, fd, bufAddr(p), uint32(len(p)), 0)
	e.opFlags = unix.MSG_NOSIGNAL
	e.userData = userData
	return nil
}

// PrepareSendmsg queues a gathered send described by msg (its iovecs and the
// buffers they point at must stay referenced until the completion).
func (r *Ring) PrepareSendmsg(fd int, msg *unix.Msghdr, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpSendmsg, fd, uintptr(unsafe.Pointer(msg)), 1, 0)
	e.opFlags = unix.MSG_NOSIGNAL
	e.userData = userData
	return nil
}

// PrepareConnect queues a connect of the socket fd to the raw socket address
// sa of length n.
func (r *Ring) PrepareConnect(fd int, sa unsafe.Pointer, n uint32, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpConnect, fd, uintptr(sa), 0, uint64(n))
	e.userData = userData
	return nil
}

// PrepareClose queues a close of fd.
func (r *Ring) PrepareClose(fd int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpClose, fd, 0, 0, 0)
	e.userData = userData
	return nil
}

// PrepareShutdown queues a shutdown(2) of the socket fd (unix.SHUT_WR, ...).
func (r *Ring) PrepareShutdown(fd, how int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpShutdown, fd, 0, uint32(how), 0)
	e.userData = userData
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
	e.rw(OpAsyncCancel, -1, 0, 0, 0)
	e.addr = target
	e.opFlags = asyncCancelAll
	e.userData = userData
	return nil
}

// PrepareTimeout queues a timeout that completes with -ETIME after ts (which
// must stay referenced until the completion).
func (r *Ring) PrepareTimeout(ts *unix.Timespec, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpTimeout, -1, uintptr(unsafe.Pointer(ts)), 1, 0) // off: complete after 0 other completions
	e.userData = userData
	return nil
}

// PrepareRead queues a read of fd into p at offset off (files; use an offset
// of ^uint64(0) for the current position, and any offset for an eventfd).
func (r *Ring) PrepareRead(fd int, p []byte, off uint64, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpRead, fd, bufAddr(p), uint32(len(p)), off)
	e.userData = userData
	return nil
}

// PrepareWrite queues a write of p to fd at offset off.
func (r *Ring) PrepareWrite(fd int, p []byte, off uint64, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpWrite, fd, bufAddr(p), uint32(len(p)), off)
	e.userData = userData
	return nil
}

// rw fills the fields every operation sets, as liburing's
// io_uring_prep_rw does: the opcode, the descriptor, an address, a length
// and an offset. The entry is zero already: sqe clears it.
func (e *sqe) rw(op Op, fd int, addr uintptr, n uint32, off uint64) {
	e.opcode = uint8(op)
	e.fd = int32(fd)
	e.addr = uint64(addr)
	e.len = n
	e.off = off
}

// poll32Events returns a poll mask as sqe.poll32_events carries it: the
// kernel reads that field as a native 32-bit word whose 16-bit halves are
// swapped on big-endian hosts (the header's "word-reversed for BE"), so
// that a pre-5.9 kernel still finds the low 16 bits in poll_events.
func poll32Events(mask uint32) uint32 {
	if bigEndian() {
		return mask<<16 | mask>>16
	}
	return mask
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
	e.rw(OpAsyncCancel, fd, 0, 0, 0)
	e.opFlags = asyncCancelAll | asyncCancelFd
	e.userData = userData
	return nil
}

// PrepareAccept queues a single accept on the listening socket fd; the
// connection's descriptor is non-blocking and close-on-exec.
func (r *Ring) PrepareAccept(fd int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpAccept, fd, 0, 0, 0)
	e.opFlags = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	e.userData = userData
	return nil
}

// PreparePollIn queues a one-shot poll of fd for input: it completes with
// the ready event mask (POLLIN, or POLLERR/POLLHUP) once fd is readable.
func (r *Ring) PreparePollIn(fd int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpPollAdd, fd, 0, 0, 0)
	e.opFlags = poll32Events(unix.POLLIN)
	e.userData = userData
	return nil
}

// PrepareRecvSelect queues a single receive on fd into one buffer picked
// from the provided-buffer ring b.
func (r *Ring) PrepareRecvSelect(fd int, b *BufRing, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpRecv, fd, 0, 0, 0)
	e.flags = sqeBufferSelect
	e.bufGroup = b.group
	e.userData = userData
	return nil
}

// PrepareNop queues an operation that does nothing and completes at once
// with 0 (IORING_OP_NOP): the cheapest round trip, for tests and
// benchmarks of the ring itself.
func (r *Ring) PrepareNop(userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpNop, -1, 0, 0, 0)
	e.userData = userData
	return nil
}
