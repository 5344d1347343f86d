package cpu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"
)

// setSizeBits is the width of the first affinity mask Cores tries: glibc's
// CPU_SETSIZE, enough for every machine with up to 1024 CPU ids.
const setSizeBits = 1024

// ErrNotAllowed is the sentinel wrapped by [NotAllowedError]: the requested
// CPU is not in the set the calling thread may run on.
var ErrNotAllowed = errors.New("cpu: cpu is not in the allowed set")

// NotAllowedError is returned by [Pin] when the CPU is not one the calling
// thread may run on. errors.Is(err, ErrNotAllowed) reports true for it.
type NotAllowedError struct {
	CPU     int   // the CPU that was asked for
	Allowed []int // the calling thread's allowed CPUs, sorted
}

// Error returns a message naming the CPU and the allowed set in list format,
// for example "cpu: cpu 5 is not in the allowed set 0-1".
func (e *NotAllowedError) Error() string {
	return fmt.Sprintf("cpu: cpu %d is not in the allowed set %s", e.CPU, FormatList(e.Allowed))
}

// Unwrap returns [ErrNotAllowed].
func (e *NotAllowedError) Unwrap() error { return ErrNotAllowed }

// Cores returns the CPUs the calling thread may run on, sorted and without
// duplicates, as read with sched_getaffinity(0). It therefore honours
// taskset(1) and cgroup cpusets.
//
// Called from an unlocked goroutine it returns the process mask (see the
// package documentation for why); called from a goroutine that has called
// [Pin] it returns only the pinned CPU. When the mask cannot be read, the
// error wraps an *os.SyscallError.
func Cores() ([]int, error) {
	return readAffinity(func(set unix.CPUSetDynamic) error {
		return unix.SchedGetaffinityDynamic(0, set)
	})
}

// Thread returns the calling thread's current affinity, sorted. It is the
// same call as [Cores], named for what tests and reports ask: lock the
// goroutine to its thread (or call [Pin]) first, otherwise the answer may
// describe a thread the goroutine has already left.
func Thread() ([]int, error) {
	return Cores()
}

// readAffinity reads an affinity mask with get, first into a CPU_SETSIZE
// mask and, when the kernel's mask is wider (EINVAL), into one that holds
// every CPU up to MaxCPU.
func readAffinity(get func(unix.CPUSetDynamic) error) ([]int, error) {
	set := unix.NewCPUSet(setSizeBits)
	err := get(set)
	if errors.Is(err, unix.EINVAL) {
		set = unix.NewCPUSet(MaxCPU + 1)
		err = get(set)
	}
	if err != nil {
		return nil, fmt.Errorf("cpu: read affinity: %w", os.NewSyscallError("sched_getaffinity", err))
	}
	n := set.Count()
	cpus := make([]int, 0, n)
	for c := 0; len(cpus) < n; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// Pin locks the calling goroutine to its OS thread (runtime.LockOSThread)
// and restricts that thread to cpu with sched_setaffinity. The CPU must be
// in [Cores] as seen by the locked thread; otherwise Pin returns a
// *[NotAllowedError], which wraps [ErrNotAllowed].
//
// On success the goroutine stays locked for good: Pin never unlocks, and
// when the goroutine exits while locked, Go terminates the thread with it, so
// the narrowed thread never serves another goroutine. On failure the thread's
// affinity is unchanged and Pin undoes its own LockOSThread (an outer lock
// the caller holds stays in place).
func Pin(cpu int) error {
	runtime.LockOSThread()
	if err := pin(cpu); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return nil
}

func pin(cpu int) error {
	allowed, err := Cores()
	if err != nil {
		return err
	}
	if _, ok := slices.BinarySearch(allowed, cpu); !ok {
		return &NotAllowedError{CPU: cpu, Allowed: allowed}
	}
	set := unix.NewCPUSet(max(cpu+1, setSizeBits))
	set.Set(cpu)
	if err := unix.SchedSetaffinityDynamic(0, set); err != nil {
		return fmt.Errorf("cpu: pin to cpu %d: %w", cpu, os.NewSyscallError("sched_setaffinity", err))
	}
	return nil
}
