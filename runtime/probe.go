//go:build linux

package runtime

import (
	"fmt"
	"strings"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/sys"
)

// Report says what the runtime found and chose at start: the backend and
// why, the io_uring setup flags and opcodes, the kernel and the loops'
// CPUs. (ring.Probe is the kernel's opcode probe it draws on.)
type Report struct {
	// Backend is the backend every loop runs (never Auto).
	Backend Backend
	// Reason says why: io_uring worked, epoll was asked for, or io_uring
	// was unavailable and why.
	Reason string
	// RingFlags are the io_uring setup flags in use (io_uring only).
	RingFlags RingFlags
	// UringFeatures are the io_uring features the loops use: those
	// Config.UringFeatures asked for that the kernel has (io_uring only).
	UringFeatures UringFeatures
	// Ops are the io_uring opcodes this kernel supports among those
	// percore uses (io_uring only).
	Ops []string
	// Kernel is the kernel release (uname -r).
	Kernel string
	// CPUs are the loops' CPUs, in loop order.
	CPUs []int
	// KernelTLS is what New found of kernel TLS (runtime/tls_kernel.go).
	KernelTLS KernelTLSStatus
	// GOMAXPROCS is GOMAXPROCS once New returned: with TLS listeners
	// New raises it to the loops plus the handshake pool's MaxCPU
	// (runtime/tls_pool.go, setupTLSPool).
	GOMAXPROCS int
}

// String is a readable multi-line report.
func (p Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backend:  %s (%s)\n", p.Backend, p.Reason)
	if p.Backend == IOURing {
		fmt.Fprintf(&b, "ring:     flags %s; features %s; opcodes %s\n", p.RingFlags, p.UringFeatures, strings.Join(p.Ops, " "))
	}
	fmt.Fprintf(&b, "kernel:   %s\n", p.Kernel)
	loops := "loops"
	if len(p.CPUs) == 1 {
		loops = "loop"
	}
	fmt.Fprintf(&b, "cpus:     %s (%d %s), GOMAXPROCS %d\n", cpu.FormatList(p.CPUs), len(p.CPUs), loops, p.GOMAXPROCS)
	fmt.Fprintf(&b, "tls:      %s", p.KernelTLS)
	return b.String()
}

func kernelRelease() string {
	return sys.KernelRelease()
}
