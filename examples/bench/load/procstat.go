//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100 on
// every Linux architecture (it is part of the ABI, unlike CONFIG_HZ).
const clockTicks = 100

// procSample is what one look at a process's /proc entries found.
type procSample struct {
	cpu   time.Duration // utime+stime of all its threads, dead ones included
	ctxsw uint64        // voluntary+nonvoluntary context switches of its live threads
}

// sampleProc reads the CPU time and context switches of process pid.
func sampleProc(pid int) (procSample, error) {
	var s procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	if s.cpu, err = parseStatCPU(stat); err != nil {
		return s, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	s.ctxsw, err = threadContextSwitches(pid)
	return s, err
}

// parseStatCPU returns utime+stime from the contents of /proc/PID/stat. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so the fields are counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	// After ") " come fields 3 (state) onwards; utime and stime are 14 and 15.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("only %d fields after the command name", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// threadContextSwitches sums voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches over /proc/PID/task/*/status. Threads that exit
// between two samples take their counts with them; Go runtimes rarely end
// threads.
func threadContextSwitches(pid int) (uint64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil {
		return 0, err
	}
	if len(tasks) == 0 {
		return 0, fmt.Errorf("process %d: %w", pid, os.ErrNotExist)
	}
	var total uint64
	for _, path := range tasks {
		fields, err := readStatus(path)
		if err != nil {
			continue // the thread exited
		}
		total += fields["voluntary_ctxt_switches"] + fields["nonvoluntary_ctxt_switches"]
	}
	return total, nil
}

// readStatus returns the numeric fields of a /proc status file ("Key: N
// [kB]"), in the file's own units.
func readStatus(path string) (map[string]uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseStatus(data), nil
}

func parseStatus(data []byte) map[string]uint64 {
	fields := make(map[string]uint64)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			fields[key] = n
		}
	}
	return fields
}

// procMemory is a process's resident memory, in KiB.
type procMemory struct {
	hwm, rss uint64 // VmHWM (peak) and VmRSS (now)
	threads  uint64
}

// readMemory reads VmHWM, VmRSS and Threads from /proc/PID/status.
func readMemory(pid int) (procMemory, error) {
	f, err := readStatus(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procMemory{}, err
	}
	return procMemory{hwm: f["VmHWM"], rss: f["VmRSS"], threads: f["Threads"]}, nil
}

// selfCPU returns the CPU time this process has used, from getrusage, which
// counts in microseconds rather than the clock ticks of /proc/self/stat.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuCount returns how many CPUs process pid (0: this one) may run on.
func cpuCount(pid int) int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return 0
	}
	return set.Count()
}

// machineSample is the machine's CPU time from the aggregate "cpu" line of
// /proc/stat, in clock ticks summed over all CPUs.
type machineSample struct {
	total uint64 // every column but guest (already inside user and nice)
	steal uint64 // taken by the hypervisor
	tasks uint64 // user+nice+system: time processes ran, interrupts excluded
}

// sampleMachine reads /proc/stat.
func sampleMachine() machineSample {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineSample{}
	}
	return parseProcStat(data)
}

func parseProcStat(data []byte) machineSample {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return machineSample{}
	}
	var s machineSample
	// user nice system idle iowait irq softirq steal guest guest_nice
	for i := 1; i < len(f) && i <= 8; i++ {
		n, _ := strconv.ParseUint(f[i], 10, 64)
		s.total += n
		switch i {
		case 1, 2, 3:
			s.tasks += n
		case 8:
			s.steal = n
		}
	}
	return s
}

// stealPct returns the share of CPU time stolen by the hypervisor between a
// and b, in percent.
func stealPct(a, b machineSample) float64 {
	if b.total <= a.total {
		return 0
	}
	return 100 * float64(b.steal-a.steal) / float64(b.total-a.total)
}

// otherCPU returns the CPU time that processes other than ours (the
// generator and the server, which used ours) ran between a and b: the
// machine's user+system time less ours, never below zero. Interrupt time is
// left out on both sides where the kernel accounts it apart (with
// CONFIG_IRQ_TIME_ACCOUNTING); where it charges it to the running task
// instead, our share includes softirq work that /proc/stat's system column
// does not, which can only make the figure smaller.
func otherCPU(a, b machineSample, ours time.Duration) time.Duration {
	if b.tasks <= a.tasks {
		return 0
	}
	all := time.Duration(b.tasks-a.tasks) * time.Second / clockTicks
	return max(all-ours, 0)
}
