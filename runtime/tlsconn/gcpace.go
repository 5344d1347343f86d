package tlsconn

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The collector's pacing during a storm of handshakes (PoolConfig.StormGOGC).
// A full handshake leaves about 50 KB of crypto/tls's garbage on the server
// (the key schedule's hashes, the key shares, the flights' buffers), none of
// which percore can reuse from outside crypto/tls; a storm of them has the
// collector run every few dozen handshakes, and each cycle's workers and
// stack scans share the loops' CPUs. A pool in a storm raises GOGC to
// StormGOGC, so that the collector runs that much less often, and puts it
// back once the pool is idle.

// stormGC is the process's record of the pools' raises of GOGC: GOGC is
// max(orig, the largest live want) while any pool is in a storm, and orig
// again once none is, unless something else changed it since the record
// set it (then it is theirs).
var stormGC struct {
	mu    sync.Mutex
	orig  int           // GOGC before the first live raise
	set   int           // what the record last set it to
	wants map[*Pool]int // each pool in a storm's StormGOGC
}

// gogc reads GOGC without changing it (debug.SetGCPercent would).
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 100
	}
	return int(s[0].Value.Uint64())
}

// raiseGOGC records p's want of GOGC while it is in a storm.
func raiseGOGC(p *Pool, want int) {
	stormGC.mu.Lock()
	defer stormGC.mu.Unlock()
	cur := gogc()
	if len(stormGC.wants) == 0 {
		if cur < 0 || want <= cur {
			return // off (GOGC=off reads as 0 or less), or already above
		}
		stormGC.orig, stormGC.set = cur, 0
		stormGC.wants = map[*Pool]int{}
	}
	stormGC.wants[p] = want
	applyGOGCLocked(cur)
}

// dropGOGC forgets p's want, and puts GOGC back (to the largest want
// left, or to orig) unless something else changed it since.
func dropGOGC(p *Pool) {
	stormGC.mu.Lock()
	defer stormGC.mu.Unlock()
	if _, ok := stormGC.wants[p]; !ok {
		return
	}
	delete(stormGC.wants, p)
	cur := gogc()
	if len(stormGC.wants) > 0 {
		applyGOGCLocked(cur)
		return
	}
	if cur == stormGC.set {
		debug.SetGCPercent(stormGC.orig)
	}
}

func applyGOGCLocked(cur int) {
	if stormGC.set != 0 && cur != stormGC.set {
		return // changed by someone else: theirs now
	}
	target := stormGC.orig
	for _, w := range stormGC.wants {
		target = max(target, w)
	}
	if target != cur {
		debug.SetGCPercent(target)
	}
	stormGC.set = target
}

// paceLocked updates the pool's storm state from its running and queued
// handshakes, and GOGC with it: a storm begins when StormAt handshakes run
// at once, and ends when the pool is idle (or closed). Under p.mu (the
// record's lock nests inside it).
func (p *Pool) paceLocked() {
	if p.cfg.StormGOGC <= 0 {
		return
	}
	switch {
	case !p.storm && !p.closed && p.running.n >= p.cfg.StormAt:
		p.storm = true
		raiseGOGC(p, p.cfg.StormGOGC)
	case p.storm && (p.closed || p.running.n == 0 && p.queue.n == 0):
		p.storm = false
		dropGOGC(p)
	}
}
