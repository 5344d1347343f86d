//go:build linux

package runtime

import (
	"log/slog"
	goruntime "runtime"
	"slices"
	"sync"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/runtime/tlsconn"
)

// The handshake pool's configuration, settled at start
// (docs/decisions/0064-tls-storm-scheduling.md).

// setupTLSPool settles the handshake pool's configuration (Config.TLSPool)
// at start, before the loops start (docs/decisions/0064-tls-storm-scheduling.md):
// MaxCPU (zero: GOMAXPROCS/2, at least 1), the CPUs the handshakes compute
// on (zero: those of the process's affinity that no loop uses, when there
// are any), and GOMAXPROCS, raised to the loops plus MaxCPU when it is
// below: each loop's locked thread holds a P, and a handshake that finds
// none waits for the scheduler to take one from a loop asleep in the
// kernel, while a loop that finds none (back from a wait, or from yield)
// waits behind the handshakes. The raise is logged and in the Report, and
// Close undoes it once no other runtime's raise is live (tls_procs.go).
// Where Go's default GOMAXPROCS is below the affinity mask's CPUs (a cgroup
// CPU quota), the raise stops at that default, logged: more running
// threads than the quota has CPUs get the whole cgroup throttled.
func (rt *Runtime) setupTLSPool() {
	procs := baseProcs() // not another runtime's raise
	rt.report.GOMAXPROCS = goruntime.GOMAXPROCS(0)
	pc := rt.cfg.TLSPool
	if pc.MaxCPU <= 0 {
		pc.MaxCPU = max(1, procs/2)
	}
	if pc.CPUs == nil {
		pc.CPUs = spareCPUs(rt.report.CPUs)
	}
	// Only TLS listeners raise GOMAXPROCS: a runtime that may DialTLS
	// makes its pool with the same configuration, but may never use it.
	// The raise is the process's (tls_procs.go): another runtime's may
	// already cover this one's want.
	if want := len(rt.report.CPUs) + pc.MaxCPU; rt.cfg.TLS != nil && procs < want {
		affinity := 0
		if cores, err := cpu.Cores(); err == nil {
			affinity = len(cores)
		}
		now, was, quota := raiseProcs(&rt.tls, want, affinity)
		rt.report.GOMAXPROCS = now
		if quota > 0 && now < want {
			rt.cfg.Logger.Info("percore: GOMAXPROCS not raised past the cgroup CPU quota: more running threads than the quota has CPUs would have the kernel throttle the loops with the handshakes; these share the quota's Ps",
				"gomaxprocs", now, "wanted", want, "quota_procs", quota, "affinity", affinity)
		}
		if now > was {
			rt.cfg.Logger.Info("percore: GOMAXPROCS raised for the TLS handshake pool: a P for each loop and each computing handshake",
				"gomaxprocs", now, "was", was, "loops", len(rt.report.CPUs), "handshake_cpu", pc.MaxCPU)
		}
	}
	if rt.cfg.TLS != nil {
		// The probe of the pool's scheduling, before the loops start
		// rather than on a loop's first handshake (runtimeTLS.get).
		logSchedFallback(rt.cfg.Logger, pc.Sched)
	}
	rt.tls.mu.Lock()
	rt.tls.cfg = pc
	rt.tls.logger = rt.cfg.Logger
	rt.tls.mu.Unlock()
}

// schedFallbackLogged makes the fallback's note once per process, as
// the probe is (tlsconn.EffectiveSched).
var schedFallbackLogged sync.Once

// effectiveSched is tlsconn.EffectiveSched, a variable so that a test can
// have the probe refuse without giving up the test process's privileges.
var effectiveSched = tlsconn.EffectiveSched

// logSchedFallback asks tlsconn which Sched a pool configured with s
// gets in this process (it probes once per process) and, where it is not
// s (the process cannot put a lowered thread back), says so at Warn,
// once per process: the handshakes then compute at the threads' own
// priority, on the pool's CPUs (TLSPoolStats().Sched says which).
func logSchedFallback(log *slog.Logger, s tlsconn.Sched) {
	eff, err := effectiveSched(s)
	if err == nil {
		return
	}
	schedFallbackLogged.Do(func() {
		log.Warn("percore: TLS handshakes compute at their threads' own priority: this process cannot put a lowered thread back (CAP_SYS_NICE, or RLIMIT_NICE 20: ulimit -e)",
			"sched", s.String(), "in_effect", eff.String(), "error", err)
	})
}

// spareCPUs returns the CPUs of the process's affinity that no loop runs
// on, nil when there are none (or the mask cannot be read).
func spareCPUs(loops []int) []int {
	cores, err := cpu.Cores()
	if err != nil {
		return nil
	}
	var spare []int
	for _, c := range cores {
		if !slices.Contains(loops, c) {
			spare = append(spare, c)
		}
	}
	return spare
}
