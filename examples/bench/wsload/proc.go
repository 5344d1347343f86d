//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What load's procstat.go reads, for one more program: the CPU time in
// /proc/PID/stat and the memory in /proc/PID/status (load is package main
// and cannot be imported).

const clockTicks = 100 // USER_HZ: part of the ABI

// procCPU returns utime+stime of process pid.
func procCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime or stime", pid)
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// memory is a process's VmRSS and Threads.
type memory struct {
	rssKiB  uint64
	threads uint64
}

// procMemory reads /proc/PID/status (pid 0: this process).
func procMemory(pid int) (memory, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return memory{}, err
	}
	var m memory
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseUint(f[0], 10, 64)
		switch k {
		case "VmRSS":
			m.rssKiB = n
		case "Threads":
			m.threads = n
		}
	}
	return m, nil
}

// selfCPU is this process's CPU time, from getrusage.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// raiseFDLimit raises the soft limit on open files to the hard one.
func raiseFDLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	l.Cur = l.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	return l.Cur
}

// settleGC runs the collector so that the client's own figures are what it
// holds, not garbage.
func settleGC() {
	runtime.GC()
	runtime.GC()
}
