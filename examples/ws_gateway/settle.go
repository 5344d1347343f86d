//go:build linux

package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// A storm of upgrades (a reconnection storm, or the first clients of a
// fresh process) leaves the Go heap larger than what it then holds: every
// upgrade makes garbage (the request's parse, the handshake's answer), the
// collector lets the heap grow to twice what is live between cycles, and
// the pages it frees go back to the kernel only slowly (the runtime's
// background scavenger). A gateway whose clients then sit idle would hold
// that memory for minutes. So once a storm has settled, the gateway
// collects and gives the free pages back at once (debug.FreeOSMemory).
//
// A storm is told by its rate, not by silence, so that a gateway with
// steady churn still sees its storms end: the upgrades of each second are
// counted, a storm has settled when at least -return-after upgrades came
// since the last return and each of the last settleCalm seconds counted
// at most a tenth of the busiest second's since then. Steady churn (every
// second like the busiest) never counts as settled; an uneven trickle
// counts once it adds up to -return-after upgrades (at 1 a second, every
// 17 minutes: one collection, cheap at that interval). A
// return comes at most once every returnEvery, so a storm with a lull in
// it may return in the lull and leave the rest for the next storm. (The heap's free bytes cannot gate it: a storm's garbage is
// not free until a collection has swept it, which is the work in question.)
//
// It runs on a goroutine of its own, but it is not free for the loops: a
// forced collection stops every goroutine twice (short pauses), its
// marking takes a quarter of the Ps for one cycle, and the scavenge that
// follows runs on a P without preemption; on a gateway with one P per
// loop one loop waits for it. Once per storm that is cheap next to the
// storm itself. -return-after 0 turns it off. Decision 0072 and
// docs/performance.md "WebSocket gateway, floors, part 3" have what it
// saves.

const (
	// settleTick is how often the upgrades are counted.
	settleTick = time.Second
	// settleCalm is how many calm ticks in a row settle a storm: one, so
	// that the pages go back within about two seconds of its end.
	settleCalm = 1
	// returnEvery is the shortest time between two returns.
	returnEvery = time.Minute
)

// settler decides when a storm of upgrades has settled (settle.go's
// header). Only returnAfterStorms's goroutine uses it.
type settler struct {
	min      uint64 // upgrades a storm has at least
	last     uint64 // upgrades at the last tick
	returned uint64 // upgrades at the last return
	peak     uint64 // the busiest tick's upgrades since the last return
	calm     int    // calm ticks in a row
	at       time.Time
}

// tick takes the upgrades counted so far and the time, and reports whether
// to return the free pages now.
func (s *settler) tick(n uint64, now time.Time) bool {
	d := n - s.last
	s.last = n
	s.peak = max(s.peak, d)
	if d*10 > s.peak {
		s.calm = 0 // still at more than a tenth of its peak
	} else {
		s.calm++
	}
	switch {
	case n-s.returned < s.min: // no storm since the last return
	case s.calm < settleCalm:
	case !s.at.IsZero() && now.Sub(s.at) < returnEvery:
	default:
		s.returned, s.peak, s.calm, s.at = n, 0, 0, now
		return true
	}
	return false
}

// returnAfterStorms runs until ctx ends, counting the upgrades every tick
// and giving the heap's free pages back to the kernel (with free,
// debug.FreeOSMemory unless a test gives another) after each storm of at
// least min upgrades, once it has settled (settler).
func (g *gateway) returnAfterStorms(ctx context.Context, min uint64, tick time.Duration, free func(upgrades uint64), log *slog.Logger) {
	if free == nil {
		free = func(uint64) { debug.FreeOSMemory() }
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	s := settler{min: min}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := g.upgrades()
		if !s.tick(n, time.Now()) {
			continue
		}
		metrics.Read(sample)
		before := sample[0].Value.Uint64()
		began := time.Now()
		free(n)
		took := time.Since(began)
		metrics.Read(sample)
		log.Info("ws_gateway: a storm of upgrades settled; free heap pages returned",
			"upgrades", n, "returned_bytes", int64(sample[0].Value.Uint64())-int64(before), "took", took.Round(time.Microsecond))
	}
}

// upgrades returns the upgrades every loop has counted.
func (g *gateway) upgrades() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var n uint64
	for _, c := range g.counters {
		n += c.upgrades.Load()
	}
	return n
}
