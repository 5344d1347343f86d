//go:build linux

package runtime

import (
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"time"
)

// The heap's free pages, returned after a storm of connections
// (docs/decisions/0076-heap-return-after-storms.md).
//
// A storm of new connections (a reconnection storm, the first clients of
// a fresh process, a hand-over) leaves the Go heap larger than what it
// then holds: a full TLS handshake leaves about 50 KB of garbage, a
// WebSocket upgrade its request's parse and its answer, and the
// collector lets the heap grow to twice what is live between cycles
// (GOGC=100). The pages it frees go back to the kernel only slowly (the
// Go runtime's background scavenger keeps about the heap's goal), so a
// server whose clients then sit idle holds about twice their live heap
// for good. So once a storm has settled, the process collects and gives
// the free pages back at once (debug.FreeOSMemory), on a goroutine of its
// own.
//
// A storm is told by its rate, not by silence, so that a server with
// steady churn still sees its storms end: the new connections of every
// runtime of the process that has the return on (Config.ReturnAfterStorm)
// are counted once a second (Stats.Accepts + Adopted + Dials, read from
// the loops' published Stats: nothing is added to a loop's path), and so
// are the bytes they received and sent (BytesIn + BytesOut); a storm has
// settled when at least ReturnAfterStorm connections came since the last
// return (the smallest ReturnAfterStorm of the runtimes) and each of the
// last returnCalm seconds counted at most a tenth of the busiest second's
// connections and at most a tenth of the busiest second's bytes since
// then. Steady churn (every second like the busiest) never counts as
// settled, and neither does a server that carries traffic after its
// storm (a benchmark that has opened its connections, a busy server after
// a reconnection storm): its traffic reuses the heap the storm grew, and
// a return in the middle of it would cost the loops for nothing (the
// heap grows back to its goal); its pages go back once its traffic falls
// to a tenth of its busiest. An uneven trickle of connections on a quiet
// server counts once it adds up to ReturnAfterStorm (at 1 a second, every
// 17 minutes). A return comes at most once every returnEvery, so a storm
// with a lull in it may return in the lull and leave the rest for the
// next storm. (The heap's free bytes cannot gate it: a storm's garbage is
// not free until a collection has swept it, which is the work in
// question.)
//
// It is one for the process, as FreeOSMemory's effect is: it runs while
// at least one runtime with the return on is open. It is not free for
// the loops: a forced collection stops every goroutine twice (short
// pauses: at most 0.5 ms measured), its marking takes a quarter of the
// Ps for one cycle (and assists from goroutines that allocate
// meanwhile), so its cost grows with the live heap, and the scavenge that
// follows runs on one P without preemption. With as many Ps as loops the
// return's goroutine runs on a loop's P, and that loop waits for it:
// measured with the whole server on one CPU, 54-61 ms for the 47-51 MB of
// 18,000 idle TLS connections (the loop's 1 ms pings up to 5.5-15.8 ms)
// and 5-130 ms for the gateway's 1 MB (docs/performance.md, "TLS, idle
// memory with the return"). It comes once per storm, on a server gone
// quiet; a server whose live heap is large against what its storms leave
// (a cache of many gigabytes) may want it off (a negative
// ReturnAfterStorm).

// DefaultReturnAfterStorm is Config.ReturnAfterStorm's default: the new
// connections a storm has at least before the heap's free pages are
// returned once it settles.
const DefaultReturnAfterStorm = 1000

const (
	// returnTick is how often the new connections are counted.
	returnTick = time.Second
	// returnCalm is how many calm ticks in a row settle a storm: one, so
	// that the pages go back within about two seconds of its end.
	returnCalm = 1
	// returnEvery is the shortest time between two returns.
	returnEvery = time.Minute
)

// settler decides when a storm of new connections has settled (the
// header above). Only the return's goroutine uses it.
type settler struct {
	min      uint64 // connections a storm has at least
	last     uint64 // connections at the last tick
	returned uint64 // connections at the last return
	peak     uint64 // the busiest tick's connections since the last return
	lastB    uint64 // bytes moved at the last tick
	peakB    uint64 // the busiest tick's bytes since the last return
	calm     int    // calm ticks in a row
	at       time.Time
}

// tick takes the connections counted so far, the bytes the loops have
// moved so far (received and sent) and the time, and reports whether to
// return the free pages now. A tick is calm when both its connections and
// its bytes are at most a tenth of the busiest tick's since the last
// return: a server that carries traffic after a storm (a benchmark that
// opened its connections, a busy server after a reconnection storm)
// reuses the heap it grew and is left alone until its traffic falls.
func (s *settler) tick(n, bytes uint64, now time.Time) bool {
	d, db := n-s.last, bytes-s.lastB
	s.last, s.lastB = n, bytes
	s.peak, s.peakB = max(s.peak, d), max(s.peakB, db)
	if d*10 > s.peak || db*10 > s.peakB {
		s.calm = 0 // still at more than a tenth of its peak
	} else {
		s.calm++
	}
	switch {
	case n-s.returned < s.min: // no storm since the last return
	case s.calm < returnCalm:
	case !s.at.IsZero() && now.Sub(s.at) < returnEvery:
	default:
		s.returned, s.peak, s.peakB, s.calm, s.at = n, 0, 0, 0, now
		return true
	}
	return false
}

// shedWait bounds how long a return waits for the loops to shed their
// spares: a loop busy past it is not waited for (its lists are trimmed by
// its own timer a second or two later).
const shedWait = 500 * time.Millisecond

// shed asks every loop of the open runtimes to give up what its free
// lists keep for the next burst (Loop.shedSpares, which runs what code on
// the loop registered with OnShedSpares too), and waits until they
// have, or shedWait has passed. The storm has settled, so the loops are
// calm: what the lists hold is the storm's, and the collection that
// follows frees it with the rest.
func (p *heapReturn) shed(stop chan struct{}) {
	p.mu.Lock()
	var loops []*Loop
	if p.stop == stop {
		for _, rt := range p.rts {
			loops = append(loops, rt.Loops()...)
		}
	}
	p.mu.Unlock()
	done := make(chan struct{}, len(loops))
	posted := 0
	for _, l := range loops {
		if l.Post(func() { l.shedSpares(); done <- struct{}{} }) == nil {
			posted++
		}
	}
	wait := time.NewTimer(shedWait)
	defer wait.Stop()
	for range posted {
		select {
		case <-done:
		case <-wait.C:
			return
		}
	}
}

// HeapReturnStats count the process's returns of the heap's free pages
// after storms of connections (Config.ReturnAfterStorm).
type HeapReturnStats struct {
	// Returns counts the returns: a forced collection and the return of
	// the heap's free pages (debug.FreeOSMemory), once a storm settled.
	Returns uint64
	// Bytes is what the returns gave back to the kernel, summed: what the
	// Go runtime's /memory/classes/heap/released:bytes grew by across each.
	Bytes uint64
	// Took is the time the returns took, summed (the collection and the
	// scavenge; the loops' share of it: decision 0076).
	Took time.Duration
}

// HeapReturns returns the process's returns after storms so far. It is
// safe for concurrent use. The returns are the process's, not one
// runtime's: debug.FreeOSMemory's effect is the process's.
func HeapReturns() HeapReturnStats {
	p := &procReturn
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// heapReturn is the process's return after storms: the runtimes that have
// it on, and the goroutine that counts their connections.
type heapReturn struct {
	mu       sync.Mutex
	rts      []*Runtime // the open runtimes with the return on, oldest first
	retired  uint64     // the new connections of those that closed
	retiredB uint64     // and the bytes they moved
	s        settler
	stats    HeapReturnStats
	// stop and done are the running goroutine's (nil: none runs).
	stop, done chan struct{}

	// ticks makes the goroutine's ticker and free returns the pages;
	// tests replace them (export_test.go). Nil: a time.Ticker of
	// returnTick, and debug.FreeOSMemory.
	ticks func() (<-chan time.Time, func())
	free  func()
	// stepped, when set (tests), runs after every step.
	stepped func()
}

// procReturn is the process's one return after storms. It is process-wide
// state on purpose: what it returns is the process's heap.
var procReturn heapReturn

// arrivals are the new connections the runtime's loops have counted, and
// the bytes they have received and sent.
func (rt *Runtime) arrivals() (conns, bytes uint64) {
	s := rt.Stats()
	return s.Accepts + s.Adopted + s.Dials, s.BytesIn + s.BytesOut
}

// add registers rt (with Config.ReturnAfterStorm on), and starts the
// goroutine if none runs.
func (p *heapReturn) add(rt *Runtime) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rts = append(p.rts, rt)
	if p.stop != nil {
		return
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	var c <-chan time.Time
	var stopTicks func()
	if p.ticks != nil {
		c, stopTicks = p.ticks()
	} else {
		t := time.NewTicker(returnTick)
		c, stopTicks = t.C, t.Stop
	}
	go p.run(c, stopTicks, p.stepped, p.stop, p.done)
}

// remove unregisters rt once its loops have stopped (its counts are
// final), and stops the goroutine, waiting for it, when rt was the last.
func (p *heapReturn) remove(rt *Runtime) {
	p.mu.Lock()
	i := slices.Index(p.rts, rt)
	if i < 0 {
		p.mu.Unlock()
		return
	}
	p.rts = slices.Delete(p.rts, i, i+1)
	n, b := rt.arrivals()
	p.retired += n
	p.retiredB += b
	var done chan struct{}
	if len(p.rts) == 0 {
		close(p.stop)
		done = p.done
		p.stop, p.done = nil, nil
	}
	p.mu.Unlock()
	if done != nil {
		<-done
	}
}

// run is the return's goroutine: a step at every tick of c, until stop.
func (p *heapReturn) run(c <-chan time.Time, stopTicks, stepped func(), stop, done chan struct{}) {
	defer close(done)
	defer stopTicks()
	for {
		select {
		case <-stop:
			return
		case now := <-c:
			p.step(now, stop)
			if stepped != nil {
				stepped()
			}
		}
	}
}

// step counts the new connections at now and returns the free pages if a
// storm has settled. stop is the goroutine's: a step of a goroutine that
// is being stopped does nothing.
func (p *heapReturn) step(now time.Time, stop chan struct{}) {
	p.mu.Lock()
	if p.stop != stop || len(p.rts) == 0 {
		p.mu.Unlock()
		return
	}
	n, bytes, lowest := p.retired, p.retiredB, p.rts[0].cfg.ReturnAfterStorm
	for _, rt := range p.rts {
		c, b := rt.arrivals()
		n, bytes = n+c, bytes+b
		lowest = min(lowest, rt.cfg.ReturnAfterStorm)
	}
	p.s.min = uint64(lowest)
	fire := p.s.tick(n, bytes, now)
	free := p.free
	p.mu.Unlock()
	if !fire {
		return
	}
	if free == nil {
		free = debug.FreeOSMemory
	}
	p.shed(stop)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(sample)
	before := sample[0].Value.Uint64()
	began := time.Now()
	free()
	took := time.Since(began)
	metrics.Read(sample)
	returned := uint64(max(int64(sample[0].Value.Uint64())-int64(before), 0))
	p.mu.Lock()
	p.stats.Returns++
	p.stats.Bytes += returned
	p.stats.Took += took
	if len(p.rts) == 0 || p.stop != stop {
		p.mu.Unlock()
		return // the last runtime closed meanwhile: nobody's logger to use
	}
	log := p.rts[0].cfg.Logger
	p.mu.Unlock()
	log.Info("percore: a storm of connections settled; the heap's free pages returned to the kernel",
		slog.Uint64("connections", n), slog.Uint64("returned_bytes", returned), slog.Duration("took", took.Round(time.Microsecond)))
}
