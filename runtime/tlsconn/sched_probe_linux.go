//go:build linux

package tlsconn

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/internal/sys"
)

// Whether this process can put a lowered thread back. An unprivileged
// process (no CAP_SYS_NICE) may lower its threads' priority but raise it
// again only as far as RLIMIT_NICE allows (a nice value down to 20 minus
// the limit, which is 0 by default: nowhere), and leaves SCHED_IDLE under
// the same rule. A pool that lowered its threads there would have every
// one stuck after its first stretch of work (worker.leave), each running
// its handshakes at nice 19 until its goroutine exits and takes the
// thread with it. So the first pool of the process that would lower its
// threads probes it once, on a thread of its own, and falls back to
// SchedNormal (the CPUs still apply) where the kernel does not let the
// thread back.

// schedProbe is one lowering's probe result, conclusive once done.
type schedProbe struct {
	mu   sync.Mutex
	done bool
	err  error // nil: restorable
}

// schedProbes are the process's results, by Sched (SchedIdle, SchedNice).
var schedProbes [SchedNormal]schedProbe

// EffectiveSched returns the Sched that a pool configured with s uses in
// this process: s (SchedDefault read as SchedNice), or SchedNormal when the
// process cannot put a thread it lowered so back, with the reason. The
// first call for a lowering probes it, once per process: a thread locked
// to a goroutine of its own is lowered and put back, and a thread the
// kernel does not let back is never unlocked (Go ends it with its
// goroutine). NewPool calls it; a caller that wants the probe done before
// a loop's first handshake, or to log the fallback, calls it first. It is
// safe for concurrent use.
func EffectiveSched(s Sched) (Sched, error) {
	if s == SchedDefault {
		s = SchedNice
	}
	if s != SchedIdle && s != SchedNice {
		return s, nil
	}
	p := &schedProbes[s]
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.done {
		var conclusive bool
		conclusive, p.err = probeRestore(s)
		p.done = conclusive
		if !conclusive {
			return SchedNormal, p.err // asked again next time
		}
	}
	if p.err != nil {
		return SchedNormal, p.err
	}
	return s, nil
}

// lowered returns a's attributes with s's lowering: the policy (SCHED_IDLE)
// or the nice value (19), reset in a child the thread forks.
func lowered(a unix.SchedAttr, s Sched) unix.SchedAttr {
	low := a
	low.Flags = unix.SCHED_FLAG_RESET_ON_FORK
	if s == SchedIdle {
		low.Policy = unix.SCHED_IDLE
	} else {
		low.Policy, low.Nice = unix.SCHED_NORMAL, 19
	}
	return low
}

// probeRestore lowers a thread of its own as s does and puts it back (with
// restoreSched, as a worker does), and reports whether the answer is one
// to keep (the kernel's refusal, or success), and the error if either
// failed. The thread is the probe's goroutine's, locked: one that could
// not be put back is never unlocked, so Go ends it as the goroutine
// returns and no other goroutine runs on it.
func probeRestore(s Sched) (conclusive bool, err error) {
	type result struct {
		err        error
		conclusive bool
	}
	res := make(chan result, 1)
	go func() {
		goruntime.LockOSThread()
		a, err := sys.ThreadSched()
		if err != nil {
			goruntime.UnlockOSThread()
			res <- result{fmt.Errorf("tlsconn: read a thread's scheduling: %w", err), refused(err)}
			return
		}
		if err := sys.SetThreadSched(lowered(a, s)); err != nil {
			goruntime.UnlockOSThread()
			res <- result{fmt.Errorf("tlsconn: lower a thread to %s: %w", s, err), refused(err)}
			return
		}
		if err := restoreSched(a); err != nil {
			// Locked: Go ends the lowered thread with this goroutine.
			res <- result{fmt.Errorf("tlsconn: put a thread lowered to %s back (CAP_SYS_NICE, or RLIMIT_NICE of %d): %w", s, 20-a.Nice, err), refused(err)}
			return
		}
		goruntime.UnlockOSThread()
		res <- result{nil, true}
	}()
	r := <-res
	return r.conclusive, r.err
}

// refused reports whether err is the kernel saying no for good, rather
// than a transient failure worth asking again.
func refused(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) ||
		errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS)
}
