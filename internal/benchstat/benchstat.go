// Package benchstat turns the raw runs of the side-by-side benchmark
// (scripts/bench.sh) into its table: for every scenario and server the
// median of the repeats with their spread, each row's ratio to a baseline
// server, and flags that say which side limited the run.
//
// A raw file holds one JSON object per line (see Run): the server and
// scenario, the repeat, and the object examples/bench/load printed with -json.
package benchstat

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
)

// Kinds of run in a raw file.
const (
	// KindRun is a throughput run: everything but system calls comes from it.
	KindRun = "run"
	// KindPerf is a shorter run under perf stat, which slows some servers
	// down: only its system calls per request are used.
	KindPerf = "perf"
)

// Thresholds of the flags and of rejection.
const (
	// SaturatedPct is the busy share of its CPUs at which a side is flagged
	// as the limit (S for the server, C for the client).
	SaturatedPct = 85
	// MaxStealPct is the hypervisor steal above which a run is rejected
	// (left out of the medians, flagged T) when a clean repeat exists.
	MaxStealPct = 5
	// MaxOtherPct is how much CPU (percent of one) other processes may
	// use during a run before it is rejected as disturbed (flagged N) when
	// a clean repeat exists.
	MaxOtherPct = 10
)

// Run is one line of a raw file.
type Run struct {
	Kind       string `json:"kind"`
	Server     string `json:"server"`
	Scenario   string `json:"scenario"`
	Repeat     int    `json:"repeat"`
	ServerExit int    `json:"server_exit"`
	Load       Load   `json:"load"`
}

// Load is the part of examples/bench/load's JSON result that the table uses.
type Load struct {
	Conns      int     `json:"conns"`
	Bytes      int     `json:"bytes"`
	Pipeline   int     `json:"pipeline"`
	Reconnect  bool    `json:"reconnect"`
	Idle       int     `json:"idle"`      // idle connections asked for
	IdleOpen   int     `json:"idle_open"` // of them, opened; 0 in older raw files
	Requests   uint64  `json:"requests"`
	RPS        float64 `json:"rps"`
	Errors     uint64  `json:"errors"`
	Mismatches uint64  `json:"mismatches"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	P999us     float64 `json:"p999_us"`

	ClientBusyPct     float64 `json:"client_busy_pct"`
	ClientCPUusPerReq float64 `json:"client_cpu_us_per_req"`
	StealPct          float64 `json:"steal_pct"`
	OtherCPUPct       float64 `json:"other_cpu_pct"`

	ServerBusyPct        float64  `json:"server_busy_pct"`
	ServerCPUusPerReq    float64  `json:"server_cpu_us_per_req"`
	ServerCtxswPerReq    float64  `json:"server_ctxsw_per_req"`
	ServerVmHWMKiB       uint64   `json:"server_vmhwm_kib"`
	ServerVmRSSKiB       uint64   `json:"server_vmrss_kib"`
	ServerSyscallsPerReq *float64 `json:"server_syscalls_per_req"`
}

// ReadRuns parses a raw file. Blank lines are skipped; any other line that
// is not a Run is an error naming its line number.
func ReadRuns(r io.Reader) ([]Run, error) {
	var runs []Run
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var run Run
		if err := json.Unmarshal(line, &run); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if run.Kind == "" {
			run.Kind = KindRun
		}
		runs = append(runs, run)
	}
	return runs, sc.Err()
}

// Problems lists every run that failed: errors, mismatched replies, no
// request completed, or a server that did not exit cleanly.
func Problems(runs []Run) []string {
	var out []string
	for _, r := range runs {
		what := fmt.Sprintf("%s %s %s #%d", r.Kind, r.Scenario, r.Server, r.Repeat)
		switch {
		case r.Load.Mismatches > 0:
			out = append(out, fmt.Sprintf("%s: %d replies differed from their requests", what, r.Load.Mismatches))
		case r.Load.Errors > 0:
			out = append(out, fmt.Sprintf("%s: %d connection errors", what, r.Load.Errors))
		case r.Load.Requests == 0:
			out = append(out, what+": no request completed")
		}
		if r.ServerExit != 0 {
			out = append(out, fmt.Sprintf("%s: server exited with status %d", what, r.ServerExit))
		}
	}
	return out
}

// Spread is the median of some repeats and their range.
type Spread struct {
	Med, Min, Max float64
}

func spreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	return Spread{Med: median(s), Min: s[0], Max: s[len(s)-1]}
}

// median of sorted values; the mean of the middle two for an even count.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func medianOf(v []float64) float64 { return spreadOf(v).Med }

// Row is the summary of one server in one scenario.
type Row struct {
	Scenario, Server string
	Runs             int // throughput runs in the medians
	Rejected         int // throughput runs left out for steal or other processes

	RPS    Spread // requests per second
	CPU    Spread // server CPU microseconds per request
	P50us  float64
	P99us  float64
	P999us float64

	CtxswPerReq      float64
	SyscallsPerReq   *float64 // nil when no perf run counted them
	ClientCPUus      float64  // the load generator's CPU microseconds per request
	PeakRSSMiB       float64  // VmHWM
	RSSKiB           float64  // VmRSS at the window's end
	ServerBusyPct    float64
	ClientBusyPct    float64
	Errors           uint64 // summed over all runs, perf runs included
	Mismatches       uint64
	IdleConns        int      // idle connections held open during the runs
	IdleBytesPerConn *float64 // (RSS with IdleConns - RSS without) / IdleConns

	// RPSRatio and CPURatio compare with the baseline server in the same
	// scenario; nil when it has no row there.
	RPSRatio, CPURatio *float64

	Flags string
}

// shape identifies scenarios that differ only in idle connections.
type shape struct {
	conns, bytes, pipeline int
	reconnect              bool
}

// Summarize builds one row per scenario and server, in the order each pair
// first appears in runs, with ratios to the baseline server.
func Summarize(runs []Run, baseline string) []Row {
	type key struct{ scenario, server string }
	var order []key
	byKey := make(map[key][]Run)
	for _, r := range runs {
		k := key{r.Scenario, r.Server}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], r)
	}

	rows := make([]Row, 0, len(order))
	shapes := make(map[key]shape)
	for _, k := range order {
		row, sh := summarizeOne(k.scenario, k.server, byKey[k])
		rows = append(rows, row)
		shapes[k] = sh
	}

	index := make(map[key]int, len(rows))
	for i, r := range rows {
		index[key{r.Scenario, r.Server}] = i
	}
	for i := range rows {
		r := &rows[i]
		if b, ok := index[key{r.Scenario, baseline}]; ok {
			r.RPSRatio = ratio(r.RPS.Med, rows[b].RPS.Med)
			r.CPURatio = ratio(r.CPU.Med, rows[b].CPU.Med)
		}
		if r.IdleConns == 0 {
			continue
		}
		// The same server in the scenario of the same shape without idle
		// connections gives the memory they cost.
		want := shapes[key{r.Scenario, r.Server}]
		for _, o := range rows {
			sh := shapes[key{o.Scenario, o.Server}]
			if o.Server == r.Server && o.IdleConns == 0 && sh == want && o.Runs > 0 {
				v := (r.RSSKiB - o.RSSKiB) * 1024 / float64(r.IdleConns)
				r.IdleBytesPerConn = &v
				break
			}
		}
	}
	return rows
}

func ratio(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	v := a / b
	return &v
}

// summarizeOne reduces the runs of one server in one scenario.
func summarizeOne(scenario, server string, runs []Run) (Row, shape) {
	row := Row{Scenario: scenario, Server: server}
	var clean, rejected []Run
	var stolen, disturbed bool
	var syscalls []float64
	var sh shape
	for _, r := range runs {
		row.Errors += r.Load.Errors
		row.Mismatches += r.Load.Mismatches
		if r.ServerExit != 0 {
			row.Errors++
		}
		switch r.Kind {
		case KindPerf:
			if r.Load.ServerSyscallsPerReq != nil {
				syscalls = append(syscalls, *r.Load.ServerSyscallsPerReq)
			}
		case KindRun:
			sh = shape{r.Load.Conns, r.Load.Bytes, r.Load.Pipeline, r.Load.Reconnect}
			row.IdleConns = r.Load.IdleOpen
			if row.IdleConns == 0 {
				row.IdleConns = r.Load.Idle // a raw file from before idle_open
			}
			switch {
			case r.Load.StealPct > MaxStealPct:
				stolen = true
				rejected = append(rejected, r)
			case r.Load.OtherCPUPct > MaxOtherPct:
				disturbed = true
				rejected = append(rejected, r)
			default:
				clean = append(clean, r)
			}
		}
	}
	used := clean
	if len(used) == 0 {
		used = rejected // nothing better: keep them, flagged
	} else {
		row.Rejected = len(rejected)
	}
	row.Runs = len(used)
	pick := func(f func(Load) float64) []float64 {
		v := make([]float64, len(used))
		for i, r := range used {
			v[i] = f(r.Load)
		}
		return v
	}
	row.RPS = spreadOf(pick(func(l Load) float64 { return l.RPS }))
	row.CPU = spreadOf(pick(func(l Load) float64 { return l.ServerCPUusPerReq }))
	row.P50us = medianOf(pick(func(l Load) float64 { return l.P50us }))
	row.P99us = medianOf(pick(func(l Load) float64 { return l.P99us }))
	row.P999us = medianOf(pick(func(l Load) float64 { return l.P999us }))
	row.CtxswPerReq = medianOf(pick(func(l Load) float64 { return l.ServerCtxswPerReq }))
	row.ClientCPUus = medianOf(pick(func(l Load) float64 { return l.ClientCPUusPerReq }))
	row.PeakRSSMiB = medianOf(pick(func(l Load) float64 { return float64(l.ServerVmHWMKiB) / 1024 }))
	row.RSSKiB = medianOf(pick(func(l Load) float64 { return float64(l.ServerVmRSSKiB) }))
	row.ServerBusyPct = medianOf(pick(func(l Load) float64 { return l.ServerBusyPct }))
	row.ClientBusyPct = medianOf(pick(func(l Load) float64 { return l.ClientBusyPct }))
	if len(syscalls) > 0 {
		v := medianOf(syscalls)
		row.SyscallsPerReq = &v
	}

	if row.Runs > 0 && row.ServerBusyPct >= SaturatedPct {
		row.Flags += "S"
	}
	if row.Runs > 0 && row.ClientBusyPct >= SaturatedPct {
		row.Flags += "C"
	}
	if row.Errors > 0 || row.Mismatches > 0 {
		row.Flags += "E"
	}
	if stolen {
		row.Flags += "T"
	}
	if disturbed {
		row.Flags += "N"
	}
	return row, sh
}
