//go:build !linux

package tlsconn

// Elsewhere than Linux the pool's threads are left as they are.

type worker struct {
	notify bool // the session's Notify is due at release
}

type threadPlan struct{}

func newThreadPlan(PoolConfig) threadPlan { return threadPlan{} }

func (pl *threadPlan) effective() Sched { return SchedNormal }

// EffectiveSched returns the Sched that a pool configured with s uses in
// this process: elsewhere than Linux, SchedNormal (the threads are left as
// they are).
func EffectiveSched(Sched) (Sched, error) { return SchedNormal, nil }

func (w *worker) onOwnThread() bool { return false }

func (w *worker) enter(*threadPlan) {}

func (w *worker) leave() {}
