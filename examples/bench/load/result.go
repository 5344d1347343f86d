//go:build linux

package main

import (
	"fmt"
	"io"
	"time"

	"github.com/percore/percore/internal/hist"
)

// Result is one run's outcome; -json prints it as one object. Figures "per
// request" divide by Requests, the requests completed inside the window.
// CPU percentages count one fully busy CPU as 100; Busy percentages divide
// by the CPUs the process may run on. OtherCPUPct is the CPU that processes
// other than the generator and the server used meanwhile: a benchmark
// sharing its machine. The server_ fields are zero unless
// -server-pid was given; server_syscalls_per_req is present only with -perf.
type Result struct {
	Engine    string  `json:"engine"`
	Addr      string  `json:"addr"`
	Conns     int     `json:"conns"`
	Bytes     int     `json:"bytes"`
	Pipeline  int     `json:"pipeline"`
	Reconnect bool    `json:"reconnect"`
	Idle      int     `json:"idle"`
	IdleOpen  int     `json:"idle_open"`
	WarmupS   float64 `json:"warmup_s"`
	WindowS   float64 `json:"window_s"`

	Requests    uint64  `json:"requests"`
	RPS         float64 `json:"rps"`
	Errors      uint64  `json:"errors"`
	Mismatches  uint64  `json:"mismatches"`
	Lost        uint64  `json:"lost"`         // UDP: datagrams unanswered in time (warm-up and window)
	Late        uint64  `json:"late"`         // UDP: replies to datagrams already counted lost
	AllRequests uint64  `json:"all_requests"` // warm-up and window
	P50us       float64 `json:"p50_us"`
	P90us       float64 `json:"p90_us"`
	P99us       float64 `json:"p99_us"`
	P999us      float64 `json:"p999_us"`
	MaxUs       float64 `json:"max_us"`
	MeanUs      float64 `json:"mean_us"`

	// Open loop (-rate, -rates): the rate asked for (0 in closed loop),
	// the bound on requests in flight per connection, the requests the
	// pacers released in the window, how many of those were released
	// more than LateSlackUs after they fell due (late sends: the
	// generator behind its own schedule), and the send lag (due time to
	// release) percentiles. Step names the step of a sweep.
	Step         string  `json:"step,omitempty"`
	Rate         float64 `json:"rate"`
	MaxInFlight  int     `json:"max_inflight,omitempty"`
	Paced        uint64  `json:"paced"`
	LateSends    uint64  `json:"late_sends"`
	LateSlackUs  float64 `json:"late_slack_us,omitempty"`
	SendLagP50us float64 `json:"send_lag_p50_us"`
	SendLagP99us float64 `json:"send_lag_p99_us"`
	SendLagMaxUs float64 `json:"send_lag_max_us"`
	Problem      string  `json:"problem,omitempty"` // set in a sweep: what made the step fail
	maxLate      float64
	slack        time.Duration
	latency      *hist.Histogram // the window's latencies, for tests

	ClientCPUs           int      `json:"client_cpus"`
	GOMAXPROCS           int      `json:"client_gomaxprocs"`
	ClientCPUPct         float64  `json:"client_cpu_pct"`
	ClientBusyPct        float64  `json:"client_busy_pct"`
	ClientCPUusPerReq    float64  `json:"client_cpu_us_per_req"`
	ClientSpinIdlePct    float64  `json:"client_spin_idle_pct"`   // -spin: the loops' polling that found nothing, share of the window
	ClientWorkUsPerReq   float64  `json:"client_work_us_per_req"` // CPU per request less that polling
	ClientGaps           uint64   `json:"client_poll_gaps"`       // -spin: polling intervals above 200 us (engine.go, gapLimit)
	ClientGapMs          float64  `json:"client_poll_gap_ms"`     // their sum
	ClientGapMaxUs       float64  `json:"client_poll_gap_max_us"` // the longest
	StealPct             float64  `json:"steal_pct"`
	ClientStealPct       float64  `json:"client_steal_pct"`     // steal on the generator's CPUs (sched.go)
	ClientRunqWaitPct    float64  `json:"client_runq_wait_pct"` // its threads runnable but not running, share of the window
	OtherCPUPct          float64  `json:"other_cpu_pct"`
	ServerPID            int      `json:"server_pid"`
	ServerCPUs           int      `json:"server_cpus"`
	ServerCPUPct         float64  `json:"server_cpu_pct"`
	ServerBusyPct        float64  `json:"server_busy_pct"`
	ServerCPUusPerReq    float64  `json:"server_cpu_us_per_req"`
	ServerCtxswPerReq    float64  `json:"server_ctxsw_per_req"`
	ServerStealPct       float64  `json:"server_steal_pct"`
	ServerRunqWaitPct    float64  `json:"server_runq_wait_pct"`
	ServerThreads        uint64   `json:"server_threads"`
	ServerVmHWMKiB       uint64   `json:"server_vmhwm_kib"`
	ServerVmRSSKiB       uint64   `json:"server_vmrss_kib"`
	ServerSyscallsPerReq *float64 `json:"server_syscalls_per_req,omitempty"`
}

// fill computes the figures from the merged latency histogram, the totals,
// and the samples taken at the window's edges.
func (r *Result) fill(h *hist.Histogram, t Totals, idleErrors uint64, w0, w1 windowSample) {
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	r.latency = h
	r.Requests = h.Count()
	r.AllRequests = t.Requests
	r.Errors = t.Errors + idleErrors
	r.Mismatches = t.Mismatches
	r.Lost, r.Late = t.Lost, t.Late
	r.P50us, r.P90us = us(h.Quantile(0.5)), us(h.Quantile(0.9))
	r.P99us, r.P999us = us(h.Quantile(0.99)), us(h.Quantile(0.999))
	r.MaxUs, r.MeanUs = us(h.Max()), h.Mean()/1e3
	r.StealPct = stealPct(w0.mach, w1.mach)
	if r.WindowS <= 0 {
		return
	}
	r.RPS = float64(r.Requests) / r.WindowS
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / r.WindowS }
	perReq := func(d time.Duration) float64 {
		if r.Requests == 0 {
			return 0
		}
		return d.Seconds() * 1e6 / float64(r.Requests)
	}
	self := w1.self - w0.self
	r.ClientCPUPct = pct(self)
	r.ClientBusyPct = r.ClientCPUPct / float64(max(r.ClientCPUs, 1))
	r.ClientCPUusPerReq = perReq(self)
	var srv time.Duration
	if r.ServerPID != 0 && w0.err == nil && w1.err == nil {
		srv = w1.server.cpu - w0.server.cpu
	}
	r.OtherCPUPct = pct(otherCPU(w0.mach, w1.mach, self+srv))
	if r.ServerPID == 0 || w0.err != nil || w1.err != nil {
		return
	}
	r.ServerCPUPct = pct(srv)
	r.ServerBusyPct = r.ServerCPUPct / float64(max(r.ServerCPUs, 1))
	r.ServerCPUusPerReq = perReq(srv)
	if r.Requests > 0 {
		r.ServerCtxswPerReq = float64(w1.server.ctxsw-w0.server.ctxsw) / float64(r.Requests)
	}
}

// fillOpen computes the open-loop figures from the merged send-lag
// histogram and the totals.
func (r *Result) fillOpen(lag *hist.Histogram, t Totals) {
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	r.Paced, r.LateSends = t.Paced, t.LateSends
	r.LateSlackUs = float64(r.slack) / 1e3
	r.SendLagP50us, r.SendLagP99us, r.SendLagMaxUs = us(lag.Quantile(0.5)), us(lag.Quantile(0.99)), us(lag.Max())
	if r.WindowS > 0 {
		r.ClientSpinIdlePct = 100 * t.SpinIdle.Seconds() / r.WindowS
	}
	r.ClientGaps, r.ClientGapMs, r.ClientGapMaxUs = t.Gaps, t.GapTime.Seconds()*1e3, us(int64(t.GapMax))
	if r.Requests > 0 {
		r.ClientWorkUsPerReq = max(r.ClientCPUusPerReq-t.SpinIdle.Seconds()*1e6/float64(r.Requests), 0)
	}
}

// problem says what makes the run a failure, or "" for a clean run.
func (r *Result) problem() string {
	switch {
	case r.Mismatches > 0:
		return fmt.Sprintf("%d replies differed from their requests", r.Mismatches)
	case r.Errors > 0:
		return fmt.Sprintf("%d connection errors", r.Errors)
	case r.Requests == 0:
		return "no request completed in the measurement window"
	case r.Rate > 0 && float64(r.LateSends) > r.maxLate*float64(r.Paced):
		return fmt.Sprintf("invalid run: the generator fell behind its schedule: %d of %d requests (%.2f%%, more than %.2f%%) "+
			"were released more than %v after they fell due, so the latencies include its own delay; give it more CPU or ask a lower rate",
			r.LateSends, r.Paced, 100*float64(r.LateSends)/float64(max(r.Paced, 1)), 100*r.maxLate, r.slack)
	}
	return ""
}

// writeText prints the result for a person.
func (r *Result) writeText(w io.Writer) {
	mode := fmt.Sprintf("%d in flight per connection", r.Pipeline)
	switch {
	case r.Reconnect:
		mode = "a new connection per request"
	case r.Rate > 0:
		mode = fmt.Sprintf("open loop at %.0f req/s, at most %d in flight per connection", r.Rate, r.MaxInFlight)
	}
	fmt.Fprintf(w, "engine %s, %s, %d connections (+%d idle), %d B, %s\n",
		r.Engine, r.Addr, r.Conns, r.IdleOpen, r.Bytes, mode)
	fmt.Fprintf(w, "requests   %d in %.2fs: %.0f req/s  (errors %d, mismatches %d)\n",
		r.Requests, r.WindowS, r.RPS, r.Errors, r.Mismatches)
	if isUDP(r.Addr) {
		fmt.Fprintf(w, "datagrams  lost %d, late %d (timeout %v, warm-up included)\n", r.Lost, r.Late, udpTimeout)
	}
	fmt.Fprintf(w, "latency us p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  mean %.1f\n",
		r.P50us, r.P90us, r.P99us, r.P999us, r.MaxUs, r.MeanUs)
	if r.Rate > 0 {
		fmt.Fprintf(w, "open loop  latency from each request's due time; achieved %.1f%% of the rate; send lag us p50 %.1f  p99 %.1f  max %.1f; late sends %d of %d (over %.0f us)\n",
			100*r.RPS/r.Rate, r.SendLagP50us, r.SendLagP99us, r.SendLagMaxUs, r.LateSends, r.Paced, r.LateSlackUs)
	}
	fmt.Fprintf(w, "client     %.2f us CPU/req, %.0f%% busy of %d CPUs\n",
		r.ClientCPUusPerReq, r.ClientBusyPct, r.ClientCPUs)
	if r.ClientSpinIdlePct > 0 {
		fmt.Fprintf(w, "client     polling (-spin): %.0f%% of the window found nothing; %.2f us CPU/req without it; %d gaps over %v (%.1f ms, longest %.0f us)\n",
			r.ClientSpinIdlePct, r.ClientWorkUsPerReq, r.ClientGaps, gapLimit, r.ClientGapMs, r.ClientGapMaxUs)
	}
	fmt.Fprintf(w, "machine    other processes %.0f%% of a CPU, steal %.1f%%\n", r.OtherCPUPct, r.StealPct)
	fmt.Fprintf(w, "stalls     steal on the client's CPUs %.2f%%, the server's %.2f%%; run-queue wait client %.2f%%, server %.2f%% of the window\n",
		r.ClientStealPct, r.ServerStealPct, r.ClientRunqWaitPct, r.ServerRunqWaitPct)
	if r.ServerPID != 0 {
		fmt.Fprintf(w, "server     %.2f us CPU/req, %.0f%% busy of %d CPUs, %.3f ctxsw/req, %d threads, VmHWM %d KiB, VmRSS %d KiB\n",
			r.ServerCPUusPerReq, r.ServerBusyPct, r.ServerCPUs, r.ServerCtxswPerReq,
			r.ServerThreads, r.ServerVmHWMKiB, r.ServerVmRSSKiB)
	}
	if r.ServerSyscallsPerReq != nil {
		fmt.Fprintf(w, "server     %.3f syscalls/req\n", *r.ServerSyscallsPerReq)
	}
}
