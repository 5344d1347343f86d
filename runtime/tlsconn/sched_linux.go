//go:build linux

package tlsconn

import (
	goruntime "runtime"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/internal/sys"
)

// worker is a pool goroutine's hold on its thread (Sched): lower locks
// the goroutine to its thread for the rest of its life and applies the
// plan once; the thread is never put back, so it is never handed back to
// the Go scheduler lowered: a goroutine that returns locked takes its
// thread with it (docs/decisions/0081-handshake-threads-lowered-for-life.md).
// Only its own goroutine uses it.
type worker struct {
	notify bool // the session's Notify is due at release
	locked bool // LockOSThread is in force, for the goroutine's life
}

// restoreSched puts a thread's scheduling back: sys.SetThreadSched, a
// variable so that a test can make it fail as an unprivileged process's
// would (the probe, sched_probe_linux.go).
var restoreSched = sys.SetThreadSched

// threadPlan is what a pool does to its workers' threads.
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

// lower locks the goroutine to its thread for good and applies the plan,
// once, at the worker's start: a thread woken for a handshake is lowered
// already, so it never keeps the CPU it was woken on at normal priority.
// What the kernel refuses is left as it is: the handshakes compute either
// way.
func (w *worker) lower(pl *threadPlan) {
	if !pl.active() {
		return
	}
	goruntime.LockOSThread()
	w.locked = true
	if pl.sched != SchedNormal {
		if a, err := sys.ThreadSched(); err == nil {
			_ = sys.SetThreadSched(lowered(a, pl.sched))
		}
	}
	if pl.cpus != nil {
		_ = sys.SetThreadAffinity(pl.cpus)
	}
}

// onOwnThread reports whether the goroutine runs on a thread of its own
// (locked, lowered): what it calls runs there.
func (w *worker) onOwnThread() bool { return w.locked }
