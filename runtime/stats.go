//go:build linux

package runtime

//go:generate go run github.com/percore/percore/internal/gen/stats -target runtime

import (
	"sync/atomic"
	"time"

	"github.com/percore/percore/internal/seqlock"
)

// Stats, its index constants (sAccepts, ...), its merge (Stats.Add) and
// loadStats are generated into stats_gen.go from the one definition of the
// counters, internal/gen/stats/table.go; so are their metrics (package
// runtime/metrics). The loop counts in l.cnt[sName] and publishes here.

// published is a loop's snapshot, written by the loop once per turn and
// read by Stats from any goroutine under a sequence lock, so that a
// snapshot never mixes two turns. hooks are the OnPublish functions.
type published struct {
	seq   seqlock.Seq
	vals  [numStats]atomic.Uint64
	last  [numStats]uint64 // what vals holds, for the loop alone
	hooks []func()
}

// publish fills in the gauges and publishes the counters, after the
// OnPublish functions have published theirs.
func (l *Loop) publish() {
	for _, f := range l.pub.hooks {
		f()
	}
	c := &l.cnt
	c[sOpen] = uint64(l.open)
	c[sPaused] = uint64(l.paused)
	c[sSyscalls] = l.d.syscalls()
	c[sWaits] = l.d.waits()
	c[sPooledBytes] = uint64(l.bufs.pooledBytes)
	c[sMappedBytes] = uint64(l.bufs.mappedBytes)
	if l.now.Sub(l.lagWindow) >= signalWindow {
		c[sLagP50] = uint64(l.lag.Quantile(0.5))
		c[sLagP99] = uint64(l.lag.Quantile(0.99))
		c[sLagMax] = uint64(l.lag.Max())
		c[sPostedBatchMax] = uint64(l.postedBatch)
		l.lag.Reset()
		l.postedBatch = 0
		l.lagWindow = l.now
	}
	p := &l.pub
	p.seq.Publish(p.vals[:], p.last[:], c[:]) // a busy turn changes a handful
}

// signalWindow is how often the loop publishes its lag percentiles.
const signalWindow = time.Second

// Stats returns the loop's counters as of its last turn. It is safe for
// concurrent use.
func (l *Loop) Stats() Stats {
	var v [numStats]uint64
	l.pub.seq.Read(l.pub.vals[:], v[:])
	s := Stats{Loops: 1}
	loadStats(&v, &s)
	s.PostRejects = l.postRejects.Load()
	s.GoRejects = l.goRejects.Load()
	s.GoDropped = l.goDropped.Load()
	s.GoRunning = uint64(max(l.goRunning.Load(), 0))
	return s
}

// OnPublish registers f to run on the loop's thread each time the loop
// publishes its Stats: at the end of every turn (after the turn's
// callbacks, before it waits in the kernel, so between callbacks) and once
// more after it stops. Per-loop state with counters of its own publishes
// them from f, so that other goroutines read them as of the same moments
// without asking the loop (a connection pool's Local does). It must be
// called on the loop's thread; f must not block.
func (l *Loop) OnPublish(f func()) { l.pub.hooks = append(l.pub.hooks, f) }
