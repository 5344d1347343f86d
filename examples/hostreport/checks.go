//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
)

func rlimit(resource int) limit {
	var l unix.Rlimit
	if err := unix.Getrlimit(resource, &l); err != nil {
		return limit{Soft: -1, Hard: -1}
	}
	conv := func(v uint64) int64 {
		if v == unix.RLIM_INFINITY || v > 1<<62 {
			return -1
		}
		return int64(v)
	}
	return limit{Soft: conv(l.Cur), Hard: conv(l.Max)}
}

// cpuIRQs lists, for each of cpus, the IRQs whose smp_affinity selects it
// alone, named as /proc/interrupts names them.
func cpuIRQs(proc string, cpus []int) []cpuReport {
	names := irqNames(proc)
	pinned := map[int][]irq{}
	dirs, _ := os.ReadDir(filepath.Join(proc, "irq"))
	for _, d := range dirs {
		n, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, "irq", d.Name(), "smp_affinity"))
		if err != nil {
			continue
		}
		set, err := cpu.ParseIRQMask(string(b))
		if err != nil || len(set) != 1 {
			continue
		}
		pinned[set[0]] = append(pinned[set[0]], irq{IRQ: n, Name: names[n]})
	}
	var out []cpuReport
	for _, c := range cpus {
		irqs := pinned[c]
		if irqs == nil {
			irqs = []irq{}
		}
		out = append(out, cpuReport{CPU: c, IRQMask: cpu.IRQMask(c), PinnedIRQs: irqs})
	}
	return out
}

// irqNames reads the device names of the numbered IRQs in /proc/interrupts:
// the last field of each line, after the per-CPU counts and the chip.
func irqNames(proc string) map[int]string {
	names := map[int]string{}
	b, err := os.ReadFile(filepath.Join(proc, "interrupts"))
	if err != nil {
		return names
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(f[0], ":"))
		if err != nil {
			continue
		}
		names[n] = f[len(f)-1]
	}
	return names
}

// nicTimeout bounds tune-nic.sh --check.
const nicTimeout = 30 * time.Second

// checkNIC runs tune-nic.sh --check --json for the loop CPUs.
func checkNIC(o options, cpus []int) nicReport {
	if o.tuneNIC == "" {
		return nicReport{}
	}
	n := nicReport{Script: o.tuneNIC}
	if _, err := os.Stat(o.tuneNIC); err != nil {
		n.Error = fmt.Sprintf("not found (%v); give its path with -tune-nic, or -tune-nic '' to skip the NIC", err)
		return n
	}
	args := []string{"--check", "--json", "--cpus", cpu.FormatList(cpus)}
	if o.dev != "" {
		args = append(args, "--dev", o.dev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nicTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.tuneNIC, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		n.Exit = exit.ExitCode()
	default:
		n.Error = fmt.Sprintf("%s: %v", o.tuneNIC, err)
		return n
	}
	n.Checked = true
	n.Error = strings.TrimSpace(stderr.String())
	var check struct {
		Gaps []struct {
			Reason string `json:"reason"`
		} `json:"gaps"`
	}
	if json.Valid(out) {
		n.Check = json.RawMessage(strings.TrimSpace(string(out)))
		if json.Unmarshal(out, &check) == nil {
			for _, g := range check.Gaps {
				n.Gaps = append(n.Gaps, g.Reason)
			}
		}
	}
	return n
}

// text is the readable form of the report.
func (r *report) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kernel:     %s\n", r.Kernel)
	if r.IOURing.Available {
		fmt.Fprintf(&b, "io_uring:   available; ring flags %s\n", r.IOURing.Flags)
		fmt.Fprintf(&b, "opcodes:    loops use %s\n", strings.Join(r.IOURing.LoopOpcodes, " "))
	} else {
		fmt.Fprintf(&b, "io_uring:   unavailable: %s\n", r.IOURing.Reason)
	}
	if len(r.IOURing.KernelOpcodes) > 0 {
		fmt.Fprintf(&b, "            kernel supports %s\n", strings.Join(r.IOURing.KernelOpcodes, " "))
	}
	fmt.Fprintf(&b, "backend:    %s (%s)\n", r.Backend, r.BackendReason)
	fmt.Fprintf(&b, "nofile:     %s (Go raises its soft limit to the hard one)\n", r.NoFile)
	fmt.Fprintf(&b, "memlock:    %s\n", r.MemLock)
	fmt.Fprintf(&b, "somaxconn:  %d\n", r.Somaxconn)
	fmt.Fprintf(&b, "tls:        %s\n", percore.KernelTLSStatus{Available: r.KernelTLS.Available, Used: r.KernelTLS.Used, Reason: r.KernelTLS.Reason})
	for _, c := range r.CPUs {
		var irqs []string
		for _, q := range c.PinnedIRQs {
			irqs = append(irqs, fmt.Sprintf("%d (%s)", q.IRQ, q.Name))
		}
		pinned := "none"
		if len(irqs) > 0 {
			pinned = strings.Join(irqs, ", ")
		}
		fmt.Fprintf(&b, "cpu %-6d  irq mask %s; IRQs pinned to it alone: %s\n", c.CPU, c.IRQMask, pinned)
	}
	switch {
	case r.NIC.Checked && r.NIC.Exit == 0:
		fmt.Fprintf(&b, "nic:        %s --check: the full hardware recipe applies\n", r.NIC.Script)
	case r.NIC.Checked && r.NIC.Exit == 2:
		fmt.Fprintf(&b, "nic:        %s --check: %d gaps (see the warning)\n", r.NIC.Script, len(r.NIC.Gaps))
	case r.NIC.Checked:
		fmt.Fprintf(&b, "nic:        %s --check: exit %d\n", r.NIC.Script, r.NIC.Exit)
	case r.NIC.Script == "":
		fmt.Fprintf(&b, "nic:        not checked (-tune-nic '')\n")
	default:
		fmt.Fprintf(&b, "nic:        not checked\n")
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warn: %s\n", w)
	}
	verdict := map[int]string{
		exitReady:       "ready",
		exitWarnings:    "ready, with warnings",
		exitUnavailable: "io_uring unavailable: the loops would run on epoll",
	}[r.Exit]
	fmt.Fprintf(&b, "verdict:    %s (exit %d)\n", verdict, r.Exit)
	return b.String()
}
