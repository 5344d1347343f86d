package main

// The latency mode's input: the runs of scripts/bench-latency.sh, one JSON
// object per line (a load result or a vegeta report), as read.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// latRun is one line of latency-runs.jsonl.
type latRun struct {
	Kind       string        `json:"kind"` // sweep, floor-REF, check, vegeta, wrk2
	Protocol   string        `json:"protocol"`
	Server     string        `json:"server"`
	Conns      int           `json:"conns"`
	Repeat     int           `json:"repeat"`
	Status     int           `json:"status"`
	Load       *loadResult   `json:"load"`
	TargetRate float64       `json:"target_rate"` // vegeta, wrk2
	Vegeta     *vegetaReport `json:"vegeta"`
	// Report is wrk2's result (kind wrk2), in vegeta's shape: the script
	// turns wrk2's --latency percentiles into nanoseconds.
	Report *vegetaReport `json:"report"`
}

// clientReport is the independent client's report of a check run: vegeta's
// or wrk2's, nil for the other kinds.
func (r latRun) clientReport() *vegetaReport {
	switch r.Kind {
	case "vegeta":
		return r.Vegeta
	case "wrk2":
		return r.Report
	}
	return nil
}

// loadResult is the part of examples/bench/load's -json result the report uses.
type loadResult struct {
	Step       string  `json:"step"`
	Rate       float64 `json:"rate"`
	RPS        float64 `json:"rps"`
	Requests   uint64  `json:"requests"`
	P50        float64 `json:"p50_us"`
	P90        float64 `json:"p90_us"`
	P99        float64 `json:"p99_us"`
	P999       float64 `json:"p999_us"`
	Max        float64 `json:"max_us"`
	LateSends  uint64  `json:"late_sends"`
	Paced      uint64  `json:"paced"`
	SendLagP99 float64 `json:"send_lag_p99_us"`
	Problem    string  `json:"problem"`
	ServerBusy float64 `json:"server_busy_pct"`
	ClientBusy float64 `json:"client_busy_pct"`
	OtherCPU   float64 `json:"other_cpu_pct"`
	Steal      float64 `json:"steal_pct"`
	// Where the time went (load's sched.go and -spin; absent from older
	// results, which then show zeros): steal on the generator's and the
	// server's own CPUs, their threads' run-queue wait, the polling
	// generator's gaps.
	ClientSteal float64 `json:"client_steal_pct"`
	ServerSteal float64 `json:"server_steal_pct"`
	ClientRunq  float64 `json:"client_runq_wait_pct"`
	ServerRunq  float64 `json:"server_runq_wait_pct"`
	ClientCPUus float64 `json:"client_cpu_us_per_req"`
	WorkUs      float64 `json:"client_work_us_per_req"` // less the polling; older results: absent
	SpinIdle    float64 `json:"client_spin_idle_pct"`
	GapMs       float64 `json:"client_poll_gap_ms"`
	GapMaxUs    float64 `json:"client_poll_gap_max_us"`
}

// vegetaReport is the part of `vegeta report -type=json` the report uses;
// its latencies are in nanoseconds.
type vegetaReport struct {
	Latencies struct {
		P50  float64 `json:"50th"`
		P90  float64 `json:"90th"`
		P99  float64 `json:"99th"`
		Max  float64 `json:"max"`
		Mean float64 `json:"mean"`
	} `json:"latencies"`
	Requests    uint64         `json:"requests"`
	Rate        float64        `json:"rate"`
	Throughput  float64        `json:"throughput"`
	Success     float64        `json:"success"`
	StatusCodes map[string]int `json:"status_codes"`
}

// why says what makes a load result unfit for the medians: a problem of
// its own (errors, mismatches, no requests, the generator behind its
// schedule), or a machine that was not quiet (other processes above 10%
// of a CPU, or steal above 5%: BENCHMARKING.md's rule). "" for a clean
// measurement.
func (l *loadResult) why() string {
	switch {
	case l == nil || l.Requests == 0:
		return "no result"
	case l.Problem != "":
		return l.Problem
	case l.Rate > 0 && float64(l.LateSends) > maxLate*float64(l.Paced):
		return fmt.Sprintf("invalid run: the generator fell behind its schedule (%d late sends of %d)", l.LateSends, l.Paced)
	case l.OtherCPU > 10:
		return fmt.Sprintf("disturbed: other processes used %.0f%% of a CPU", l.OtherCPU)
	case l.Steal > 5:
		return fmt.Sprintf("disturbed: steal %.1f%%", l.Steal)
	}
	return ""
}

func readRuns(r io.Reader) ([]latRun, error) {
	var runs []latRun
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var run latRun
		if err := json.Unmarshal([]byte(line), &run); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if run.Load != nil && run.Load.Step == "" && run.Load.Requests == 0 && run.Load.RPS == 0 {
			run.Load = nil // "load":{}: the run gave no result
		}
		runs = append(runs, run)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, errors.New("no runs")
	}
	return runs, nil
}
