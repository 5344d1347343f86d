//go:build linux

package runtime

import (
	"os"
	goruntime "runtime"
	"sync"
)

// tlsProcs is the process's record of the GOMAXPROCS raises of the
// runtimes' handshake pools (setupTLSPool): one value for the process,
// however many runtimes raise and close, in any order (an in-process
// hand-over starts the new runtime before the old one closes).
// GOMAXPROCS is max(orig, the largest want) while any want is live, and
// goes back to orig when the last one ends.
var tlsProcs procsRecord

type procsRecord struct {
	mu    sync.Mutex
	orig  int                 // GOMAXPROCS before the first live raise
	dflt  bool                // orig was Go's default: restore with SetDefaultGOMAXPROCS
	set   int                 // what the record last set it to
	limit int                 // a CPU quota's Ps (Go's default below the affinity mask), 0: none
	wants map[*runtimeTLS]int // each live raising runtime's want
}

// goDefaultProcs returns Go's default GOMAXPROCS (the affinity mask's
// CPUs, capped by a cgroup CPU quota) and whether GOMAXPROCS is Go's to
// choose (no GOMAXPROCS environment variable); cur is GOMAXPROCS now,
// which it leaves as it found it. Go has no query for the default: it
// sets it and puts cur back if that differs.
// A variable: the tests drive the quota case without a cgroup.
var goDefaultProcs = func(cur int) (int, bool) {
	if os.Getenv("GOMAXPROCS") != "" {
		return 0, false
	}
	goruntime.SetDefaultGOMAXPROCS()
	d := goruntime.GOMAXPROCS(0)
	if d != cur {
		goruntime.GOMAXPROCS(cur)
	}
	return d, true
}

// baseProcs returns GOMAXPROCS as it was before the live raises (as it is
// when there are none): what a pool's MaxCPU default comes from.
func baseProcs() int {
	tlsProcs.mu.Lock()
	defer tlsProcs.mu.Unlock()
	if len(tlsProcs.wants) > 0 {
		return tlsProcs.orig
	}
	return goruntime.GOMAXPROCS(0)
}

// raiseProcs records key's want of GOMAXPROCS, when it is above the value
// before the raises, and returns GOMAXPROCS after (raised to the largest
// want) and before the raises. affinity is how many CPUs the process's
// affinity mask has: where Go's default is below it, a cgroup CPU quota
// set the default (as loopCores finds), and the raise stops at the
// default (quota, returned): more runnable threads than the quota has CPUs
// would have CFS throttle the whole cgroup, loops included, so the
// handshakes share the quota's Ps instead.
func raiseProcs(key *runtimeTLS, want, affinity int) (now, orig, quota int) {
	tlsProcs.mu.Lock()
	defer tlsProcs.mu.Unlock()
	cur := goruntime.GOMAXPROCS(0)
	if len(tlsProcs.wants) == 0 {
		if want <= cur {
			return cur, cur, 0
		}
		d, ok := goDefaultProcs(cur)
		tlsProcs.limit = 0
		if ok && d < affinity {
			tlsProcs.limit = d
		}
		if tlsProcs.limit > 0 && min(want, tlsProcs.limit) <= cur {
			return cur, cur, tlsProcs.limit
		}
		tlsProcs.orig, tlsProcs.dflt, tlsProcs.set = cur, ok && d == cur, 0
		tlsProcs.wants = map[*runtimeTLS]int{}
	}
	if tlsProcs.limit > 0 {
		want = min(want, tlsProcs.limit)
	}
	if want <= tlsProcs.orig {
		return cur, tlsProcs.orig, tlsProcs.limit
	}
	tlsProcs.wants[key] = want
	return tlsProcs.applyLocked(cur), tlsProcs.orig, tlsProcs.limit
}

// dropProcs forgets key's want, lowers GOMAXPROCS to the largest want
// left, or puts it back as it was when none is left, unless something else
// changed it since the record last set it.
func dropProcs(key *runtimeTLS) {
	tlsProcs.mu.Lock()
	defer tlsProcs.mu.Unlock()
	if _, ok := tlsProcs.wants[key]; !ok {
		return
	}
	delete(tlsProcs.wants, key)
	cur := goruntime.GOMAXPROCS(0)
	if len(tlsProcs.wants) > 0 {
		tlsProcs.applyLocked(cur)
		return
	}
	if cur != tlsProcs.set {
		return // changed by someone else: theirs now
	}
	if tlsProcs.dflt {
		goruntime.SetDefaultGOMAXPROCS() // Go follows a CPU quota again
	} else {
		goruntime.GOMAXPROCS(tlsProcs.orig)
	}
}

// applyLocked sets GOMAXPROCS to max(orig, the largest want), unless
// something else changed it since the record last set it, and returns it.
func (r *procsRecord) applyLocked(cur int) int {
	if r.set != 0 && cur != r.set {
		return cur // changed by someone else: theirs now
	}
	target := r.orig
	for _, w := range r.wants {
		target = max(target, w)
	}
	if target != cur {
		goruntime.GOMAXPROCS(target)
	}
	r.set = target
	return target
}
