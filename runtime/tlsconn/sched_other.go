//go:build !linux

package tlsconn

// Elsewhere than Linux the pool's threads are left as they are.

type worker struct {
	notify bool // the session's Notify is due at release
}

type threadPlan struct{}

func newThreadPlan(PoolConfig) threadPlan { return threadPlan{} }

func (w *worker) enter(*threadPlan) {}

func (w *worker) leave() {}
