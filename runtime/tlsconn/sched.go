package tlsconn

// Sched is how the kernel schedules a handshake's thread while it computes
// (PoolConfig.Sched): the pool's goroutine locks itself to its thread for
// each stretch of crypto/tls work (between two waits for the peer), gives
// the thread this policy and PoolConfig.CPUs, and puts both back before it
// unlocks. A loop's thread, woken by the kernel, then preempts a computing
// handshake on a CPU they share at once, rather than waiting out its slice
// (docs/decisions/0064-tls-storm-scheduling.md).
type Sched uint8

const (
	// SchedDefault is the zero value: SchedIdle.
	SchedDefault Sched = iota
	// SchedIdle is the SCHED_IDLE policy: the thread runs only when
	// nothing of a normal policy is runnable on its CPU, and a waking
	// normal thread preempts it at once.
	SchedIdle
	// SchedNice is the normal policy at nice 19: about 1.5% of a CPU
	// against a nice-0 thread that wants it all.
	SchedNice
	// SchedNormal leaves the thread as it is (and PoolConfig.CPUs alone
	// decides whether it is locked).
	SchedNormal
)

func (s Sched) String() string {
	switch s {
	case SchedDefault:
		return "default"
	case SchedIdle:
		return "idle"
	case SchedNice:
		return "nice"
	case SchedNormal:
		return "normal"
	}
	return "Sched(?)"
}
