//go:build linux

package tlsconn

import (
	goruntime "runtime"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/internal/sys"
)

// worker is a pool goroutine's hold on its thread while a handshake
// computes (Sched): enter after the CPU place is taken, leave before it
// is given back. Only its own goroutine uses it.
type worker struct {
	notify bool // the session's Notify is due at release
	locked bool // LockOSThread is in force
	set    bool // the policy was changed: saved puts it back
	masked bool // the affinity was changed: mask puts it back
	stuck  bool // putting the thread back failed: it stays this goroutine's until it exits
	saved  unix.SchedAttr
	mask   unix.CPUSetDynamic
}

// restoreSched puts a thread's scheduling back: sys.SetThreadSched, a
// variable so that a test can make it fail as an unprivileged process's
// would (export_test.go).
var restoreSched = sys.SetThreadSched

// threadPlan is what a pool does to a computing handshake's thread.
type threadPlan struct {
	sched Sched              // SchedIdle, SchedNice or SchedNormal: the one in effect (EffectiveSched)
	cpus  unix.CPUSetDynamic // nil: the thread's CPUs stay as they are
}

func newThreadPlan(cfg PoolConfig) threadPlan {
	s, _ := EffectiveSched(cfg.Sched) // SchedNormal where a lowered thread cannot be put back
	pl := threadPlan{sched: s}
	if len(cfg.CPUs) > 0 {
		pl.cpus = unix.NewCPUSet(max(1024, slices.Max(cfg.CPUs)+1))
		for _, c := range cfg.CPUs {
			if c >= 0 {
				pl.cpus.Set(c)
			}
		}
	}
	return pl
}

// effective returns the Sched in effect (PoolStats.Sched).
func (pl *threadPlan) effective() Sched { return pl.sched }

// active reports whether the plan changes anything.
func (pl *threadPlan) active() bool { return pl.sched != SchedNormal || pl.cpus != nil }

// enter locks the goroutine to its thread and applies the plan. What the
// kernel refuses is left as it is: the handshake computes either way.
func (w *worker) enter(pl *threadPlan) {
	if w.stuck || !pl.active() {
		return // a stuck thread keeps the plan it has
	}
	goruntime.LockOSThread()
	w.locked = true
	if pl.sched != SchedNormal {
		if a, err := sys.ThreadSched(); err == nil {
			if sys.SetThreadSched(lowered(a, pl.sched)) == nil {
				w.saved, w.set = a, true
			}
		}
	}
	if pl.cpus != nil {
		if w.mask == nil {
			w.mask = unix.NewCPUSet(len(pl.cpus) * 64)
		}
		if sys.ThreadAffinity(w.mask) == nil && sys.SetThreadAffinity(pl.cpus) == nil {
			w.masked = true
		}
	}
}

// leave puts the thread back as enter found it and unlocks it. A thread
// the kernel does not let back (an unprivileged process may not leave
// SCHED_IDLE or lower its nice value again, unless RLIMIT_NICE allows it)
// stays locked to this goroutine, so that no other goroutine of the
// process runs on it, and ends with it (a goroutine that exits locked
// takes its thread with it).
func (w *worker) leave() {
	if !w.locked || w.stuck {
		return
	}
	ok := true
	if w.set {
		ok = restoreSched(w.saved) == nil
		w.set = false
	}
	if w.masked {
		ok = sys.SetThreadAffinity(w.mask) == nil && ok
		w.masked = false
	}
	if !ok {
		w.stuck = true
		return
	}
	w.locked = false
	goruntime.UnlockOSThread()
}

// onOwnThread reports whether the goroutine runs on a thread of its own
// that the kernel did not let back (stuck): what it calls runs there.
func (w *worker) onOwnThread() bool { return w.stuck }
