//go:build linux

package runtime

import (
	"bytes"
	"crypto/tls"
	"errors"
	"log/slog"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/runtime/tlsconn"
)

// setProcs sets GOMAXPROCS to n for the test and puts it back after
// (Go's default where it was the default: setting GOMAXPROCS stops Go
// from following a CPU quota).
func setProcs(t *testing.T, n int) {
	prev := goruntime.GOMAXPROCS(n)
	t.Cleanup(func() {
		if os.Getenv("GOMAXPROCS") == "" && prev == goruntime.NumCPU() {
			goruntime.SetDefaultGOMAXPROCS()
		} else {
			goruntime.GOMAXPROCS(prev)
		}
	})
}

// TestProcsRecord: the raises of runtimes that overlap are one record for
// the process, whatever order they close in. (A) at 1, A raises to 2, B's
// want of 2 is covered; A closing leaves 2 for B, B closing puts 1 back.
// (B) at 4, A raises to 6; B's MaxCPU comes from the 4 (baseProcs), and a
// B that wants 7 raises to 7; A closing leaves 7, B closing puts 4 back
// (not the 6 that A found). Before the record, each runtime put back what
// it had found, when GOMAXPROCS was still what it had set: (A) ended at 1
// under B, (B) at 6.
func TestProcsRecord(t *testing.T) {
	type step struct {
		raise     bool
		key       *runtimeTLS
		want      int // raise: the runtime's want
		procs     int // GOMAXPROCS after the step
		base      int // baseProcs after the step
		orig, now int // raise: what raiseProcs returns
	}
	a, b := &runtimeTLS{}, &runtimeTLS{}
	for _, tc := range []struct {
		name  string
		start int
		steps []step
	}{
		{"hand-over", 1, []step{
			{raise: true, key: a, want: 2, procs: 2, base: 1, orig: 1, now: 2},
			{raise: true, key: b, want: 2, procs: 2, base: 1, orig: 1, now: 2},
			{key: a, procs: 2, base: 1},
			{key: b, procs: 1, base: 1},
		}},
		{"raised twice", 4, []step{
			{raise: true, key: a, want: 6, procs: 6, base: 4, orig: 4, now: 6},
			{raise: true, key: b, want: 7, procs: 7, base: 4, orig: 4, now: 7},
			{key: a, procs: 7, base: 4},
			{key: b, procs: 4, base: 4},
		}},
		{"lowered to the want left", 4, []step{
			{raise: true, key: a, want: 6, procs: 6, base: 4, orig: 4, now: 6},
			{raise: true, key: b, want: 5, procs: 6, base: 4, orig: 4, now: 6},
			{key: a, procs: 5, base: 4},
			{key: a, procs: 5, base: 4}, // a second close changes nothing
			{key: b, procs: 4, base: 4},
		}},
		{"a want below", 4, []step{
			{raise: true, key: a, want: 3, procs: 4, base: 4, orig: 4, now: 4},
			{key: a, procs: 4, base: 4},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setProcs(t, tc.start)
			for i, st := range tc.steps {
				if st.raise {
					now, orig, _ := raiseProcs(st.key, st.want, 0)
					if now != st.now || orig != st.orig {
						t.Fatalf("step %d: raiseProcs(%d) = %d, %d; want %d, %d", i, st.want, now, orig, st.now, st.orig)
					}
				} else {
					dropProcs(st.key)
				}
				if got, base := goruntime.GOMAXPROCS(0), baseProcs(); got != st.procs || base != st.base {
					t.Fatalf("step %d: GOMAXPROCS %d, base %d; want %d, %d", i, got, base, st.procs, st.base)
				}
			}
		})
	}
}

// TestProcsRecordDefault: GOMAXPROCS that was Go's default comes back as
// the default (SetDefaultGOMAXPROCS, so that Go follows a CPU quota
// again); one a program set stays its value, and the record leaves alone a
// GOMAXPROCS that something else changed after the raise.
func TestProcsRecordDefault(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment: Go's default is that")
	}
	setProcs(t, 1)
	goruntime.SetDefaultGOMAXPROCS()
	def := goruntime.GOMAXPROCS(0)
	a := &runtimeTLS{}
	raiseProcs(a, def+2, 0)
	if !tlsProcs.dflt {
		t.Error("Go's default not recognised as the default")
	}
	dropProcs(a)
	if got := goruntime.GOMAXPROCS(0); got != def {
		t.Errorf("GOMAXPROCS %d after the raise, want the default %d", got, def)
	}

	goruntime.GOMAXPROCS(def + 1) // the program's own, above the default
	raiseProcs(a, def+3, 0)
	if tlsProcs.dflt {
		t.Error("a value the program set taken for the default")
	}
	dropProcs(a)
	if got := goruntime.GOMAXPROCS(0); got != def+1 {
		t.Errorf("GOMAXPROCS %d after the raise, want the program's %d", got, def+1)
	}

	raiseProcs(a, def+3, 0)
	goruntime.GOMAXPROCS(def + 5) // someone else's, after the raise
	dropProcs(a)
	if got := goruntime.GOMAXPROCS(0); got != def+5 {
		t.Errorf("GOMAXPROCS %d, want %d: changed after the raise, not the record's", got, def+5)
	}
}

// TestProcsQuota: under a cgroup CPU quota (driven here through
// cpuQuota) a raise stops at the quota's whole CPUs: at them nothing is
// raised, and setupTLSPool says why; below them (a program's own smaller
// value) the raise goes up to them, not to the want; a fractional quota
// (3.5) allows 3, where Go's default rounds it up to 4; and the cap holds
// with GOMAXPROCS set in the environment too. Before, the quota was
// inferred from Go's default being below the affinity mask, which missed
// a fractional quota, a quota on a parent cgroup and the environment.
func TestProcsQuota(t *testing.T) {
	prev := cpuQuota
	t.Cleanup(func() { cpuQuota = prev })
	quota := func(q float64) { cpuQuota = func() (float64, bool) { return q, q > 0 } }
	a := &runtimeTLS{}

	quota(2)
	setProcs(t, 2)
	if now, orig, lim := raiseProcs(a, 3, 8); now != 2 || orig != 2 || lim != 2 {
		t.Errorf("at the quota's 2 CPUs: raiseProcs(3) = %d, %d, %d; want 2, 2, 2", now, orig, lim)
	}
	dropProcs(a)

	goruntime.GOMAXPROCS(1)
	if now, _, lim := raiseProcs(a, 3, 8); now != 2 || lim != 2 || goruntime.GOMAXPROCS(0) != 2 {
		t.Errorf("at 1 under a quota of 2: raiseProcs(3) = %d (limit %d), GOMAXPROCS %d; want 2", now, lim, goruntime.GOMAXPROCS(0))
	}
	dropProcs(a)
	if got := goruntime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d after, want 1 back", got)
	}

	quota(3.5)
	goruntime.GOMAXPROCS(2)
	if now, _, lim := raiseProcs(a, 6, 4); now != 3 || lim != 3 {
		t.Errorf("under a quota of 3.5 CPUs: raiseProcs(6) = %d (limit %d); want 3", now, lim)
	}
	dropProcs(a)

	t.Setenv("GOMAXPROCS", "2")
	if now, _, lim := raiseProcs(a, 6, 4); now != 3 || lim != 3 {
		t.Errorf("with GOMAXPROCS in the environment, under a quota of 3.5: raiseProcs(6) = %d (limit %d); want 3", now, lim)
	}
	dropProcs(a)
	if got := goruntime.GOMAXPROCS(0); got != 2 {
		t.Errorf("GOMAXPROCS %d after, want the environment's 2 back", got)
	}

	quota(0)
	goruntime.GOMAXPROCS(2)
	if now, _, lim := raiseProcs(a, 3, 2); now != 3 || lim != 0 {
		t.Errorf("no quota: raiseProcs(3) = %d (limit %d); want 3", now, lim)
	}
	dropProcs(a)

	// setupTLSPool: a loop and MaxCPU 1 want 2 at GOMAXPROCS 1, whose
	// default is 1 below the affinity mask's CPUs: not raised, and logged.
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	quota(1)
	goruntime.GOMAXPROCS(1)
	var logs bytes.Buffer
	rt := &Runtime{cfg: Config{TLS: &tls.Config{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	rt.report.CPUs = cores[:1]
	rt.setupTLSPool()
	rt.tls.close()
	if got := rt.report.GOMAXPROCS; got != 1 || goruntime.GOMAXPROCS(0) != 1 {
		t.Errorf("under a quota of 1: GOMAXPROCS %d, reported %d; want 1", goruntime.GOMAXPROCS(0), got)
	}
	if n := strings.Count(logs.String(), "not raised past the cgroup CPU quota"); n != 1 {
		t.Errorf("%d notes of the quota, want 1:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "GOMAXPROCS raised") {
		t.Errorf("a raise logged under the quota:\n%s", logs.String())
	}
}

// TestSchedFallbackLogged: where the process cannot put a lowered thread
// back (the probe driven to refuse), New says so once per process at
// Warn, however many runtimes start.
func TestSchedFallbackLogged(t *testing.T) {
	prev := effectiveSched
	t.Cleanup(func() { effectiveSched, schedFallbackLogged = prev, sync.Once{} })
	schedFallbackLogged = sync.Once{}
	effectiveSched = func(tlsconn.Sched) (tlsconn.Sched, error) {
		return tlsconn.SchedNormal, errors.New("put a thread lowered to nice back: operation not permitted")
	}
	var logs bytes.Buffer
	for range 2 {
		rt := &Runtime{cfg: Config{TLS: &tls.Config{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
		rt.report.CPUs = []int{0}
		rt.setupTLSPool()
		rt.tls.get()
		rt.tls.close()
	}
	if n := strings.Count(logs.String(), "cannot put a lowered thread back"); n != 1 {
		t.Fatalf("%d notes of the fallback, want 1:\n%s", n, logs.String())
	}
	effectiveSched = func(s tlsconn.Sched) (tlsconn.Sched, error) { return s, nil }
	schedFallbackLogged = sync.Once{}
	logs.Reset()
	rt := &Runtime{cfg: Config{TLS: &tls.Config{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}}
	rt.setupTLSPool()
	rt.tls.close()
	if strings.Contains(logs.String(), "lowered thread") {
		t.Fatalf("a fallback logged where the threads are lowered:\n%s", logs.String())
	}
}
