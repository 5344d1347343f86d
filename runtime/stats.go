package runtime

import "sync/atomic"

// Stats are a loop's counters, or their sum over a runtime. The loop counts
// in plain fields and publishes them once per turn; reading them is safe
// from any goroutine.
type Stats struct {
	// Loops is the number of loops summed (1 for one loop).
	Loops int
	// Accepts and Dials count connections opened each way; Closes counts
	// connections closed; Open is how many are open now.
	Accepts, Dials, Closes, Open uint64
	// AcceptErrors counts accepts that failed for lack of resources
	// (EMFILE, ENFILE, ENOBUFS, ENOMEM) and were retried after a back-off.
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
	return s
}

// counters are the loop's own plain counters.
type counters struct {
	accepts, dials, closes, acceptErrors uint64
	bytesIn, bytesOut                    uint64
	turns, completions                   uint64
	posted, timers                       uint64
}

// publishedStats are the counters as other goroutines read them. Only the
// loop writes them.
type publishedStats struct {
	accepts, dials, closes, open, acceptErrors atomic.Uint64
	bytesIn, bytesOut                          atomic.Uint64
	turns, completions, enters                 atomic.Uint64
	posted, timers                             atomic.Uint64
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
}

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
	}
}
