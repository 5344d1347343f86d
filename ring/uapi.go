//go:build linux

package ring

import "encoding/binary"

// The kernel's io_uring ABI, as include/uapi/linux/io_uring.h declares it:
// the structures ring shares with the kernel and the constants it passes.
// Only what ring uses is here. The layouts are fixed by the kernel (an SQE
// is 64 bytes, a CQE 16); TestUAPILayout checks every size and offset
// against the header's, and oracle_test.go checks what ring builds with
// them against giouring. See docs/decisions/0014-own-io_uring-binding.md.

// sqe is struct io_uring_sqe. The unions are named for the member ring
// uses: off is also addr2, opFlags is msg_flags, accept_flags,
// cancel_flags, timeout_flags or poll32_events, bufGroup is also buf_index.
type sqe struct {
	opcode      uint8
	flags       uint8 // IOSQE_*
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufGroup    uint16
	personality uint16
	spliceFdIn  int32
	addr3       uint64
	_           uint64
}

// cqe is struct io_uring_cqe (without IORING_SETUP_CQE32).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// sqOffsets is struct io_sqring_offsets: where the submission ring's fields
// sit in its mapping.
type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqOffsets is struct io_cqring_offsets.
type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params is struct io_uring_params, passed to io_uring_setup and filled in
// by the kernel.
type params struct {
	sqEntries    uint32
	cqEntries    uint32
	flags        uint32
	sqThreadCPU  uint32
	sqThreadIdle uint32
	features     uint32
	wqFd         uint32
	resv         [3]uint32
	sqOff        sqOffsets
	cqOff        cqOffsets
}

// getEventsArg is struct io_uring_getevents_arg (min_wait_usec was pad
// before 6.12).
type getEventsArg struct {
	sigmask   uint64
	sigmaskSz uint32
	minWait   uint32
	ts        uint64
}

// bufDesc is struct io_uring_buf; the ring's 16-bit tail overlays the
// first entry's resv field (struct io_uring_buf_ring).
type bufDesc struct {
	addr uint64
	len  uint32
	bid  uint16
	resv uint16
}

// bufReg is struct io_uring_buf_reg, the argument of
// IORING_(UN)REGISTER_PBUF_RING.
type bufReg struct {
	ringAddr    uint64
	ringEntries uint32
	bgid        uint16
	flags       uint16
	resv        [6]uint32 // min_left and resv[5] in 6.x headers; ring sets none
}

// probeOp is struct io_uring_probe_op.
type probeOp struct {
	op    uint8
	resv  uint8
	flags uint16 // IO_URING_OP_SUPPORTED
	resv2 uint32
}

// probeOps is how many opcodes ring asks the kernel about: every value an
// 8-bit opcode can take.
const probeOps = 256

// probeArg is struct io_uring_probe with room for probeOps entries.
type probeArg struct {
	lastOp uint8
	opsLen uint8
	resv   uint16
	resv2  [3]uint32
	ops    [probeOps]probeOp
}

// io_uring_setup flags (IORING_SETUP_*).
const (
	setupSQPoll       = 1 << 1
	setupCQSize       = 1 << 3
	setupClamp        = 1 << 4
	setupCoopTaskrun  = 1 << 8
	setupTaskrunFlag  = 1 << 9
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13
)

// io_uring_params.features bits (IORING_FEAT_*).
const (
	featSingleMmap = 1 << 0
	featNoDrop     = 1 << 1
	featFastPoll   = 1 << 5
	featExtArg     = 1 << 8
	featMinTimeout = 1 << 15 // 6.12+
)

// mmap offsets of the three regions (IORING_OFF_*).
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// Submission queue flags (IORING_SQ_*), which the kernel sets in the
// ring's flags word.
const (
	sqNeedWakeup = 1 << 0
	sqCQOverflow = 1 << 1
	sqTaskrun    = 1 << 2
)

// io_uring_enter flags (IORING_ENTER_*).
const (
	enterGetEvents = 1 << 0
	enterSQWakeup  = 1 << 1
	enterSQWait    = 1 << 2
	enterExtArg    = 1 << 3
)

// io_uring_register opcodes (IORING_REGISTER_*).
const (
	registerProbe      = 8
	registerPbufRing   = 22
	unregisterPbufRing = 23
)

// opSupported is IO_URING_OP_SUPPORTED, in probeOp.flags.
const opSupported = 1 << 0

// Completion flags (IORING_CQE_F_*): the upper 16 bits of a completion's
// flags are the buffer id when cqeFBuffer is set.
const (
	cqeFBuffer     = 1 << 0
	cqeFMore       = 1 << 1
	cqeBufferShift = 16
)

// sqeBufferSelect is IOSQE_BUFFER_SELECT, in sqe.flags.
const sqeBufferSelect = 1 << 5

// Flags in sqe.ioprio (IORING_RECV_MULTISHOT, IORING_ACCEPT_MULTISHOT) and
// in sqe.opFlags for ASYNC_CANCEL (IORING_ASYNC_CANCEL_*).
const (
	recvMultishot   = 1 << 1
	acceptMultishot = 1 << 0
	asyncCancelAll  = 1 << 0
	asyncCancelFd   = 1 << 1
)

// bigEndian reports whether this host stores a word's most significant byte
// first, which decides how ring writes the two ABI fields whose meaning
// depends on it (sqe.poll32_events and the buffer ring's tail word).
func bigEndian() bool {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	return b[0] == 0
}

// The kernel's ABI for the features of features.go (docs/decisions/0041 to
// 0044). TestUAPILayout checks each structure against the header, and
// oracle_test.go each constant giouring names.

// rsrcUpdate is struct io_uring_rsrc_update, the argument of
// IORING_(UN)REGISTER_RING_FDS.
type rsrcUpdate struct {
	offset uint32
	resv   uint32
	data   uint64
}

// rsrcRegister is struct io_uring_rsrc_register, the argument of
// IORING_REGISTER_FILES2.
type rsrcRegister struct {
	nr    uint32
	flags uint32 // IORING_RSRC_REGISTER_SPARSE
	resv2 uint64
	data  uint64
	tags  uint64
}

// napiReg is struct io_uring_napi, the argument of
// IORING_(UN)REGISTER_NAPI (6.9+). opcode (6.13+; pad[0] before) 0 is
// IO_URING_NAPI_REGISTER_OP, and opParam 0 is
// IO_URING_NAPI_TRACKING_DYNAMIC: the kernel learns the NAPI ids of the
// sockets the ring serves.
type napiReg struct {
	busyPollTo     uint32 // microseconds
	preferBusyPoll uint8
	opcode         uint8
	pad            [2]uint8
	opParam        uint32
	resv           uint32
}

// More io_uring_register opcodes.
const (
	registerFiles2      = 13
	unregisterFiles     = 3
	registerRingFds     = 20
	unregisterRingFds   = 21
	registerNAPI        = 27
	unregisterNAPI      = 28
	rsrcRegisterSparse  = 1 << 0
	registerRingFdAlloc = ^uint32(0) // rsrcUpdate.offset: pick a free slot
)

// More io_uring_params.features bits.
const (
	featCQESkip        = 1 << 11 // 5.17+
	featRegRegRing     = 1 << 13 // 6.3+
	featRecvSendBundle = 1 << 14 // 6.10+
)

// enterRegisteredRing is IORING_ENTER_REGISTERED_RING: the enter's fd
// argument is an index into the task's registered rings.
const enterRegisteredRing = 1 << 4

// More submission flags (IOSQE_*), in sqe.flags.
const (
	sqeFixedFile   = 1 << 0
	sqeCQESkipSucc = 1 << 6
)

// fileIndexAlloc is IORING_FILE_INDEX_ALLOC: an accept into the fixed
// table picks a free slot. liburing stores it in sqe.file_index as
// IORING_FILE_INDEX_ALLOC - 1 + 1 (indexes are encoded plus one).
const fileIndexAlloc = ^uint32(0)

// Send and receive flags in sqe.ioprio (IORING_RECVSEND_*,
// IORING_SEND_ZC_REPORT_USAGE).
const (
	sendZCReportUsage = 1 << 3
	recvSendBundle    = 1 << 4
)

// More completion flags.
const (
	cqeFNotif   = 1 << 3
	cqeFBufMore = 1 << 4 // 6.12+, with IOU_PBUF_RING_INC
)

// notifUsageZCCopied is IORING_NOTIF_USAGE_ZC_COPIED, in a notification's
// res when the send asked for IORING_SEND_ZC_REPORT_USAGE.
const notifUsageZCCopied = 1 << 31

// pbufRingInc is IOU_PBUF_RING_INC, in bufReg.flags (6.12+).
const pbufRingInc = 2

// msgSendFd is IORING_MSG_SEND_FD, in sqe.addr of IORING_OP_MSG_RING:
// send a fixed file to the target ring (IORING_MSG_DATA, 0, sends data).
const msgSendFd = 1

// asyncCancelFdFixed is IORING_ASYNC_CANCEL_FD_FIXED (6.0+): the
// cancel's descriptor is a fixed file table slot.
const asyncCancelFdFixed = 1 << 3
