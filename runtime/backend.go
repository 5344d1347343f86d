//go:build linux

package runtime

import (
	"fmt"
	"strings"

	"github.com/percore/percore/ring"
)

// Backend selects how a loop talks to the kernel.
type Backend int

const (
	// Auto uses io_uring when a ring can be set up and every opcode the
	// loop needs is supported, and epoll otherwise (logged once, with the
	// reason). It is the zero value.
	Auto Backend = iota
	// IOURing uses io_uring and never falls back: a host without it is an
	// error from New.
	IOURing
	// Epoll uses epoll.
	Epoll
)

// String returns "auto", "io_uring" or "epoll".
func (b Backend) String() string {
	switch b {
	case Auto:
		return "auto"
	case IOURing:
		return "io_uring"
	case Epoll:
		return "epoll"
	}
	return fmt.Sprintf("Backend(%d)", int(b))
}

// ParseBackend accepts "auto", "uring", "io_uring" and "epoll".
func ParseBackend(s string) (Backend, error) {
	switch s {
	case "auto", "":
		return Auto, nil
	case "uring", "io_uring", "iouring":
		return IOURing, nil
	case "epoll":
		return Epoll, nil
	}
	return Auto, fmt.Errorf("unknown backend %q (want auto, uring or epoll)", s)
}

// RingFlags are the io_uring setup flags a loop asks for.
type RingFlags = ring.Flags

// The io_uring setup flags; see package ring for what each does.
const (
	SingleIssuer = ring.SingleIssuer
	DeferTaskrun = ring.DeferTaskrun
	CoopTaskrun  = ring.CoopTaskrun
	SQPoll       = ring.SQPoll
	// DefaultRingFlags are the flags measured best on a loop that owns its
	// ring and enters the kernel once per turn: see docs/performance.md.
	DefaultRingFlags = SingleIssuer | DeferTaskrun
)

// ErrUnavailable matches (with errors.Is) the error New returns for the
// IOURing backend where io_uring cannot be used on this host (seccomp,
// kernel.io_uring_disabled, an old kernel, a missing opcode or feature);
// the Auto backend falls back to epoll on it. It is ring.ErrUnavailable,
// here so that callers need not import package ring.
var ErrUnavailable = ring.ErrUnavailable

// ParseRingFlags parses a comma-separated list of io_uring setup flags in
// the kernel's names, case-insensitive, with or without the
// IORING_SETUP_ prefix ("single_issuer,defer_taskrun"); "none" is no flags
// and "" or "default" is DefaultRingFlags. Config.RingFlags takes a
// pointer to the result.
func ParseRingFlags(s string) (RingFlags, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "default":
		return DefaultRingFlags, nil
	case "none":
		return 0, nil
	}
	var f RingFlags
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "IORING_SETUP_")
		switch name {
		case "SINGLE_ISSUER":
			f |= SingleIssuer
		case "DEFER_TASKRUN":
			f |= DeferTaskrun
		case "COOP_TASKRUN":
			f |= CoopTaskrun
		case "SQPOLL":
			f |= SQPoll
		default:
			return 0, fmt.Errorf("unknown io_uring setup flag %q (want single_issuer, defer_taskrun, coop_taskrun, sqpoll or none)", name)
		}
	}
	return f, nil
}
