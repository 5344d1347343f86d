//go:build linux

package main

import (
	"slices"
	"testing"
	"time"
)

func TestStealOnTheRunsCPUs(t *testing.T) {
	a := parsePerCPU([]byte("cpu  300 0 300 1400 0 0 0 30 0 0\ncpu0 100 0 100 700 0 0 0 10 0 0\ncpu1 200 0 200 700 0 0 0 20 0 0\nintr 5\n"))
	b := parsePerCPU([]byte("cpu  600 0 600 2800 0 0 0 130 0 0\ncpu0 200 0 200 1400 0 0 0 10 0 0\ncpu1 300 0 300 1400 0 0 0 120 0 0\n"))
	if len(a) != 2 || a[1] != (cpuTimes{total: 1120, steal: 20}) {
		t.Fatalf("parsePerCPU = %+v, want cpu0 and cpu1, cpu1 {1120 20}", a)
	}
	for _, tt := range []struct {
		cpus []int
		want float64
	}{
		{[]int{0}, 0},
		{[]int{1}, 100.0 * 100 / 1000},
		{[]int{0, 1}, 100.0 * 100 / (900 + 1000)},
		{[]int{7}, 0}, // not in the samples
		{nil, 0},
	} {
		if got := stealOn(a, b, tt.cpus); got != tt.want {
			t.Errorf("stealOn(%v) = %v, want %v", tt.cpus, got, tt.want)
		}
	}
	if got := stealOn(b, a, []int{1}); got != 0 {
		t.Errorf("stealOn backwards = %v, want 0", got)
	}
}

func TestParseSchedstat(t *testing.T) {
	if got, err := parseSchedstat([]byte("123456 7890 12\n")); err != nil || got != 7890*time.Nanosecond {
		t.Errorf("parseSchedstat = %v, %v, want 7.89us", got, err)
	}
	for _, bad := range []string{"", "123", "1 x 2"} {
		if _, err := parseSchedstat([]byte(bad)); err == nil {
			t.Errorf("parseSchedstat(%q) gave no error", bad)
		}
	}
}

// TestSchedSampleOfThisProcess reads this process's own threads and CPUs:
// what a run samples at its window's edges.
func TestSchedSampleOfThisProcess(t *testing.T) {
	cpus := affinity(0)
	if len(cpus) == 0 || !slices.IsSorted(cpus) {
		t.Fatalf("affinity(0) = %v, want this process's CPUs, ascending", cpus)
	}
	if _, err := runqWait(0); err != nil {
		t.Fatalf("runqWait(0): %v", err)
	}
	s0 := sampleSched(0)
	if len(s0.cpus) == 0 {
		t.Fatal("sampleSched read no CPU lines from /proc/stat")
	}
	r := &Result{WindowS: 1}
	r.fillSched(s0, sampleSched(0), cpus, nil)
	if r.ClientStealPct < 0 || r.ClientStealPct > 100 || r.ClientRunqWaitPct < 0 {
		t.Errorf("fillSched: steal %v%%, run-queue wait %v%%: out of range", r.ClientStealPct, r.ClientRunqWaitPct)
	}
}

// TestPollGaps counts a polling loop's intervals above gapLimit, in the
// window only, with their sum and the longest.
func TestPollGaps(t *testing.T) {
	rec := &Recorder{}
	w := rec.NewWorker()
	w.PollGap(time.Second) // before the window
	rec.setMeasuring(true)
	for _, d := range []time.Duration{gapLimit, 300 * time.Microsecond, 5 * time.Microsecond, time.Millisecond} {
		w.PollGap(d)
	}
	w.SpinIdle(7 * time.Microsecond)
	rec.setMeasuring(false)
	w.PollGap(time.Second)
	tot := rec.Totals()
	if tot.Gaps != 2 || tot.GapTime != 1300*time.Microsecond || tot.GapMax != time.Millisecond || tot.SpinIdle != 7*time.Microsecond {
		t.Fatalf("totals: %d gaps, %v in all, longest %v, idle %v; want 2, 1.3ms, 1ms, 7us", tot.Gaps, tot.GapTime, tot.GapMax, tot.SpinIdle)
	}
}
