//go:build linux

package tlsconn

import (
	"errors"
	"os"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/internal/sys"
)

// TestWorkerStuck: when the kernel does not let a thread back (an
// unprivileged process leaving nice 19: EPERM), the worker keeps its
// goroutine locked to the lowered thread, later stretches change nothing,
// and the thread ends with the goroutine.
func TestWorkerStuck(t *testing.T) {
	prev := restoreSched
	restoreSched = func(unix.SchedAttr) error { return unix.EPERM }
	defer func() { restoreSched = prev }()
	type result struct {
		locked, stuck bool
		nice          int32
		tid           int
	}
	got := make(chan result)
	go func() {
		var w worker
		pl := threadPlan{sched: SchedNice}
		for range 2 { // a second stretch finds the thread stuck
			w.enter(&pl)
			w.leave()
		}
		a, err := sys.ThreadSched()
		if err != nil {
			t.Error(err)
		}
		got <- result{w.locked, w.stuck, a.Nice, unix.Gettid()}
		// Returns locked: Go ends the thread.
	}()
	r := <-got
	if !r.locked || !r.stuck || r.nice != 19 {
		t.Fatalf("after a refused restore: locked %v, stuck %v, nice %d; want locked, stuck, 19", r.locked, r.stuck, r.nice)
	}
	if r.tid == os.Getpid() {
		return // the main thread: Go wedges it rather than end it, and runs nothing on it again
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(r.tid)); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the lowered thread outlived its goroutine")
		}
		time.Sleep(time.Millisecond)
	}
}

// resetSchedProbes forgets the process's probe results, now and when the
// test ends (so that later tests probe the kernel as it is).
func resetSchedProbes(t *testing.T) {
	for i := range schedProbes {
		schedProbes[i] = schedProbe{}
	}
	t.Cleanup(func() {
		for i := range schedProbes {
			schedProbes[i] = schedProbe{}
		}
	})
}

// TestEffectiveSchedProbe: the probe's two outcomes, with the restore
// made to fail as an unprivileged process's would (EPERM; the test
// process keeps its privileges). Restorable: the pool lowers its threads.
// Not: the pool falls back to SchedNormal with its CPUs, says so in
// Stats, and the probe's lowered thread is never unlocked (it ends with
// its goroutine). Either answer is kept: the probe runs once.
func TestEffectiveSchedProbe(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refuse  bool
		sched   Sched
		want    Sched
		lowered unix.SchedAttr // what the probe's thread was when put back
	}{
		{"nice restorable", false, SchedDefault, SchedNice, unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: 19}},
		{"idle restorable", false, SchedIdle, SchedIdle, unix.SchedAttr{Policy: unix.SCHED_IDLE}},
		{"nice refused", true, SchedNice, SchedNormal, unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: 19}},
		{"idle refused", true, SchedIdle, SchedNormal, unix.SchedAttr{Policy: unix.SCHED_IDLE}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resetSchedProbes(t)
			type call struct {
				tid    int
				policy uint32
				nice   int32
			}
			var calls []call // under the probe's lock: EffectiveSched waits for it
			prev := restoreSched
			restoreSched = func(a unix.SchedAttr) error {
				cur, err := sys.ThreadSched()
				if err != nil {
					t.Error(err)
				}
				calls = append(calls, call{unix.Gettid(), cur.Policy, cur.Nice})
				if tc.refuse {
					return unix.EPERM
				}
				return prev(a)
			}
			defer func() { restoreSched = prev }()
			// A probe on the main thread cannot show its thread's end (Go
			// wedges the main thread): probe again, a few times, with
			// this goroutine holding its own thread (the probe's
			// goroutine would otherwise run on it, the main one or not).
			goruntime.LockOSThread()
			defer goruntime.UnlockOSThread()
			for attempt := 0; ; attempt++ {
				calls = nil
				for i := range schedProbes {
					schedProbes[i] = schedProbe{}
				}
				for range 2 {
					got, err := EffectiveSched(tc.sched)
					if got != tc.want || (err != nil) != tc.refuse {
						t.Fatalf("EffectiveSched(%v) = %v, %v; want %v, refused %v", tc.sched, got, err, tc.want, tc.refuse)
					}
					if tc.refuse && !errors.Is(err, unix.EPERM) {
						t.Fatalf("error %v, want EPERM", err)
					}
				}
				if len(calls) != 1 {
					t.Fatalf("%d probes, want 1 (the answer is kept)", len(calls))
				}
				if calls[0].tid != os.Getpid() || attempt == 10 {
					break
				}
			}
			if c := calls[0]; c.policy != tc.lowered.Policy || c.nice != tc.lowered.Nice {
				t.Fatalf("the probe's thread was policy %d nice %d when put back, want %d %d", c.policy, c.nice, tc.lowered.Policy, tc.lowered.Nice)
			}
			cores := []int{0}
			pool := NewPool(PoolConfig{Sched: tc.sched, CPUs: cores})
			defer pool.Close()
			if st := pool.Stats(); st.Sched != tc.want {
				t.Fatalf("Stats().Sched = %v, want %v", st.Sched, tc.want)
			}
			if pool.thread.cpus == nil {
				t.Fatal("the fallback dropped the CPUs")
			}
			if tc.refuse {
				waitThreadGone(t, calls[0].tid)
			}
		})
	}
}

// waitThreadGone waits for the thread tid to end: a goroutine that
// returns locked to its thread takes the thread with it, one that
// unlocked it leaves it to the scheduler.
func waitThreadGone(t *testing.T, tid int) {
	t.Helper()
	if tid == os.Getpid() {
		t.Log("on the main thread: Go wedges it rather than end it, and runs nothing on it again")
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d outlived its goroutine: it was unlocked", tid)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestStuckWorkerNotifies: a worker whose thread the kernel did not let
// back calls the session's Notify from another goroutine, which Go never
// runs on the stuck (locked, lowered) thread.
func TestStuckWorkerNotifies(t *testing.T) {
	prev := restoreSched
	restoreSched = func(unix.SchedAttr) error { return unix.EPERM }
	defer func() { restoreSched = prev }()
	type seen struct {
		tid  int
		nice int32
	}
	notified := make(chan seen, 1)
	s := &Session{notify: func() {
		a, err := sys.ThreadSched()
		if err != nil {
			t.Error(err)
		}
		notified <- seen{unix.Gettid(), a.Nice}
	}}
	stuck := make(chan int, 1)
	go func() {
		var w worker
		pl := threadPlan{sched: SchedNice}
		w.enter(&pl)
		w.leave()
		if !w.stuck {
			t.Error("the worker is not stuck after a refused restore")
		}
		stuck <- unix.Gettid()
		w.notify = true
		notifyDue(s, &w)
		// Returns locked: Go ends the thread.
	}()
	tid := <-stuck
	got := <-notified
	if got.tid == tid || got.nice != 0 {
		t.Fatalf("Notify ran on thread %d at nice %d; the stuck thread is %d", got.tid, got.nice, tid)
	}
	waitThreadGone(t, tid)
}
