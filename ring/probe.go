//go:build linux

package ring

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnavailable matches (with errors.Is) every *UnavailableError.
var ErrUnavailable = errors.New("io_uring unavailable")

// UnavailableError reports that io_uring cannot be used on this host, and
// which feature is missing.
type UnavailableError struct {
	// Feature names what is missing: "io_uring_setup" when the syscall is
	// refused outright, else a flag, feature or opcode.
	Feature string
	// Err is the underlying error (an errno, or errors.ErrUnsupported).
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("io_uring unavailable: %s: %v", e.Feature, e.Err)
}

// Unwrap returns the underlying error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// classify turns a setup or registration error into an *UnavailableError
// when it means "not on this host" (EPERM from seccomp or
// kernel.io_uring_disabled, ENOSYS, EINVAL, EOPNOTSUPP), and into an
// *os.SyscallError otherwise.
func classify(call, feature string, err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		switch errno {
		case unix.EPERM, unix.EACCES, unix.ENOSYS, unix.EINVAL, unix.EOPNOTSUPP:
			if feature == "" {
				// The call is the feature: name it once.
				return &UnavailableError{Feature: call, Err: errno}
			}
			return &UnavailableError{Feature: feature, Err: os.NewSyscallError(call, errno)}
		}
		return os.NewSyscallError(call, errno)
	}
	return fmt.Errorf("%s: %w", call, err)
}

// Op is an io_uring opcode.
type Op uint8

// The opcodes percore prepares or reports: every opcode a Prepare method
// submits (the runtime uses a subset, see the package documentation), and
// MSG_RING, which nothing prepares yet but the probe reports. The values
// are the kernel's enum io_uring_op.
const (
	OpNop         Op = 0
	OpPollAdd     Op = 6
	OpSendmsg     Op = 9
	OpRecvmsg     Op = 10
	OpTimeout     Op = 11
	OpAccept      Op = 13
	OpAsyncCancel Op = 14
	OpConnect     Op = 16
	OpClose       Op = 19
	OpRead        Op = 22
	OpWrite       Op = 23
	OpSend        Op = 26
	OpRecv        Op = 27
	OpShutdown    Op = 34
	OpMsgRing     Op = 40
)

var opNames = map[Op]string{
	OpRead: "READ", OpWrite: "WRITE", OpSendmsg: "SENDMSG", OpRecvmsg: "RECVMSG", OpTimeout: "TIMEOUT",
	OpAccept: "ACCEPT", OpAsyncCancel: "ASYNC_CANCEL", OpConnect: "CONNECT", OpClose: "CLOSE",
	OpSend: "SEND", OpRecv: "RECV", OpShutdown: "SHUTDOWN", OpPollAdd: "POLL_ADD",
	OpMsgRing: "MSG_RING", OpNop: "NOP",
}

// String returns the kernel's name of the opcode without its IORING_OP_ prefix.
func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	if s, ok := fileOpNames[o]; ok {
		return s
	}
	if s, ok := featureOpNames[o]; ok {
		return s
	}
	return fmt.Sprintf("OP(%d)", uint8(o))
}

// Support is what the kernel's probe found: its opcodes, and which
// Features it has.
type Support struct {
	ops         [256]bool
	features    [numFeatures]bool
	featureErrs [numFeatures]error // why a feature is missing
	// conclusive is false when a feature's probe failed for a reason
	// that may pass (ENOMEM, EMFILE): such an answer is not cached.
	conclusive bool
}

// Has reports whether the kernel supports op.
func (s *Support) Has(op Op) bool { return s.ops[op] }

// Require returns an *UnavailableError naming the first of ops that the
// kernel does not support, or nil.
func (s *Support) Require(ops ...Op) error {
	for _, op := range ops {
		if !s.ops[op] {
			return &UnavailableError{Feature: "opcode IORING_OP_" + op.String(), Err: errors.ErrUnsupported}
		}
	}
	return nil
}

// Supported lists the supported opcodes among the named Op constants.
func (s *Support) Supported() []Op {
	var ops []Op
	for op := range 256 {
		if _, named := opNames[Op(op)]; named && s.ops[op] {
			ops = append(ops, Op(op))
		}
	}
	return ops
}

// prober caches the kernel's opcode probe, which does not change while a
// process runs, but only once it is conclusive: the opcodes, or an
// *UnavailableError (io_uring cannot be used on this host). A transient
// failure (EMFILE, or ENOMEM from the locked-memory limit, while making the
// probe ring) is returned to its caller, and the next call probes again:
// cached, it would make every later setup fail and keep Auto from ever
// falling back. It is safe for concurrent use; concurrent callers share
// one probe.
type prober struct {
	mu  sync.Mutex
	s   *Support
	err error // an *UnavailableError
}

// probes is the process's probe cache, behind Probe.
var probes prober

func (p *prober) get() (*Support, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.s != nil || p.err != nil {
		return p.s, p.err
	}
	s, err := probeKernel()
	if err == nil {
		if s.conclusive {
			p.s = s
		}
	} else if errors.Is(err, ErrUnavailable) {
		p.err = err
	}
	return s, err
}

// probeKernel sets up a small ring, asks the kernel which opcodes it
// supports (IORING_REGISTER_PROBE, 5.6+) and which Features it has, and
// closes the ring, also when the probe fails. The ring is never mapped:
// the probe needs only its descriptor.
func probeKernel() (*Support, error) {
	if err := openHook(); err != nil {
		return nil, classify("io_uring_setup", "", err)
	}
	var p params
	fd, err := sysSetup(probeRingEntries, &p)
	if err != nil {
		return nil, classify("io_uring_setup", "", err)
	}
	defer unix.Close(fd)
	arg := new(probeArg)
	if err := sysRegister(fd, registerProbe, unsafe.Pointer(arg), probeOps); err != nil {
		// A kernel without the probe refuses it with EINVAL.
		return nil, classify("io_uring_register(PROBE)", "the opcode probe (IORING_REGISTER_PROBE, 5.6+)", err)
	}
	s := new(Support)
	for _, o := range arg.ops[:min(int(arg.opsLen), probeOps)] {
		if o.flags&opSupported != 0 {
			s.ops[o.op] = true
		}
	}
	probeFeatures(fd, &p, s)
	return s, nil
}

// probeRingEntries is the size of the probe's ring: the smallest there is.
const probeRingEntries = 2

// Probe returns the opcodes and Features this kernel supports. It sets up
// and tears down a small ring the first time; a conclusive answer (the
// opcodes and features, or an *UnavailableError) is cached for the life of
// the process, and any other error, or an answer in which a feature's
// probe failed transiently (that feature then reads as missing), is
// returned without caching, so that the next call probes again.
// Probe is safe for concurrent use.
func Probe() (*Support, error) { return probes.get() }
