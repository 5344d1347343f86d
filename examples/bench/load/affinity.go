//go:build linux

package main

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/percore/percore/cpu"
	"golang.org/x/sys/unix"
)

// pinProcess confines the whole process to the CPUs in list. Setting the
// affinity of every running thread would race with the Go runtime starting
// new ones, so the calling thread sets its own and the program executes
// itself again: the new process starts with that single thread, and every
// thread it creates inherits the set. When the process already runs on
// exactly these CPUs (as after that exec, or under taskset) it returns nil
// at once; otherwise it returns only on failure.
func pinProcess(list string) error {
	cpus, err := cpu.ParseList(list)
	if err != nil {
		return err
	}
	var want unix.CPUSet
	for _, c := range cpus {
		want.Set(c)
	}
	var have unix.CPUSet
	if err := unix.SchedGetaffinity(0, &have); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	if have == want {
		return nil
	}
	runtime.LockOSThread() // the exec must come from the thread we pinned
	if err := unix.SchedSetaffinity(0, &want); err != nil {
		return fmt.Errorf("pin to cpus %s: %w", list, err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("pin to cpus %s: %w", list, err)
	}
	err = syscall.Exec(self, os.Args, os.Environ())
	return fmt.Errorf("pin to cpus %s: exec %s: %w", list, self, err)
}
