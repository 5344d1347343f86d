//go:build linux

package main

import (
	"time"

	percore "github.com/percore/percore/runtime"
)

// The open loop (-rate N): requests fall due on a fixed schedule, N per
// second over all connections, whatever the server does, and each
// request's latency runs from the time it fell due, not from the time it
// was sent. A stalled server then shows in the latency of every request
// that fell due during the stall, also those the client could not send
// yet: the correction for coordinated omission that wrk2 and HdrHistogram
// describe. A closed-loop client, which sends only when a reply came back,
// records just the few requests that were in flight.
//
// The schedule: request k (from 0) of connection id (0..conns-1) falls due
// at start + (k*conns + id)/rate seconds, so that each connection has a
// request due every conns/rate seconds and, over all connections, one
// falls due every 1/rate seconds, evenly spread. A connection sends a
// request as soon as it has fallen due, unless MaxInFlight of its requests
// are already unanswered or it is (re)connecting; then the request waits,
// and its latency includes the wait, as it would for a user.
//
// A pacer per loop (or goroutine) releases its connections' requests as
// they fall due. The time from a request's due time to its release is the
// send lag: the generator's own lateness. A lag above the slack (-late,
// 1 ms by default) is a late send: the generator fell behind its schedule,
// so the latencies it measured include its own delay, and a run with more
// late sends than -max-late allows is invalid (exit status 1).

// schedule is the open-loop schedule of one run.
type schedule struct {
	start time.Time
	conns float64
	rate  float64
}

func newSchedule(wl Workload, start time.Time) schedule {
	return schedule{start: start, conns: float64(wl.Conns), rate: wl.Rate}
}

// due returns when request k of connection id falls due.
func (s schedule) due(id int, k uint64) time.Time {
	return s.start.Add(time.Duration((float64(k)*s.conns + float64(id)) * 1e9 / s.rate))
}

// releaser is a connection in open loop: release tells it that its next
// request has fallen due.
type releaser interface{ release() }

// maxRelease bounds the requests one pacer run releases, so that a
// generator far behind its schedule still serves its replies between
// bursts; the pacer's next run is then due at once.
const maxRelease = 4096

// pacer releases the requests of a set of connections, in the order of
// their due times. Only its owner (a loop's thread, a goroutine) may use it.
type pacer struct {
	s     schedule
	ids   []int      // the connections' ids, ascending: the order of one round
	conns []releaser // conns[i] is connection ids[i]
	w     *Worker
	round uint64 // the round of the next release: request number round of each connection
	i     int    // the next release is conns[i]'s
}

// add adds connection id, which must be above every id added before.
func (p *pacer) add(id int, c releaser) {
	p.ids = append(p.ids, id)
	p.conns = append(p.conns, c)
}

// next returns when the next request falls due.
func (p *pacer) next() time.Time { return p.s.due(p.ids[p.i], p.round) }

// dueBy reports whether a request has fallen due at or before t.
func (p *pacer) dueBy(t time.Time) bool { return len(p.ids) > 0 && !p.next().After(t) }

// run releases every request due at or before now (up to maxRelease of
// them), counting each one's send lag, and returns when the next falls due.
func (p *pacer) run(now time.Time) time.Time {
	if len(p.ids) == 0 {
		return now.Add(time.Hour)
	}
	for range maxRelease {
		due := p.next()
		if due.After(now) {
			return due
		}
		p.w.Paced(now.Sub(due))
		p.conns[p.i].release()
		if p.i++; p.i == len(p.ids) {
			p.i = 0
			p.round++
		}
	}
	return now
}

// backlog is the open-loop state of one connection: how many of its
// requests have fallen due and how many it has sent.
type backlog struct {
	id        int
	due, sent uint64
}

// waiting returns how many requests have fallen due but are not sent.
func (b *backlog) waiting() int { return int(b.due - b.sent) }

// take returns the due time of the next request to send and counts it as
// sent.
func (b *backlog) take(s schedule) time.Time {
	t := s.due(b.id, b.sent)
	b.sent++
	return t
}

// loopPacer runs a pacer on a percore loop: a timer set for the next due
// time, and a poke from the reply handlers (a loop that is busy with
// replies then releases requests without waiting for its timer, which on
// the epoll backend has a resolution of a millisecond). A nil loopPacer
// (closed loop) does nothing.
type loopPacer struct {
	loop    *percore.Loop
	p       pacer
	quantum time.Duration // the timer fires at most this often
	spin    time.Duration // poll, not sleep, while the next request falls due within this (0: never)
	timer   *percore.Timer
	// Polling's accounting: the time of the last tick, whether it left
	// the timer at zero (the loop polls), and whether a reply or a
	// release came since; a polled interval with neither is idle.
	lastTick time.Time
	polling  bool
	active   bool
}

// newLoopPacer returns the pacer of a loop's connections in open loop (nil
// in closed loop); its connections are added with p.add.
func newLoopPacer(l *percore.Loop, s schedule, w *Worker, wl Workload) *loopPacer {
	if !wl.open() {
		return nil
	}
	return &loopPacer{loop: l, p: pacer{s: s, w: w}, quantum: wl.Quantum, spin: wl.Spin}
}

func (lp *loopPacer) start() {
	if lp == nil {
		return
	}
	lp.timer = lp.loop.AfterFunc(time.Until(lp.p.next()), lp.tick)
}

// tick runs the pacer and sets the timer for the next due time, but no
// sooner than a quantum after this run: a loop then wakes for its timer at
// most once a quantum and sends what fell due meanwhile in one batch,
// instead of entering the kernel once per request (which at 200,000
// requests/s costs the generator a whole CPU). A request may so go out up
// to a quantum after it fell due, and its latency, counted from the due
// time, includes that; the send lag shows it.
//
// With -spin, a tick that finds the next request due within the spin
// window sets the timer to zero instead: the loop then enters the kernel
// without sleeping, turn after turn, and handles each reply and releases
// each request without a wake-up (a sleeping loop's wake-up costs this
// generator about as much CPU as a request, and a few microseconds of
// latency). The intervals between polling ticks in which nothing arrived
// and nothing was released are counted as idle (Worker.SpinIdle), so that
// the generator's work stays apart from its polling; an interval above
// gapLimit is a gap, time the loop did not get to poll (Worker.PollGap).
func (lp *loopPacer) tick() {
	now := time.Now()
	if lp.polling {
		lp.p.w.PollGap(now.Sub(lp.lastTick))
		if !lp.active {
			lp.p.w.SpinIdle(now.Sub(lp.lastTick))
		}
	}
	lp.active = lp.p.dueBy(now)
	next := lp.p.run(now)
	d := max(next.Sub(now), lp.quantum)
	lp.polling = next.Sub(now) <= lp.spin
	if lp.polling {
		d = 0
	}
	lp.lastTick = now
	lp.timer.Reset(d)
}

// poke releases what has fallen due since the last run; the timer stays
// set (when it fires early it finds nothing due and is set again). The
// reply handlers poke once per reply, so it reads the clock only when a
// request was due by the turn's clock (Loop.Now, read as the kernel
// returned): most pokes then cost no clock read, and each release's send
// lag is still taken from a fresh one. A request that falls due during the
// turn goes out in the next turn or at the timer, its lag counted then.
func (lp *loopPacer) poke() {
	lp.active = true
	lp.p.poke(lp.loop.Now(), time.Now)
}

// poke is loopPacer.poke with the turn's clock and the clock to read given:
// it runs the pacer at clock() if a request was due by turn, and reads no
// clock otherwise.
func (p *pacer) poke(turn time.Time, clock func() time.Time) {
	if p.dueBy(turn) {
		p.run(clock())
	}
}

func (lp *loopPacer) stop() {
	if lp != nil && lp.timer != nil {
		lp.timer.Stop()
	}
}
