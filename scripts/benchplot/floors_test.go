package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestFloorsPairRepeats checks that a floor compares two servers only
// within a repeat in which both runs are valid: the 2026-12-02 shape, where
// C liburing was valid in three repeats at three rates and percore in one,
// must judge the one shared repeat, not the two servers' medians (which
// said 12x where the shared repeat says 1.01x).
func TestFloorsPairRepeats(t *testing.T) {
	run := func(server string, repeat int, rate, p99 float64, problem string) latRun {
		return latRun{Kind: "floor-netpoll", Protocol: "echo", Server: server, Conns: 50, Repeat: repeat,
			Load: &loadResult{Rate: rate, RPS: rate, Requests: 1000, Paced: 1000, P99: p99, Problem: problem}}
	}
	runs := []latRun{
		run("liburing", 1, 25225, 105, ""),
		run("percore-uring", 1, 25225, 7854, "invalid run: the generator fell behind"),
		run("liburing", 2, 62893, 1283, ""),
		run("percore-uring", 2, 62893, 1302, ""),
		run("liburing", 3, 55512, 63, ""),
		run("percore-uring", 3, 55512, 244, "invalid run: the generator fell behind"),
		run("netpoll", 1, 25225, 1707, "invalid run: the generator fell behind"),
		run("percore-epoll", 2, 62893, 983, ""),
		run("percore-epoll", 4, 50000, 400, ""),
		run("liburing", 4, 50000, 100, ""),
	}
	floors := aggregate(runs, func(k string) bool { return strings.HasPrefix(k, "floor-") })
	var b bytes.Buffer
	writeFloors(&b, runs, floors)
	got := b.String()
	for _, want := range []string{
		"echo, 50 connections: percore-uring p99 is 1.01x liburing's, the median over 1 paired repeats (#2 1302/1283 us = 1.01x; floor: at most 1.2x): holds",
		"percore-uring against netpoll (floor: at most 0.5x): not checked: no repeat in which both runs are valid (1 and 0 valid runs)",
		// The median of the repeats' ratios (0.77x and 4x), not a ratio of medians.
		"percore-epoll p99 is 2.38x liburing's, the median over 2 paired repeats (#2 983/1283 us = 0.77x, #4 400/100 us = 4.00x; floor: at most 1.2x): MISSED",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("floors lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "http") {
		t.Errorf("a verdict for a floor without runs:\n%s", got)
	}
}
