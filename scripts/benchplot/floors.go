package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// floorP99s is each floor run's p99 by curve and repeat, valid runs only.
// The runs of one repeat share one rate (that repeat's reference capacity
// times the floor's percentage); runs of different repeats do not.
func floorP99s(runs []latRun) map[curveKey]map[int]float64 {
	out := map[curveKey]map[int]float64{}
	for _, r := range runs {
		if !strings.HasPrefix(r.Kind, "floor-") || r.clientReport() != nil || r.Load.why() != "" {
			continue
		}
		k := curveKey{r.Protocol, r.Conns, r.Server}
		if out[k] == nil {
			out[k] = map[int]float64{}
		}
		out[k][r.Repeat] = r.Load.P99
	}
	return out
}

// writeFloor writes the verdict of one floor: server a's p99 at most limit
// times server b's, at the same rate. It compares a and b only within a
// repeat in which both runs are valid (same rate, minutes apart), and
// judges the median of those repeats' ratios. Medians taken over each
// server's valid runs apart would compare runs at different rates, and
// on a noisy machine different conditions: the 2026-12-02 summary set
// percore's one valid repeat at 62,893/s (1,302 us) against C liburing's
// median over three repeats at 25,225-62,893/s (105 us), a 12x that was
// 1.01x in the one repeat both were valid (1,302 against 1,283 us).
func writeFloor(w io.Writer, p99s map[curveKey]map[int]float64, proto string, conns int, a, b string, limit float64) {
	xa, xb := p99s[curveKey{proto, conns, a}], p99s[curveKey{proto, conns, b}]
	if xa == nil && xb == nil {
		return
	}
	var reps []int
	for r := range xa {
		if y, ok := xb[r]; ok && y > 0 {
			reps = append(reps, r)
		}
	}
	slices.Sort(reps)
	if len(reps) == 0 {
		fmt.Fprintf(w, "- %s, %d connections: %s against %s (floor: at most %.1fx): not checked: no repeat in which both runs are valid (%d and %d valid runs)\n",
			proto, conns, a, b, limit, len(xa), len(xb))
		return
	}
	ratios := make([]float64, len(reps))
	pairs := make([]string, len(reps))
	for i, r := range reps {
		ratios[i] = xa[r] / xb[r]
		pairs[i] = fmt.Sprintf("#%d %.0f/%.0f us = %.2fx", r, xa[r], xb[r], ratios[i])
	}
	m := median(ratios)
	verdict := "holds"
	if m > limit {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "- %s, %d connections: %s p99 is %.2fx %s's, the median over %d paired repeats (%s; floor: at most %.1fx): %s\n",
		proto, conns, a, m, b, len(reps), strings.Join(pairs, ", "), limit, verdict)
}

// writeFloors writes the verdict of every floor for which runs were made.
func writeFloors(w io.Writer, runs []latRun, floors map[curveKey][]point) {
	p99s := floorP99s(runs)
	conns := map[int]bool{}
	for k := range floors {
		conns[k.conns] = true
	}
	cs := make([]int, 0, len(conns))
	for c := range conns {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	for _, c := range cs {
		for _, s := range []string{"percore-uring", "percore-epoll"} {
			writeFloor(w, p99s, "echo", c, s, "netpoll", 0.5)
			writeFloor(w, p99s, "echo", c, s, "liburing", 1.2)
		}
		writeFloor(w, p99s, "http", c, "percore", "nginx", 1.0)
	}
}

// writeFloorRuns lists every floor run with what it needs to be read:
// whether it is valid, the generator's busy share, work per request and
// late sends, the steal on the generator's and the server's CPUs, their
// run-queue waits and the polling generator's gaps. A floor pair is only as
// good as its worse run; this table says which that was, and why.
func writeFloorRuns(w io.Writer, runs []latRun) {
	var fs []latRun
	for _, r := range runs {
		if strings.HasPrefix(r.Kind, "floor-") && r.Load != nil && r.Load.Requests > 0 {
			fs = append(fs, r)
		}
	}
	if len(fs) == 0 {
		return
	}
	slices.SortStableFunc(fs, func(a, b latRun) int {
		if c := strings.Compare(a.Protocol, b.Protocol); c != 0 {
			return c
		}
		if a.Conns != b.Conns {
			return a.Conns - b.Conns
		}
		return a.Repeat - b.Repeat
	})
	fmt.Fprintf(w, "\n### The floor runs, one by one\n\n")
	fmt.Fprintln(w, "| protocol | connections | repeat | server | rate/s | p50 | p99 | late sends | generator busy | generator work us/req | steal: generator's CPU, server's | run-queue wait: generator, server | polling gaps ms (longest us) | valid |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range fs {
		l := r.Load
		late := 0.0
		if l.Paced > 0 {
			late = 100 * float64(l.LateSends) / float64(l.Paced)
		}
		work := l.WorkUs
		if work == 0 {
			work = l.ClientCPUus // a result from before -spin's accounting
		}
		busy := fmt.Sprintf("%.0f%%", l.ClientBusy)
		if l.SpinIdle > 0 {
			busy = fmt.Sprintf("%.0f%% (polling)", l.ClientBusy-l.SpinIdle)
		}
		valid := "yes"
		if why := l.why(); why != "" {
			valid = "no"
			if strings.HasPrefix(why, "disturbed") {
				valid = "no: " + why
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %.0f | %.0f | %.0f | %.2f%% | %s | %.1f | %.1f%%, %.1f%% | %.1f%%, %.1f%% | %.1f (%.0f) | %s |\n",
			r.Protocol, r.Conns, r.Repeat, r.Server, l.Rate, l.P50, l.P99, late, busy, work,
			l.ClientSteal, l.ServerSteal, l.ClientRunq, l.ServerRunq, l.GapMs, l.GapMaxUs, valid)
	}
}
