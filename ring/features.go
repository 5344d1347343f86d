//go:build linux

package ring

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Feature is an io_uring capability beyond the opcodes the loop needs,
// which a driver uses only where the kernel has it: Probe answers for each
// (Support.HasFeature), from the setup features, the opcode probe and a
// registration tried on the probe ring, so that a kernel without one keeps
// working without it. See docs/decisions/0041 to 0044.
type Feature uint8

const (
	// RegisteredRing: the ring's descriptor registered with the kernel
	// (IORING_REGISTER_RING_FDS, 5.18+), so that an enter skips the file
	// lookup (Config.RegisterRing, Ring.RegisterRing). Probed by
	// registering and unregistering the probe ring.
	RegisteredRing Feature = iota
	// DirectDescriptors: a sparse fixed file table
	// (IORING_REGISTER_FILES2 with IORING_RSRC_REGISTER_SPARSE, 5.19+),
	// accepts into it with IORING_FILE_INDEX_ALLOC (5.19+) and
	// operations on its slots (IOSQE_FIXED_FILE, close of a slot).
	// Probed by registering and unregistering a one-slot table.
	DirectDescriptors
	// FixedFdInstall: IORING_OP_FIXED_FD_INSTALL (6.8+), a real
	// descriptor for a fixed slot. Probed by the opcode probe.
	FixedFdInstall
	// CQESkip: IOSQE_CQE_SKIP_SUCCESS (5.17+, IORING_FEAT_CQE_SKIP):
	// a submission that succeeds posts no completion (Ring.SkipSuccess).
	CQESkip
	// Bundles: IORING_RECVSEND_BUNDLE (6.10+,
	// IORING_FEAT_RECVSEND_BUNDLE): one receive completion for several
	// provided buffers, one send of several.
	Bundles
	// IncrementalBuffers: provided-buffer rings consumed in part
	// (IOU_PBUF_RING_INC, 6.12+; Ring.NewIncrementalBufRing). Probed
	// by registering and unregistering such a ring.
	IncrementalBuffers
	// SendZC: zero-copy send, IORING_OP_SEND_ZC (6.0+) and
	// IORING_OP_SENDMSG_ZC (6.1+), with IORING_SEND_ZC_REPORT_USAGE
	// (6.2+), which ring always asks for. The opcodes are probed; the
	// usage report has no feature bit of its own, so the probe also
	// wants IORING_FEAT_REG_REG_RING (6.3+), the first feature bit of a
	// kernel that knows it (this costs kernel 6.2 the feature).
	SendZC
	// NAPI: NAPI busy polling (IORING_REGISTER_NAPI, 6.9+, and a kernel
	// built with CONFIG_NET_RX_BUSY_POLL). Probed by registering and
	// unregistering on the probe ring.
	NAPI

	numFeatures
)

var featureNames = [numFeatures]string{
	RegisteredRing:     "registered ring descriptor (IORING_REGISTER_RING_FDS, 5.18+)",
	DirectDescriptors:  "direct descriptors (IORING_REGISTER_FILES2 sparse, IORING_FILE_INDEX_ALLOC, 5.19+)",
	FixedFdInstall:     "IORING_OP_FIXED_FD_INSTALL (6.8+)",
	CQESkip:            "skipped completions (IOSQE_CQE_SKIP_SUCCESS, 5.17+)",
	Bundles:            "bundles (IORING_RECVSEND_BUNDLE, 6.10+)",
	IncrementalBuffers: "incremental buffer consumption (IOU_PBUF_RING_INC, 6.12+)",
	SendZC:             "zero-copy send (IORING_OP_SEND_ZC, IORING_OP_SENDMSG_ZC, usage reports: 6.2+)",
	NAPI:               "NAPI busy polling (IORING_REGISTER_NAPI, 6.9+)",
}

// String names the feature, its kernel interface and the kernel version
// that brought it.
func (f Feature) String() string {
	if f < numFeatures {
		return featureNames[f]
	}
	return fmt.Sprintf("Feature(%d)", uint8(f))
}

// Features lists every Feature, in order.
func Features() []Feature {
	fs := make([]Feature, numFeatures)
	for i := range fs {
		fs[i] = Feature(i)
	}
	return fs
}

// The opcodes of the features (enum io_uring_op).
const (
	OpFilesUpdate    Op = 20
	OpSendZC         Op = 47
	OpSendmsgZC      Op = 48
	OpFixedFdInstall Op = 54
)

var featureOpNames = map[Op]string{
	OpSendZC: "SEND_ZC", OpSendmsgZC: "SENDMSG_ZC", OpFixedFdInstall: "FIXED_FD_INSTALL",
	OpFilesUpdate: "FILES_UPDATE",
}

// HasFeature reports whether the kernel has f.
func (s *Support) HasFeature(f Feature) bool { return f < numFeatures && s.features[f] }

// FeatureError returns nil when the kernel has f, and otherwise an
// *UnavailableError naming f and saying why the probe found it missing.
func (s *Support) FeatureError(f Feature) error {
	if s.HasFeature(f) {
		return nil
	}
	why := errors.ErrUnsupported
	if f < numFeatures && s.featureErrs[f] != nil {
		why = s.featureErrs[f]
	}
	return &UnavailableError{Feature: f.String(), Err: why}
}

// probeFeatures answers for every Feature on the probe ring fd, which the
// kernel set up with p, after the opcode probe filled s.ops. A
// registration the kernel refuses (EINVAL, EOPNOTSUPP, ...) means the
// feature is missing; any other failure (ENOMEM, EMFILE) leaves it
// missing for now and the answer inconclusive, so that it is not cached.
func probeFeatures(fd int, p *params, s *Support) {
	s.conclusive = true
	set := func(f Feature, err error) {
		s.features[f] = err == nil
		if err == nil {
			return
		}
		s.featureErrs[f] = err
		if !refused(err) {
			s.conclusive = false
		}
	}
	bit := func(b uint32, name string) error {
		if p.features&b == 0 {
			return fmt.Errorf("the kernel does not report %s: %w", name, errors.ErrUnsupported)
		}
		return nil
	}
	op := func(o Op) error {
		if !s.ops[o] {
			return fmt.Errorf("the opcode probe does not list IORING_OP_%v: %w", o, errors.ErrUnsupported)
		}
		return nil
	}
	set(RegisteredRing, probeRegisteredRing(fd))
	set(DirectDescriptors, probeFileTable(fd))
	set(FixedFdInstall, op(OpFixedFdInstall))
	set(CQESkip, bit(featCQESkip, "IORING_FEAT_CQE_SKIP"))
	set(Bundles, bit(featRecvSendBundle, "IORING_FEAT_RECVSEND_BUNDLE"))
	set(IncrementalBuffers, probeIncremental(fd))
	set(SendZC, errors.Join(op(OpSendZC), op(OpSendmsgZC),
		bit(featRegRegRing, "IORING_FEAT_REG_REG_RING (the usage report's proxy)")))
	set(NAPI, probeNAPI(fd))
}

// refused reports whether err is the kernel's conclusive "no" to a
// feature: an errno that means it does not know the request, or
// errors.ErrUnsupported from a missing bit or opcode.
func refused(err error) bool {
	if errors.Is(err, errors.ErrUnsupported) {
		return true
	}
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return false
	}
	switch errno {
	case unix.EINVAL, unix.EOPNOTSUPP, unix.ENOSYS, unix.EPERM, unix.EACCES:
		return true
	}
	return false
}

// probeRegisteredRing registers the probe ring in the calling thread's
// table and unregisters it, on one thread: a goroutine may come back from
// a syscall on another, where the index would name a slot of that
// thread's (perhaps another ring's).
func probeRegisteredRing(fd int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	up := &rsrcUpdate{offset: registerRingFdAlloc, data: uint64(fd)}
	if err := sysRegister(fd, registerRingFds, unsafe.Pointer(up), 1); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return nil // the kernel has it; this thread's 16 slots are taken
		}
		return os.NewSyscallError("io_uring_register(RING_FDS)", err)
	}
	up.data = 0
	if err := sysRegister(fd, unregisterRingFds, unsafe.Pointer(up), 1); err != nil {
		return os.NewSyscallError("io_uring_register(UNREGISTER_RING_FDS)", err)
	}
	return nil
}

func probeFileTable(fd int) error {
	reg := &rsrcRegister{nr: 1, flags: rsrcRegisterSparse}
	if err := sysRegister(fd, registerFiles2, unsafe.Pointer(reg), uint32(unsafe.Sizeof(*reg))); err != nil {
		return os.NewSyscallError("io_uring_register(FILES2)", err)
	}
	if err := sysRegister(fd, unregisterFiles, nil, 0); err != nil {
		return os.NewSyscallError("io_uring_register(UNREGISTER_FILES)", err)
	}
	return nil
}

func probeIncremental(fd int) error {
	mem, err := unix.Mmap(-1, 0, int(unsafe.Sizeof(bufDesc{})), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_ANONYMOUS|unix.MAP_PRIVATE)
	if err != nil {
		return os.NewSyscallError("mmap", err)
	}
	defer unix.Munmap(mem)
	reg := &bufReg{ringAddr: uint64(uintptr(unsafe.Pointer(&mem[0]))), ringEntries: 1, flags: pbufRingInc}
	if err := sysRegister(fd, registerPbufRing, unsafe.Pointer(reg), 1); err != nil {
		return os.NewSyscallError("io_uring_register(PBUF_RING, IOU_PBUF_RING_INC)", err)
	}
	reg = &bufReg{}
	if err := sysRegister(fd, unregisterPbufRing, unsafe.Pointer(reg), 1); err != nil {
		return os.NewSyscallError("io_uring_register(UNREGISTER_PBUF_RING)", err)
	}
	return nil
}

func probeNAPI(fd int) error {
	reg := &napiReg{busyPollTo: 1}
	if err := sysRegister(fd, registerNAPI, unsafe.Pointer(reg), 1); err != nil {
		return os.NewSyscallError("io_uring_register(NAPI)", err)
	}
	reg = &napiReg{}
	if err := sysRegister(fd, unregisterNAPI, unsafe.Pointer(reg), 1); err != nil {
		return os.NewSyscallError("io_uring_register(UNREGISTER_NAPI)", err)
	}
	return nil
}
