package runtime

import (
	"sync/atomic"
	"time"
)

// Stats are a loop's counters, or their sum over a runtime. The loop counts
// in plain fields and publishes them once per turn; reading them is safe
// from any goroutine.
type Stats struct {
	// Loops is the number of loops summed (1 for one loop).
	Loops int
	// Accepts and Dials count connections opened each way; Closes counts
	// those closed (a dial that fails is in neither); Open is how many are
	// open now, dials in progress included.
	Accepts, Dials, Closes, Open uint64
	// AcceptErrors counts accepts that failed and were retried after a
	// back-off: for lack of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM)
	// while a connection was waiting, or with any other error that is not
	// one connection's own. A loop at its descriptor limit with nobody
	// waiting counts nothing.
	AcceptErrors uint64
	// BytesIn and BytesOut count payload bytes received and sent.
	BytesIn, BytesOut uint64
	// Turns counts loop iterations; Completions counts kernel events
	// handled (io_uring completions, epoll events).
	Turns, Completions uint64
	// Enters counts system calls the loop made (io_uring_enter on the
	// io_uring backend; epoll_wait, read, write, accept... on epoll).
	Enters uint64
	// Posted and Timers count functions run from Post and timers.
	Posted, Timers uint64

	// Limits, each counted when it fires: accepting paused at MaxConns;
	// connections closed for idling, for their lifetime, as slow
	// consumers; reads paused for backpressure; receives deferred to a
	// later turn by the turn budget; handler panics recovered.
	CapPauses, IdleTimeouts, LifetimeCloses, SlowConsumers uint64
	Pauses, Deferrals, Panics                              uint64
	// WriteTimeouts counts connections closed because their queued bytes
	// made no progress for WriteTimeout; LingerTimeouts, closing
	// connections aborted after Linger.
	WriteTimeouts, LingerTimeouts uint64
	// Paused is how many connections are paused for backpressure now.
	Paused uint64
	// PostRejects counts Posts refused at MaxPosted; GoRejects, Go calls
	// refused at MaxGo; GoDropped, continuations of Go that could not run
	// because the loop had stopped; GoRunning is how many Go goroutines
	// run now.
	PostRejects, GoRejects, GoDropped, GoRunning uint64
	// PooledBytes is the size of the outbound buffers kept for reuse now;
	// MappedBytes, of the outbound buffers held as anonymous mappings now
	// (buffers of 16 KiB and more, in use or pooled). Both return towards
	// zero within seconds of a burst.
	PooledBytes, MappedBytes uint64
	// CQOverflows counts loop turns that found the io_uring completion
	// queue overflowed (nothing is lost: the kernel keeps the completions
	// and the next enter delivers them); a steady count says RingEntries
	// is too small for the load.
	CQOverflows uint64

	// Early-warning signals over the last window of about a second (the
	// maxima when summed over loops): the loop's lag, from the kernel
	// returning a batch of events to the last of them handled (p50, p99,
	// max), and the largest batch of posted functions drained at once.
	// Completions per turn is Completions/Turns.
	LagP50, LagP99, LagMax time.Duration
	PostedBatchMax         uint64
}

// Add returns the sum of s and o.
func (s Stats) Add(o Stats) Stats {
	s.Loops += o.Loops
	s.Accepts += o.Accepts
	s.Dials += o.Dials
	s.Closes += o.Closes
	s.Open += o.Open
	s.AcceptErrors += o.AcceptErrors
	s.BytesIn += o.BytesIn
	s.BytesOut += o.BytesOut
	s.Turns += o.Turns
	s.Completions += o.Completions
	s.Enters += o.Enters
	s.Posted += o.Posted
	s.Timers += o.Timers
	s.CapPauses += o.CapPauses
	s.IdleTimeouts += o.IdleTimeouts
	s.LifetimeCloses += o.LifetimeCloses
	s.SlowConsumers += o.SlowConsumers
	s.Pauses += o.Pauses
	s.Deferrals += o.Deferrals
	s.Panics += o.Panics
	s.WriteTimeouts += o.WriteTimeouts
	s.PostRejects += o.PostRejects
	s.GoRejects += o.GoRejects
	s.GoDropped += o.GoDropped
	s.GoRunning += o.GoRunning
	s.PooledBytes += o.PooledBytes
	s.MappedBytes += o.MappedBytes
	s.LingerTimeouts += o.LingerTimeouts
	s.Paused += o.Paused
	s.CQOverflows += o.CQOverflows
	s.LagP50 = max(s.LagP50, o.LagP50)
	s.LagP99 = max(s.LagP99, o.LagP99)
	s.LagMax = max(s.LagMax, o.LagMax)
	s.PostedBatchMax = max(s.PostedBatchMax, o.PostedBatchMax)
	return s
}

// counters are the loop's own plain counters.
type counters struct {
	accepts, dials, closes, acceptErrors uint64
	bytesIn, bytesOut                    uint64
	turns, completions                   uint64
	posted, timers                       uint64
	capPauses, idleTimeouts              uint64
	lifetimeCloses, slowConsumers        uint64
	pauses, deferrals, panics            uint64
	writeTimeouts, lingerTimeouts        uint64
	cqOverflows                          uint64
}

// publishedStats are the counters as other goroutines read them. Only the
// loop writes them.
type publishedStats struct {
	accepts, dials, closes, open, acceptErrors atomic.Uint64
	bytesIn, bytesOut                          atomic.Uint64
	turns, completions, enters                 atomic.Uint64
	posted, timers                             atomic.Uint64
	capPauses, idleTimeouts                    atomic.Uint64
	lifetimeCloses, slowConsumers              atomic.Uint64
	pauses, deferrals, panics, paused          atomic.Uint64
	writeTimeouts, lingerTimeouts              atomic.Uint64
	pooledBytes, mappedBytes                   atomic.Uint64
	cqOverflows                                atomic.Uint64
	lagP50, lagP99, lagMax, postedBatch        atomic.Int64
}

func (l *Loop) publish() {
	p, c := &l.pub, &l.cnt
	p.accepts.Store(c.accepts)
	p.dials.Store(c.dials)
	p.closes.Store(c.closes)
	p.open.Store(uint64(l.open))
	p.acceptErrors.Store(c.acceptErrors)
	p.bytesIn.Store(c.bytesIn)
	p.bytesOut.Store(c.bytesOut)
	p.turns.Store(c.turns)
	p.completions.Store(c.completions)
	p.enters.Store(l.d.enters())
	p.posted.Store(c.posted)
	p.timers.Store(c.timers)
	p.capPauses.Store(c.capPauses)
	p.idleTimeouts.Store(c.idleTimeouts)
	p.lifetimeCloses.Store(c.lifetimeCloses)
	p.slowConsumers.Store(c.slowConsumers)
	p.pauses.Store(c.pauses)
	p.deferrals.Store(c.deferrals)
	p.panics.Store(c.panics)
	p.writeTimeouts.Store(c.writeTimeouts)
	p.lingerTimeouts.Store(c.lingerTimeouts)
	p.pooledBytes.Store(uint64(l.bufs.pooledBytes))
	p.mappedBytes.Store(uint64(l.bufs.mappedBytes))
	p.paused.Store(uint64(l.paused))
	p.cqOverflows.Store(c.cqOverflows)
	if l.now.Sub(l.lagWindow) >= signalWindow {
		p.lagP50.Store(l.lag.Quantile(0.5))
		p.lagP99.Store(l.lag.Quantile(0.99))
		p.lagMax.Store(l.lag.Max())
		p.postedBatch.Store(int64(l.postedBatch))
		l.lag.Reset()
		l.postedBatch = 0
		l.lagWindow = l.now
	}
}

// signalWindow is how often the loop publishes its lag percentiles.
const signalWindow = time.Second

// Stats returns the loop's counters as of its last turn. It is safe for
// concurrent use.
func (l *Loop) Stats() Stats {
	p := &l.pub
	return Stats{
		Loops:        1,
		Accepts:      p.accepts.Load(),
		Dials:        p.dials.Load(),
		Closes:       p.closes.Load(),
		Open:         p.open.Load(),
		AcceptErrors: p.acceptErrors.Load(),
		BytesIn:      p.bytesIn.Load(),
		BytesOut:     p.bytesOut.Load(),
		Turns:        p.turns.Load(),
		Completions:  p.completions.Load(),
		Enters:       p.enters.Load(),
		Posted:       p.posted.Load(),
		Timers:       p.timers.Load(),

		CapPauses:      p.capPauses.Load(),
		IdleTimeouts:   p.idleTimeouts.Load(),
		LifetimeCloses: p.lifetimeCloses.Load(),
		SlowConsumers:  p.slowConsumers.Load(),
		Pauses:         p.pauses.Load(),
		Deferrals:      p.deferrals.Load(),
		Panics:         p.panics.Load(),
		WriteTimeouts:  p.writeTimeouts.Load(),
		LingerTimeouts: p.lingerTimeouts.Load(),
		PostRejects:    l.postRejects.Load(),
		PooledBytes:    p.pooledBytes.Load(),
		MappedBytes:    p.mappedBytes.Load(),
		GoRejects:      l.goRejects.Load(),
		GoDropped:      l.goDropped.Load(),
		GoRunning:      uint64(max(l.goRunning.Load(), 0)),
		Paused:         p.paused.Load(),
		CQOverflows:    p.cqOverflows.Load(),
		LagP50:         time.Duration(p.lagP50.Load()),
		LagP99:         time.Duration(p.lagP99.Load()),
		LagMax:         time.Duration(p.lagMax.Load()),
		PostedBatchMax: uint64(p.postedBatch.Load()),
	}
}
