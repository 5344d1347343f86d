// Package cpu reads and sets CPU affinity for percore's thread-per-core
// loops, and converts CPU sets between the textual forms Linux uses.
//
// [Cores] reports the CPUs the calling thread may run on, read with
// sched_getaffinity(0), so the limits set by taskset(1), numactl(8) and cgroup
// cpusets are honoured. [Pin] locks the calling goroutine to its OS thread and
// restricts that thread to one CPU; [Thread] reads a thread's affinity back.
//
// [Quota] reads the cgroup CPU bandwidth limit (cgroup v2 cpu.max or v1
// cpu.cfs_quota_us, the lowest up the hierarchy) as a number of CPUs, for
// sizing the threads that may run at once below it.
//
// [ParseList] and [FormatList] convert the kernel's CPU-list format
// ("0-3,8,10-11", as in /sys/devices/system/cpu/online and taskset -c), and
// [IRQMask], [IRQMaskSet] and [ParseIRQMask] the hexadecimal mask format of
// /proc/irq/N/smp_affinity ("00000001,00000000").
//
// All functions are safe to call from any goroutine. Pin changes the thread
// of the goroutine that calls it, and only that one.
//
// # Threads and affinity
//
// Affinity belongs to an OS thread, not to a process or a goroutine. A
// goroutine that was not locked with [runtime.LockOSThread] may move to
// another thread between any two statements, so Cores and Thread describe the
// thread the goroutine ran on during the call.
//
// A new thread inherits the affinity of the thread that creates it. Go
// creates threads from unlocked threads only: a locked thread that needs a new
// one asks a clean template thread, which the runtime starts the first time
// any goroutine locks its thread (Pin locks before it narrows). A thread
// narrowed by Pin stays locked to its goroutine, so it never runs another
// goroutine and never becomes the parent of a new thread. As a result, an
// unlocked goroutine calling Cores sees the process mask, while a goroutine
// that has called Pin sees only its own CPU.
//
// # Caveats
//
// Pin never unlocks the thread. When the pinned goroutine returns (or calls
// [runtime.Goexit]) while still locked, Go terminates the thread instead of
// returning it to the scheduler, so a narrowed thread is never reused by
// unrelated goroutines. This is intended: a loop goroutine owns its thread for
// its whole life. Calling [runtime.UnlockOSThread] after Pin hands a pinned
// thread back to the scheduler and should not be done.
//
// A goroutine that Pin'ned its thread sees only that CPU in Cores, so a second
// Pin to a different CPU on the same goroutine fails with [ErrNotAllowed];
// pinning again to the same CPU succeeds.
//
// CPU numbers above [MaxCPU] are rejected by the parsers and left out by the
// formatters.
package cpu
