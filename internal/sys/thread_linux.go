//go:build linux

package sys

import "golang.org/x/sys/unix"

// The calling thread's kernel scheduling, for the TLS handshake pool's
// threads while they compute (runtime/tlsconn): its policy and nice value
// (sched_getattr, sched_setattr) and its CPUs (sched_getaffinity,
// sched_setaffinity). The caller locks its goroutine to its thread first.

// ThreadSched returns the calling thread's scheduling attributes.
func ThreadSched() (unix.SchedAttr, error) {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return unix.SchedAttr{}, err
	}
	return *a, nil
}

// SetThreadSched sets the calling thread's scheduling attributes.
func SetThreadSched(a unix.SchedAttr) error {
	return unix.SchedSetAttr(0, &a, 0)
}

// ThreadAffinity reads the calling thread's CPUs into set.
func ThreadAffinity(set unix.CPUSetDynamic) error {
	return unix.SchedGetaffinityDynamic(0, set)
}

// SetThreadAffinity restricts the calling thread to the CPUs of set.
func SetThreadAffinity(set unix.CPUSetDynamic) error {
	return unix.SchedSetaffinityDynamic(0, set)
}
