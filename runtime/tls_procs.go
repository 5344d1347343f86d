//go:build linux

package runtime

import (
	"math"
	"os"
	goruntime "runtime"
	"sync"

	"github.com/percore/percore/cpu"
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
	limit int                 // the Ps a cgroup CPU quota allows (quotaProcs), 0: none
	wants map[*runtimeTLS]int // each live raising runtime's want
}

// cpuQuota returns the cgroup CPU bandwidth limit in CPUs (cpu.Quota),
// false when none: a variable, so that the tests drive the quota case
// without a cgroup.
var cpuQuota = cpu.Quota

// quotaProcs returns the most Ps a raise may go to under a CPU quota of q
// CPUs: the whole CPUs of it, at least one. More runnable threads than the
// quota has CPUs have CFS throttle the whole cgroup, loops included.
func quotaProcs(q float64) int { return max(1, int(q)) }

// goDefaultProcs returns what Go's default GOMAXPROCS is (Go 1.25): the
// CPUs of the affinity mask (affinity, or runtime.NumCPU when 0), lowered
// to a CPU quota of q CPUs rounded up, but not below 2. Computed, not
// probed: setting the default to read it back would switch Go's updates
// of GOMAXPROCS on for a program that had set its own.
func goDefaultProcs(affinity int, q float64, hasQuota bool) int {
	n := affinity
	if n <= 0 {
		n = goruntime.NumCPU()
	}
	if hasQuota {
		n = min(n, max(2, int(math.Ceil(q))))
	}
	return n
}

// baseProcs returns GOMAXPROCS as it was before the live raises (as it is
// when there are none, or when something else has changed it since): what
// a pool's MaxCPU default and the loops' count (loopCores) come from, so
// that a runtime started while another's raise is live is not sized by it.
func baseProcs() int {
	tlsProcs.mu.Lock()
	defer tlsProcs.mu.Unlock()
	cur := goruntime.GOMAXPROCS(0)
	if len(tlsProcs.wants) > 0 && cur == tlsProcs.set {
		return tlsProcs.orig
	}
	return cur
}

// raiseProcs records key's want of GOMAXPROCS, when it is above the value
// before the raises, and returns GOMAXPROCS after (raised to the largest
// want) and before the raises, and the Ps a CPU quota allows (0: no
// quota). Under a cgroup CPU quota (read from the cgroup files, up the
// hierarchy: cpu.Quota) the raise stops at the quota's whole CPUs: more
// runnable threads than the quota has CPUs would have CFS throttle the
// whole cgroup, loops included, so the handshakes share the quota's Ps
// instead. affinity is how many CPUs the process's affinity mask has (0:
// unknown), for telling Go's default from a value the program set.
func raiseProcs(key *runtimeTLS, want, affinity int) (now, orig, quota int) {
	tlsProcs.mu.Lock()
	defer tlsProcs.mu.Unlock()
	cur := goruntime.GOMAXPROCS(0)
	if len(tlsProcs.wants) == 0 {
		if want <= cur {
			return cur, cur, 0
		}
		q, hasQuota := cpuQuota()
		tlsProcs.limit = 0
		if hasQuota {
			tlsProcs.limit = quotaProcs(q)
		}
		if tlsProcs.limit > 0 && min(want, tlsProcs.limit) <= cur {
			return cur, cur, tlsProcs.limit
		}
		envSet := os.Getenv("GOMAXPROCS") != ""
		tlsProcs.orig, tlsProcs.set = cur, 0
		tlsProcs.dflt = !envSet && cur == goDefaultProcs(affinity, q, hasQuota)
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
