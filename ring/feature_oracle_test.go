//go:build linux

package ring

import (
	"encoding/binary"
	"syscall"
	"testing"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// featureOracleCases are the oracle cases of the features' operations
// (prep_feature.go) and of the flag setters on the operations the
// runtime already uses; oracleCases appends them. Where giouring has the
// helper it is the oracle (corrected where it differs from liburing, with
// a comment); where it does not, hdr builds the entry from the header's
// offsets, with the constants as liburing's header spells them. A case's
// method may name flag setters after the Prepare method (see calls).
func featureOracleCases(a *oracleArgs) []oracleCase {
	const (
		fd   = 17
		slot = 5
		ud   = uint64(0xfeedface_00000003)
	)
	bufp := uintptr(unsafe.Pointer(unsafe.SliceData(a.buf)))
	n := uint32(len(a.buf))
	accept := unix.SOCK_NONBLOCK // no SOCK_CLOEXEC into a slot: the kernel refuses it
	return []oracleCase{
		{name: "multishot accept direct", method: "PrepareAcceptMultishotDirect", args: []any{fd, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) { e.PrepareMultishotAcceptDirect(fd, 0, 0, accept) }},
		{name: "accept direct", method: "PrepareAcceptDirect", args: []any{fd, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareAcceptDirect(fd, 0, 0, uint32(accept), giouring.FileIndexAlloc)
			}},
		{name: "close direct", method: "PrepareCloseDirect", args: []any{slot, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) { e.PrepareCloseDirect(slot) }},
		{name: "cancel all on a fixed slot", method: "PrepareCancelFixed", args: []any{slot, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareCancelFd(slot, giouring.AsyncCancelAll|giouring.AsyncCancelFdFixed)
			}},
		{name: "multishot recv on a direct descriptor", method: "PrepareRecvMultishot+FixedFile", args: []any{slot, a.br, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareRecvMultishot(slot, 0, 0, 0)
				e.Flags |= giouring.SqeBufferSelect | giouring.SqeFixedFile
				e.BufIG = a.br.group
			}},
		{name: "send on a direct descriptor", method: "PrepareSend+FixedFile", args: []any{slot, a.buf, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareSend(slot, bufp, n, unix.MSG_NOSIGNAL)
				e.Flags |= giouring.SqeFixedFile
			}},
		{name: "shutdown a direct descriptor", method: "PrepareShutdown+FixedFile", args: []any{slot, unix.SHUT_WR, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareShutdown(slot, unix.SHUT_WR)
				e.Flags |= giouring.SqeFixedFile
			}},
		{name: "send with its completion skipped", method: "PrepareSend+SkipSuccess", args: []any{fd, a.buf, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareSend(fd, bufp, n, unix.MSG_NOSIGNAL)
				e.Flags |= giouring.SqeCQESkipSuccess
			}},
		{name: "send on a direct descriptor, skipped and linked", method: "PrepareSend+FixedFile+SkipSuccess+Link", args: []any{slot, a.buf, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareSend(slot, bufp, n, unix.MSG_NOSIGNAL)
				e.Flags |= giouring.SqeFixedFile | giouring.SqeCQESkipSuccess | giouring.SqeIOLink
			}},
		{name: "send that never waits, skipped", method: "PrepareSendNoWait+SkipSuccess", args: []any{fd, a.buf, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareSend(fd, bufp, n, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT|unix.MSG_WAITALL)
				e.Flags |= giouring.SqeCQESkipSuccess
			}},
		{name: "zero-copy send", method: "PrepareSendZC", args: []any{fd, a.buf, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareSendZC(fd, a.buf, unix.MSG_NOSIGNAL, uint32(giouring.SendZCReportUsage))
				// giouring stores the slice header's address;
				// liburing and the kernel want the bytes'.
				e.Addr = uint64(bufp)
			}},
		{name: "zero-copy sendmsg", method: "PrepareSendmsgZC", args: []any{fd, a.msg, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareSendmsgZC(fd, (*syscall.Msghdr)(unsafe.Pointer(a.msg)), unix.MSG_NOSIGNAL)
				// liburing's io_uring_prep_sendmsg_zc takes no
				// zero-copy flags; a caller sets them in ioprio.
				e.IoPrio = giouring.SendZCReportUsage
			}},
		{name: "files update into allocated slots", method: "PrepareFilesUpdateAlloc", args: []any{a.fds, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareFilesUpdate(nil, -1) // IORING_FILE_INDEX_ALLOC as liburing's int
				// giouring takes []int (the kernel reads 32-bit
				// descriptors) and stores the slice header's
				// address: liburing stores the array's.
				e.Addr = uint64(uintptr(unsafe.Pointer(&a.fds[0])))
				e.Len = uint32(len(a.fds))
			}},
		{name: "send a slot to another ring", method: "PrepareMsgRingFd", args: []any{fd, slot, uint64(0x8000_0000_0000_0077), ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				e.PrepareMsgRingFdAlloc(fd, slot, 0x8000_0000_0000_0077, 0)
				// giouring stores the address of a variable holding
				// IORING_MSG_DATA; liburing stores IORING_MSG_SEND_FD
				// itself.
				e.Addr = 1
			}},
		// giouring predates IORING_OP_FIXED_FD_INSTALL (6.8) and
		// IORING_RECVSEND_BUNDLE (6.10).
		{name: "fixed fd install", method: "PrepareFixedFdInstall", args: []any{slot, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				// io_uring_prep_fixed_fd_install(sqe, slot, 0):
				// io_uring_prep_rw(IORING_OP_FIXED_FD_INSTALL, sqe,
				// fd, NULL, 0, 0); sqe->flags = IOSQE_FIXED_FILE;
				// sqe->install_fd_flags = 0.
				*e = hdr{opcode: 54, flags: 1 << 0, fd: slot, userData: ud}.entry()
			}},
		{name: "recv bundle", method: "PrepareRecvBundle", args: []any{fd, a.br, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				// io_uring_prep_recv(sqe, fd, NULL, 0, 0); sqe->ioprio
				// |= IORING_RECVSEND_BUNDLE; sqe->flags |=
				// IOSQE_BUFFER_SELECT; sqe->buf_group = group.
				*e = hdr{opcode: 27, flags: 1 << 5, ioprio: 1 << 4, fd: fd, bufGroup: a.br.group, userData: ud}.entry()
			}},
		{name: "multishot recv bundle", method: "PrepareRecvMultishotBundle", args: []any{fd, a.br, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				// io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0):
				// ioprio IORING_RECV_MULTISHOT | IORING_RECVSEND_BUNDLE.
				*e = hdr{opcode: 27, flags: 1 << 5, ioprio: 1<<1 | 1<<4, fd: fd, bufGroup: a.br.group, userData: ud}.entry()
			}},
		{name: "send bundle", method: "PrepareSendBundle", args: []any{fd, a.br, ud},
			oracle: func(e *giouring.SubmissionQueueEntry) {
				// io_uring_prep_send_bundle(sqe, fd, 0, MSG_NOSIGNAL);
				// sqe->flags |= IOSQE_BUFFER_SELECT; sqe->buf_group.
				*e = hdr{opcode: 26, flags: 1 << 5, ioprio: 1 << 4, fd: fd, msgFlags: unix.MSG_NOSIGNAL,
					bufGroup: a.br.group, userData: ud}.entry()
			}},
	}
}

// hdr is an io_uring_sqe by the header's field names; entry lays it out
// at the header's offsets, independently of ring's sqe type (and of
// giouring's, whose type only carries the bytes).
type hdr struct {
	opcode, flags uint8
	ioprio        uint16
	fd            int32
	off, addr     uint64
	len           uint32
	msgFlags      uint32
	userData      uint64
	bufGroup      uint16
	fileIndex     uint32
}

func (h hdr) entry() giouring.SubmissionQueueEntry {
	var b [64]byte
	le := binary.NativeEndian
	b[0], b[1] = h.opcode, h.flags
	le.PutUint16(b[2:], h.ioprio)
	le.PutUint32(b[4:], uint32(h.fd))
	le.PutUint64(b[8:], h.off)
	le.PutUint64(b[16:], h.addr)
	le.PutUint32(b[24:], h.len)
	le.PutUint32(b[28:], h.msgFlags)
	le.PutUint64(b[32:], h.userData)
	le.PutUint16(b[40:], h.bufGroup)
	le.PutUint32(b[44:], h.fileIndex)
	return *(*giouring.SubmissionQueueEntry)(unsafe.Pointer(&b))
}

// TestUAPIFeatureConstants checks the features' constants that giouring
// is too old to name against include/uapi/linux/io_uring.h (liburing's
// copy, 2026-08), and the opcode names.
func TestUAPIFeatureConstants(t *testing.T) {
	consts := []struct {
		name      string
		ours, hdr uint64
	}{
		{"IORING_OP_FIXED_FD_INSTALL", uint64(OpFixedFdInstall), 54},
		{"IORING_OP_SEND_ZC", uint64(OpSendZC), 47},
		{"IORING_OP_SENDMSG_ZC", uint64(OpSendmsgZC), 48},
		{"IORING_RECVSEND_BUNDLE", recvSendBundle, 1 << 4},
		{"IORING_FEAT_RECVSEND_BUNDLE", featRecvSendBundle, 1 << 14},
		{"IORING_FEAT_MIN_TIMEOUT", featMinTimeout, 1 << 15},
		{"IORING_CQE_F_BUF_MORE", cqeFBufMore, 1 << 4},
		{"IOU_PBUF_RING_INC", pbufRingInc, 2},
		{"IORING_REGISTER_NAPI", registerNAPI, 27},
		{"IORING_UNREGISTER_NAPI", unregisterNAPI, 28},
	}
	for _, c := range consts {
		if c.ours != c.hdr {
			t.Errorf("%s: ring has %#x, the header %#x", c.name, c.ours, c.hdr)
		}
	}
	for op, want := range map[Op]string{OpSendZC: "SEND_ZC", OpSendmsgZC: "SENDMSG_ZC", OpFixedFdInstall: "FIXED_FD_INSTALL"} {
		if got := op.String(); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", uint8(op), got, want)
		}
	}
}
