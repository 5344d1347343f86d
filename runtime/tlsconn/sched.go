package tlsconn

// Sched is how the kernel schedules a handshake's thread while it computes
// (PoolConfig.Sched): the pool's goroutine locks itself to its thread for
// each stretch of crypto/tls work (between two waits for the peer), gives
// the thread this policy and PoolConfig.CPUs, and puts both back before it
// unlocks. A loop's thread, woken by the kernel, then preempts a computing
// handshake on a CPU they share at once, rather than waiting out its slice
// (docs/decisions/0064-tls-storm-scheduling.md).
//
// A lowered thread gets what the CPU's other threads leave: where the
// loops (or any other goroutines of normal priority) keep every CPU busy,
// handshakes slow down to that share, so that new connections wait (up
// to the pool's Timeout) while established ones are served.
type Sched uint8

const (
	// SchedDefault is the zero value: SchedNice.
	SchedDefault Sched = iota
	// SchedIdle is the SCHED_IDLE policy: a waking thread of a normal
	// policy preempts it at once, and it gets a weight of 3 against a
	// nice-0 thread's 1024 (0.3% of a CPU that one keeps busy).
	SchedIdle
	// SchedNice is the normal policy at nice 19: a weight of 15 against
	// a nice-0 thread's 1024 (1.4% of a CPU that one keeps busy).
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
