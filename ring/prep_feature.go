//go:build linux

package ring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The operations and submission flags of the Features: direct
// descriptors (with the files update and the hand-over of a slot to
// another ring), skipped completions (with the send that never waits),
// bundles and zero-copy sends. Like
// prep.go's, each Prepare method fills its entry as liburing's
// io_uring_prep_* helper of the same operation does, and oracle_test.go
// compares it with giouring's where giouring has the helper, and with the
// kernel's layout (uapi_test.go) where it does not.

// FixedFile marks the last prepared submission as one on a direct
// descriptor (IOSQE_FIXED_FILE): the descriptor it was prepared with is a
// slot of the fixed file table (RegisterFiles), and the kernel takes the
// file from there, without the process's descriptor table. Use it on
// receives, sends and shutdown; a slot's operations are cancelled with
// PrepareCancelFixed and the slot is closed with PrepareCloseDirect, not
// with FixedFile on PrepareClose (the kernel refuses that with EBADF).
func (r *Ring) FixedFile() { r.setLast(sqeFixedFile) }

// SkipSuccess marks the last prepared submission so that it posts no
// completion when it succeeds (IOSQE_CQE_SKIP_SUCCESS, 5.17+: the
// CQESkip feature); a failure still completes, with its error. What
// the operation holds (a buffer, a slot) is then released by nothing the
// ring reports: only use it where the caller knows the lifetime
// otherwise (PrepareSendNoWait gives a send such a signal). A send with
// MSG_WAITALL (PrepareSendNoWait's) that completes in part is a failure
// in this sense and posts its short count; a PrepareSend that sends only
// part is a success, and its count is skipped with it. On a linked chain,
// a skipped completion still counts as success for the next entry.
func (r *Ring) SkipSuccess() { r.setLast(sqeCQESkipSucc) }

// setLast ORs flag into the flags of the last prepared submission, if
// there is one not yet handed to the kernel.
func (r *Ring) setLast(flag uint8) {
	sq := &r.sq
	if sq.sqeTail == sq.sqeHead {
		return
	}
	e := (*sqe)(unsafe.Add(sq.sqes, uintptr((sq.sqeTail-1)&sq.mask)*unsafe.Sizeof(sqe{})))
	e.flags |= flag
}

// PrepareAcceptMultishotDirect queues a multishot accept on the listening
// socket fd into the fixed file table (IORING_FILE_INDEX_ALLOC, 5.19+):
// each accepted connection completes with the slot the kernel picked for
// it, or -ENFILE when the table is full, which ends the multishot (no
// More) and loses the connection it was accepting: the kernel accepts
// before it looks for a slot, and closes the connection when it finds
// none (the client sees its end). Keep the table larger than the
// connections the caller admits. fd itself is a normal descriptor. The
// socket is non-blocking; close-on-exec is moot (the kernel refuses
// SOCK_CLOEXEC with a slot: a direct descriptor is in no descriptor table
// until PrepareFixedFdInstall, which sets it).
func (r *Ring) PrepareAcceptMultishotDirect(fd int, userData uint64) error {
	if err := r.PrepareAcceptMultishot(fd, userData); err != nil {
		return err
	}
	e := r.last()
	e.opFlags = unix.SOCK_NONBLOCK // the kernel refuses SOCK_CLOEXEC with a slot
	e.setFileIndex(fileIndexAlloc - 1)
	return nil
}

// PrepareAcceptDirect queues a single accept on fd into a free slot of the
// fixed file table; it completes with the slot, or -ENFILE when the
// table is full (having closed the connection, as the multishot does).
func (r *Ring) PrepareAcceptDirect(fd int, userData uint64) error {
	if err := r.PrepareAccept(fd, userData); err != nil {
		return err
	}
	e := r.last()
	e.opFlags = unix.SOCK_NONBLOCK
	e.setFileIndex(fileIndexAlloc - 1)
	return nil
}

// setFileIndex sets sqe.file_index (splice_fd_in's union member) to the
// fixed file table slot i, encoded plus one as the kernel reads it (0
// means none), as liburing's __io_uring_set_target_fixed_file does;
// IORING_FILE_INDEX_ALLOC - 1 encodes "pick a free slot".
func (e *sqe) setFileIndex(i uint32) { e.spliceFdIn = int32(i + 1) }

// last returns the submission just prepared.
func (r *Ring) last() *sqe {
	sq := &r.sq
	return (*sqe)(unsafe.Add(sq.sqes, uintptr((sq.sqeTail-1)&sq.mask)*unsafe.Sizeof(sqe{})))
}

// PrepareCloseDirect queues a close of the fixed file table's slot
// (5.15+): the slot is free once it completes, and the connection is
// closed once no operation holds it.
func (r *Ring) PrepareCloseDirect(slot int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpClose, 0, 0, 0, 0)
	e.setFileIndex(uint32(slot))
	e.userData = userData
	return nil
}

// PrepareFixedFdInstall queues the installation of the fixed file table's
// slot as a real descriptor in the process's table
// (IORING_OP_FIXED_FD_INSTALL, 6.8+: the FixedFdInstall feature), for
// what needs one (sendfile, splice from a socket, a hand-over to another
// process). It completes with the new descriptor, close-on-exec; the slot
// stays filled, and both refer to the same socket until each is closed.
func (r *Ring) PrepareFixedFdInstall(slot int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpFixedFdInstall, slot, 0, 0, 0)
	e.flags = sqeFixedFile
	e.userData = userData
	return nil
}

// PrepareCancelFixed queues a cancel of every operation on the fixed file
// table's slot (IORING_ASYNC_CANCEL_FD_FIXED). It completes as
// PrepareCancelFd does.
func (r *Ring) PrepareCancelFixed(slot int, userData uint64) error {
	if err := r.PrepareCancelFd(slot, userData); err != nil {
		return err
	}
	r.last().opFlags |= asyncCancelFdFixed
	return nil
}

// PrepareRecvBundle queues a single receive on fd that may fill several
// buffers of the provided-buffer ring b in one completion
// (IORING_RECVSEND_BUNDLE, 6.10+: the Bundles feature). The completion's
// Res is the bytes received and its buffer id the first buffer's; the
// others are the ones that followed it in b's ring: b.Bundle names them.
func (r *Ring) PrepareRecvBundle(fd int, b *BufRing, userData uint64) error {
	if err := r.PrepareRecvSelect(fd, b, userData); err != nil {
		return err
	}
	r.last().ioprio |= recvSendBundle
	return nil
}

// PrepareRecvMultishotBundle is PrepareRecvMultishot whose completions
// may each fill several buffers of b, as PrepareRecvBundle's does.
func (r *Ring) PrepareRecvMultishotBundle(fd int, b *BufRing, userData uint64) error {
	if err := r.PrepareRecvMultishot(fd, b, userData); err != nil {
		return err
	}
	r.last().ioprio |= recvSendBundle
	return nil
}

// PrepareSendBundle queues a send on the socket fd of the buffers staged in
// the provided-buffer ring b (BufRing.Provide), as many as the kernel
// finds published, in ring order, with MSG_NOSIGNAL (6.10+: the Bundles
// feature). It completes with the bytes sent and the first buffer's id;
// b.Bundle names the buffers it consumed, the last of which may have been
// sent only in part. A completion with More means the send goes on with
// buffers published since.
func (r *Ring) PrepareSendBundle(fd int, b *BufRing, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpSend, fd, 0, 0, 0)
	e.opFlags = unix.MSG_NOSIGNAL
	e.ioprio = recvSendBundle
	e.flags = sqeBufferSelect
	e.bufGroup = b.group
	e.userData = userData
	return nil
}

// PrepareSendZC queues a zero-copy send of p on the socket fd
// (IORING_OP_SEND_ZC, the SendZC feature), with MSG_NOSIGNAL and
// IORING_SEND_ZC_REPORT_USAGE. It completes twice under userData: first
// with the bytes sent (or an error) and More, then with a notification
// (Completion.Notif) once the kernel no longer reads p, which reports
// whether the kernel copied after all (Completion.ZCCopied: loopback
// always does). p must stay referenced and unchanged until the
// notification, not only the first completion. Whether a notification
// follows is what the first completion's More says, not its result: a
// send that failed may have one too.
func (r *Ring) PrepareSendZC(fd int, p []byte, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpSendZC, fd, bufAddr(p), uint32(len(p)), 0)
	e.opFlags = unix.MSG_NOSIGNAL
	e.ioprio = sendZCReportUsage
	e.userData = userData
	return nil
}

// PrepareSendmsgZC queues a zero-copy sendmsg described by msg
// (IORING_OP_SENDMSG_ZC, the SendZC feature; for datagrams, msg's name
// is the destination), completing as PrepareSendZC's does: msg, its
// iovecs and their buffers stay referenced until the notification.
func (r *Ring) PrepareSendmsgZC(fd int, msg *unix.Msghdr, userData uint64) error {
	if err := r.PrepareSendmsg(fd, msg, userData); err != nil {
		return err
	}
	e := r.last()
	e.opcode = uint8(OpSendmsgZC)
	e.ioprio = sendZCReportUsage
	return nil
}

// Notif reports whether c is the notification of a zero-copy send: the
// kernel is done with the send's memory.
func (c Completion) Notif() bool { return c.Flags&cqeFNotif != 0 }

// ZCCopied reports whether a zero-copy send's notification says that the
// kernel copied the data (in whole or in part) after all, as it does on
// loopback and for devices without scatter-gather.
func (c Completion) ZCCopied() bool {
	return c.Notif() && uint32(c.Res)&notifUsageZCCopied != 0
}

// BufMore reports whether the buffer c filled stays with the kernel for
// more completions (IORING_CQE_F_BUF_MORE: an incremental ring's buffer
// consumed in part); BufRing.Received reads it.
func (c Completion) BufMore() bool { return c.Flags&cqeFBufMore != 0 }

// PrepareFilesUpdateAlloc queues the placing of each descriptor in fds in
// a free slot of the fixed file table (IORING_OP_FILES_UPDATE with
// IORING_FILE_INDEX_ALLOC, 5.19+): for an inherited socket, or one made
// without io_uring, that the ring should serve as a direct descriptor.
// The kernel writes each slot it picked over its descriptor in fds (which
// must stay referenced until the completion) and completes with how many
// it placed, or an error (-ENFILE: the table is full). The descriptors
// stay open, the slots holding their own reference: close them when the
// slots are enough.
func (r *Ring) PrepareFilesUpdateAlloc(fds []int32, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	// liburing's io_uring_prep_files_update takes the offset as an int,
	// so IORING_FILE_INDEX_ALLOC arrives sign-extended; the kernel reads
	// its low 32 bits.
	e.rw(OpFilesUpdate, -1, uintptr(unsafe.Pointer(unsafe.SliceData(fds))), uint32(len(fds)), ^uint64(0))
	e.userData = userData
	return nil
}

// PrepareMsgRingFd queues the sending of this ring's fixed file table slot
// to the ring whose descriptor is ringFd (IORING_OP_MSG_RING with
// IORING_MSG_SEND_FD, 6.0+), into a slot that ring picks: that ring gets
// a completion with user data data and the slot as its result (or
// -ENFILE), as if one of its own operations had completed, and this ring
// one with userData once it is sent. The slot stays filled here too
// (close it with PrepareCloseDirect): this is how a direct descriptor
// moves to another loop. Kernels before 6.0 complete it with -EINVAL.
func (r *Ring) PrepareMsgRingFd(ringFd, slot int, data, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpMsgRing, ringFd, msgSendFd, 0, data)
	e.addr3 = uint64(slot)
	e.setFileIndex(fileIndexAlloc - 1)
	e.userData = userData
	return nil
}

// PrepareSendNoWait queues a send of p on the socket fd that never waits
// for room in the socket (MSG_DONTWAIT, with MSG_WAITALL and
// MSG_NOSIGNAL): the kernel sends all of p inline, within the enter that
// submits it, or completes with what it could not do: a short count (the
// bytes it sent) or -EAGAIN (none). With SkipSuccess this gives a skipped
// send a buffer-lifetime signal: a send that posted nothing by the time
// its enter returned sent everything, and p is free (not with SQPoll,
// where the kernel's thread submits later). Without MSG_WAITALL a short
// send would count as a success, and its count be skipped with it.
func (r *Ring) PrepareSendNoWait(fd int, p []byte, userData uint64) error {
	if err := r.PrepareSend(fd, p, userData); err != nil {
		return err
	}
	r.last().opFlags = unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT | unix.MSG_WAITALL
	return nil
}
