//go:build !linux

package tlsconn

// Elsewhere than Linux the pool's threads are left as they are.

type worker struct{}

type threadPlan struct{}

func newThreadPlan(PoolConfig) threadPlan { return threadPlan{} }

func (w *worker) enter(*threadPlan) {}

func (w *worker) leave() {}
