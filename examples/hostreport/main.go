//go:build linux

// Command hostreport says whether this host is ready for percore, for a
// person or a deploy script: io_uring (available or why not, the opcodes
// the kernel supports and those the loops use, the setup flags a loop is
// granted), the backend Auto would pick, RLIMIT_NOFILE and RLIMIT_MEMLOCK,
// net.core.somaxconn, the loop CPUs with the IRQs pinned to each, and what
// scripts/tune-nic.sh --check says about the NIC.
//
//	go run ./examples/hostreport                 # a readable report
//	go run ./examples/hostreport -json           # one JSON object
//	go run ./examples/hostreport -cores 2-5 -dev eth0
//
// Exit status, for a deploy script to branch on:
//
//	0  ready: io_uring works with the loops' default flags, nothing to look at
//	1  the report could not be made (a bad flag, the loops cannot start at all)
//	2  io_uring works, but there are warnings (each on a "warn:" line, or in
//	   "warnings" in the JSON): a low descriptor limit or somaxconn, a NIC
//	   that tune-nic.sh --check says is not fully tuned or could not check
//	3  io_uring is unavailable here: the loops would run on epoll (the same
//	   meaning as examples/echo -probe's status 3); warnings are listed too
//
// It changes nothing and needs no root.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/ring"
	percore "github.com/percore/percore/runtime"
)

// Exit statuses.
const (
	exitReady       = 0
	exitError       = 1
	exitWarnings    = 2
	exitUnavailable = 3
)

// Thresholds below which the report warns.
const (
	// minNoFile is the descriptor limit under which a server holding
	// many connections runs out: each connection is a descriptor.
	minNoFile = 65536
	// minSomaxconn is the kernel's default since 5.4; listen backlogs are
	// capped at somaxconn.
	minSomaxconn = 4096
)

// options are the command's flags, and the roots the tests replace.
type options struct {
	json    bool
	cores   string
	tuneNIC string // tune-nic.sh's path; "" skips the NIC check
	dev     string
	proc    string // the /proc root
}

func main() {
	var o options
	flag.BoolVar(&o.json, "json", false, "print the report as one JSON object")
	flag.StringVar(&o.cores, "cores", "", "the loops' CPUs, e.g. 0-3 (default: the affinity mask, at most GOMAXPROCS of it, as percore picks them)")
	flag.StringVar(&o.tuneNIC, "tune-nic", "scripts/tune-nic.sh", "path of tune-nic.sh, run with --check; empty skips the NIC check")
	flag.StringVar(&o.dev, "dev", "", "the NIC for tune-nic.sh --check (default: the script's choice, the default route's device)")
	flag.Parse()
	o.proc = "/proc"
	os.Exit(run(o, os.Stdout, os.Stderr))
}

// report is what the command found. Its JSON form is the -json output.
type report struct {
	Kernel  string        `json:"kernel"`
	IOURing ioURingReport `json:"io_uring"`
	// Backend is what a loop with Backend Auto runs here, and why.
	Backend       string `json:"backend"`
	BackendReason string `json:"backend_reason"`
	// NoFile and MemLock are this process's limits. Go raises its own
	// soft RLIMIT_NOFILE to the hard limit at start, so NoFile.Soft is
	// what a Go server gets, whatever the shell's soft limit is.
	NoFile    limit `json:"rlimit_nofile"`
	MemLock   limit `json:"rlimit_memlock"`
	Somaxconn int   `json:"somaxconn"`
	// KernelTLS is what percore found of kernel TLS (Report.KernelTLS).
	KernelTLS kernelTLSReport `json:"kernel_tls"`
	CPUs      []cpuReport     `json:"cpus"`
	NIC       nicReport       `json:"nic"`
	Warnings  []string        `json:"warnings"`
	// Exit is the exit status: see the package documentation.
	Exit int `json:"exit"`

	cpus []int // the loops' CPUs, as the probe's runtime picked them
}

type kernelTLSReport struct {
	Available bool   `json:"available"`
	Used      bool   `json:"used"`
	Reason    string `json:"reason"`
}

type ioURingReport struct {
	Available bool `json:"available"`
	// Reason says why not, when not.
	Reason string `json:"reason,omitempty"`
	// KernelOpcodes are the opcodes percore knows of that the kernel
	// supports (ring.Probe); LoopOpcodes, those among them a loop uses.
	KernelOpcodes []string `json:"kernel_opcodes"`
	LoopOpcodes   []string `json:"loop_opcodes"`
	// Flags are the setup flags a loop was granted.
	Flags string `json:"ring_flags,omitempty"`
}

// limit is a resource limit; -1 is unlimited.
type limit struct {
	Soft int64 `json:"soft"`
	Hard int64 `json:"hard"`
}

func (l limit) String() string {
	f := func(v int64) string {
		if v < 0 {
			return "unlimited"
		}
		return strconv.FormatInt(v, 10)
	}
	return "soft " + f(l.Soft) + ", hard " + f(l.Hard)
}

type cpuReport struct {
	CPU int `json:"cpu"`
	// IRQMask is the smp_affinity mask that selects this CPU alone.
	IRQMask string `json:"irq_mask"`
	// PinnedIRQs are the IRQs whose affinity is this CPU alone.
	PinnedIRQs []irq `json:"pinned_irqs"`
}

type irq struct {
	IRQ  int    `json:"irq"`
	Name string `json:"name"`
}

type nicReport struct {
	// Checked is whether tune-nic.sh --check ran; Script is its path.
	Checked bool   `json:"checked"`
	Script  string `json:"script,omitempty"`
	// Exit is its exit status: 0 the full hardware recipe applies, 2 it
	// does not (Gaps say why), 1 it could not check (Error says why).
	Exit  int      `json:"exit"`
	Gaps  []string `json:"gaps,omitempty"`
	Error string   `json:"error,omitempty"`
	// Check is its JSON report, as it printed it.
	Check json.RawMessage `json:"check,omitempty"`
}

func run(o options, stdout, stderr io.Writer) int {
	r, err := gather(o)
	if err != nil {
		fmt.Fprintln(stderr, "hostreport:", err)
		return exitError
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			fmt.Fprintln(stderr, "hostreport:", err)
			return exitError
		}
	} else {
		fmt.Fprint(stdout, r.text())
	}
	return r.Exit
}

func gather(o options) (*report, error) {
	var cores []int
	var err error
	if o.cores != "" {
		if cores, err = cpu.ParseList(o.cores); err != nil {
			return nil, err
		}
	}
	r := &report{Warnings: []string{}}
	if err := r.probe(cores); err != nil {
		return nil, err
	}
	r.NoFile = rlimit(unix.RLIMIT_NOFILE)
	r.MemLock = rlimit(unix.RLIMIT_MEMLOCK)
	if r.NoFile.Soft >= 0 && r.NoFile.Soft < minNoFile {
		r.warn("RLIMIT_NOFILE is %d: a server runs out of descriptors at about that many connections (raise the hard limit: LimitNOFILE= in a systemd unit, nofile in limits.conf)", r.NoFile.Soft)
	}
	if b, err := os.ReadFile(filepath.Join(o.proc, "sys/net/core/somaxconn")); err == nil {
		r.Somaxconn, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if r.Somaxconn < minSomaxconn {
			r.warn("net.core.somaxconn is %d: listen backlogs are capped there; bursts of connects beyond it are dropped (sysctl -w net.core.somaxconn=%d)", r.Somaxconn, minSomaxconn)
		}
	} else {
		r.warn("net.core.somaxconn: %v", err)
	}
	r.CPUs = cpuIRQs(o.proc, r.loopCPUs(cores))
	r.NIC = checkNIC(o, r.loopCPUs(cores))
	switch {
	case !r.NIC.Checked:
	case r.NIC.Exit == 2:
		r.warn("the NIC is not fully tuned for the loops (tune-nic.sh --check exit 2): %s", strings.Join(r.NIC.Gaps, "; "))
	case r.NIC.Exit != 0:
		r.warn("tune-nic.sh --check could not check the NIC (exit %d): %s", r.NIC.Exit, r.NIC.Error)
	}
	if o.tuneNIC != "" && !r.NIC.Checked {
		r.warn("tune-nic.sh: %s", r.NIC.Error)
	}
	r.Exit = exitStatus(r.IOURing.Available, len(r.Warnings))
	return r, nil
}

// exitStatus is the exit status of a report: io_uring's absence first,
// then any warning.
func exitStatus(uring bool, warnings int) int {
	switch {
	case !uring:
		return exitUnavailable
	case warnings > 0:
		return exitWarnings
	}
	return exitReady
}

func (r *report) warn(format string, args ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
}

// loopCPUs returns the CPUs the loops would run on: cores, else those the
// probe's runtime picked.
func (r *report) loopCPUs(cores []int) []int {
	if cores != nil {
		return cores
	}
	return r.cpus
}

// probe starts loops without a listener, io_uring first, to see what the
// kernel grants, and then with Auto to see what a default runtime picks.
func (r *report) probe(cores []int) error {
	quiet := slog.New(slog.DiscardHandler)
	if s, err := ring.Probe(); err == nil {
		for _, op := range s.Supported() {
			r.IOURing.KernelOpcodes = append(r.IOURing.KernelOpcodes, op.String())
		}
	}
	rt, err := percore.New(percore.Config{Backend: percore.IOURing, Cores: cores, Logger: quiet}, nil)
	switch {
	case err == nil:
		p := rt.Report()
		r.IOURing.Available = true
		r.IOURing.LoopOpcodes = p.Ops
		r.IOURing.Flags = p.RingFlags.String()
		r.Kernel = p.Kernel
		r.cpus = p.CPUs
		rt.Close()
	case errors.Is(err, ring.ErrUnavailable):
		r.IOURing.Reason = err.Error()
	default:
		return err
	}
	rt, err = percore.New(percore.Config{Cores: cores, Logger: quiet}, nil)
	if err != nil {
		return err
	}
	defer rt.Close()
	p := rt.Report()
	r.Backend, r.BackendReason, r.Kernel, r.cpus = p.Backend.String(), p.Reason, p.Kernel, p.CPUs
	r.KernelTLS = kernelTLSReport{Available: p.KernelTLS.Available, Used: p.KernelTLS.Used, Reason: p.KernelTLS.Reason}
	return nil
}
