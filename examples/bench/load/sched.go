//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Where a run's time went besides the CPU it used: the hypervisor's steal on
// the very CPUs the generator and the server run on (the machine-wide
// steal_pct averages it over every CPU), and how long their threads were
// runnable but waited for a CPU (the run-queue wait, schedstat's second
// field: the wake-to-run gap summed over every wake-up). Both stall a
// request without showing as the process's own CPU time; at an open loop's
// rate a few milliseconds of either put a request per millisecond into the
// tail.

// cpuTimes is one CPU's line of /proc/stat, in clock ticks.
type cpuTimes struct{ total, steal uint64 }

// parsePerCPU returns each CPU's total and steal ticks from the contents of
// /proc/stat (the "cpuN" lines; the aggregate "cpu" line is not one of them).
func parsePerCPU(data []byte) map[int]cpuTimes {
	m := make(map[int]cpuTimes)
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil {
			continue
		}
		var t cpuTimes
		// user nice system idle iowait irq softirq steal (guest is inside user)
		for i := 1; i <= 8; i++ {
			n, _ := strconv.ParseUint(f[i], 10, 64)
			t.total += n
			if i == 8 {
				t.steal = n
			}
		}
		m[cpu] = t
	}
	return m
}

// stealOn returns the share of the CPUs cpus' time that the hypervisor took
// between samples a and b, in percent (0 when the samples do not cover them).
func stealOn(a, b map[int]cpuTimes, cpus []int) float64 {
	var total, steal uint64
	for _, c := range cpus {
		x, ok1 := a[c]
		y, ok2 := b[c]
		if !ok1 || !ok2 || y.total < x.total || y.steal < x.steal {
			continue
		}
		total += y.total - x.total
		steal += y.steal - x.steal
	}
	if total == 0 {
		return 0
	}
	return 100 * float64(steal) / float64(total)
}

// affinity returns the CPUs process pid (0: this one) may run on.
func affinity(pid int) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return nil
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// parseSchedstat returns the run-queue wait from the contents of a thread's
// /proc/.../schedstat: "time on CPU, time waiting to run (ns), time slices".
func parseSchedstat(data []byte) (time.Duration, error) {
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, fmt.Errorf("schedstat %q: want 3 fields", data)
	}
	n, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("schedstat %q: %w", data, err)
	}
	return time.Duration(n), nil
}

// runqWait returns the run-queue wait summed over the live threads of
// process pid (0: this one). A thread that exits takes its share along,
// which is why it is sampled over a window in which the threads live.
func runqWait(pid int) (time.Duration, error) {
	dir := "/proc/self/task"
	if pid != 0 {
		dir = fmt.Sprintf("/proc/%d/task", pid)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*", "schedstat"))
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		w, err := parseSchedstat(data)
		if err != nil {
			return 0, err
		}
		sum += w
	}
	return sum, nil
}

// schedSample is the steal and run-queue state at one edge of the window.
type schedSample struct {
	cpus                 map[int]cpuTimes
	selfWait, serverWait time.Duration
	err                  error // reading the server's threads
}

func sampleSched(serverPID int) schedSample {
	var s schedSample
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		s.cpus = parsePerCPU(data)
	}
	s.selfWait, _ = runqWait(0)
	if serverPID != 0 {
		s.serverWait, s.err = runqWait(serverPID)
	}
	return s
}

// fillSched computes the steal on the generator's and the server's CPUs and
// their threads' run-queue wait, as a percentage of the window, from the
// samples at its edges.
func (r *Result) fillSched(a, b schedSample, clientCPUs, serverCPUs []int) {
	if r.WindowS <= 0 {
		return
	}
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / r.WindowS }
	r.ClientStealPct = stealOn(a.cpus, b.cpus, clientCPUs)
	r.ClientRunqWaitPct = pct(max(b.selfWait-a.selfWait, 0))
	if r.ServerPID == 0 {
		return
	}
	r.ServerStealPct = stealOn(a.cpus, b.cpus, serverCPUs)
	if a.err == nil && b.err == nil {
		r.ServerRunqWaitPct = pct(max(b.serverWait-a.serverWait, 0))
	}
}
