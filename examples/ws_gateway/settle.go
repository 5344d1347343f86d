//go:build linux

package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"
)

// A storm of upgrades (a reconnection storm, or the first clients of a
// fresh process) leaves the Go heap larger than what it then holds: every
// upgrade makes garbage (the request's parse, the handshake's answer), the
// collector lets the heap grow to twice what is live between cycles, and
// the pages it frees go back to the kernel only slowly (the runtime's
// background scavenger). A gateway whose clients then sit idle would hold
// that memory for minutes. So once a storm settles (at least
// -return-after upgrades since the last time, and none for a second), the
// gateway collects and gives the free pages back at once
// (debug.FreeOSMemory): one forced collection per storm, off the loops'
// threads (the collector's stop-the-world pauses are short; its marking
// takes a share of the CPU for the length of one cycle). Steady churn,
// which never leaves a quiet second, never triggers it; -return-after 0
// turns it off. Decision 0072 and docs/performance.md "WebSocket gateway,
// floors, part 3" have what it saves.

// settleQuiet is how long no upgrade arrives before a storm counts as
// settled.
const settleQuiet = time.Second

// returnAfterStorms runs until ctx ends, giving the heap's free pages back
// to the kernel (with free, debug.FreeOSMemory unless a test gives another)
// after each storm of at least min upgrades, once none arrived for quiet.
func (g *gateway) returnAfterStorms(ctx context.Context, min uint64, quiet time.Duration, free func(upgrades uint64), log *slog.Logger) {
	if free == nil {
		free = func(uint64) { debug.FreeOSMemory() }
	}
	t := time.NewTicker(quiet)
	defer t.Stop()
	var last, returned uint64 // upgrades at the last tick, at the last return
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := g.upgrades()
		switch {
		case n != last:
			last = n // still arriving
		case n-returned >= min:
			began := time.Now()
			free(n)
			log.Debug("ws_gateway: a storm of upgrades settled; free heap pages returned",
				"upgrades", n-returned, "took", time.Since(began).Round(time.Microsecond))
			returned = n
		}
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
