//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// syscallEvent is the tracepoint that counts every system call entry.
const syscallEvent = "raw_syscalls:sys_enter"

// perfCounter counts a process's system calls with `perf stat` over the
// measurement window: started at the window's start, interrupted at its end.
// Attaching takes a few milliseconds, so the count can miss the window's
// first moments; the tracepoint also slows some servers down, which is why
// bench.sh takes syscall counts in a separate run.
type perfCounter struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
}

// startPerf attaches perf stat to process pid.
func startPerf(pid int) (*perfCounter, error) {
	path, err := exec.LookPath("perf")
	if err != nil {
		return nil, fmt.Errorf("-perf: %w (install linux-perf)", err)
	}
	pc := &perfCounter{}
	pc.cmd = exec.Command(path, "stat", "-x,", "-e", syscallEvent, "-p", strconv.Itoa(pid))
	pc.cmd.Stderr = &pc.stderr
	if err := pc.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start perf: %w", err)
	}
	return pc, nil
}

// stop interrupts perf, which then prints its counts, and returns the number
// of system calls counted.
func (pc *perfCounter) stop() (uint64, error) {
	if err := pc.cmd.Process.Signal(os.Interrupt); err != nil {
		return 0, fmt.Errorf("interrupt perf: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- pc.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = pc.cmd.Process.Kill()
		<-exited
		return 0, errors.New("perf did not exit within 5s of an interrupt")
	}
	return parsePerf(pc.stderr.String(), syscallEvent)
}

// parsePerf returns the count of event from the CSV output of `perf stat
// -x,` (count,unit,event,run time,percentage,...).
func parsePerf(out, event string) (uint64, error) {
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimSpace(line), ",")
		if len(f) < 3 || f[2] != event {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("perf counted %s as %q", event, f[0])
		}
		return n, nil
	}
	return 0, fmt.Errorf("no %s count in perf's output %q", event, strings.TrimSpace(out))
}
