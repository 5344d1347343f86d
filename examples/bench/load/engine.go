//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/internal/hist"
	percore "github.com/percore/percore/runtime"
)

// Workload is the traffic an Engine generates: Conns connections to Addr,
// each keeping Pipeline requests of Bytes bytes in flight (closed loop), or,
// with Reconnect, opening a new connection for every request. With Rate
// set it is open loop instead (openloop.go): Rate requests per second over
// all connections, each request due at a fixed time whatever the replies
// do, at most MaxInFlight of them in flight on a connection (one with
// Reconnect), Pipeline unused.
type Workload struct {
	Addr        string
	Conns       int
	Bytes       int
	Pipeline    int
	Reconnect   bool
	TLS         bool // the percore engines: every connection is TLS (Loop.DialTLS), unverified, without resumption
	Rate        float64
	MaxInFlight int
	Quantum     time.Duration // open loop: a loop's pacer wakes at most this often (openloop.go)
	Spin        time.Duration // open loop: a percore loop polls instead of sleeping while its next request falls due within this (openloop.go)
	WaitBatch   int           // the percore engines' io_uring loops: Config.WaitBatch (0: off)
	WaitMin     time.Duration // and Config.WaitMin
}

// loopConfig is the runtime configuration of a percore engine's loops on
// backend: no log output, the workload's batched waits (on io_uring; the
// epoll backend ignores them), and no return of the heap after the storm
// of its dials (a load generator's idle memory matters to nobody, and a
// forced collection would stall its loops inside a measured window).
func (wl Workload) loopConfig(backend percore.Backend) percore.Config {
	return percore.Config{
		Backend:          backend,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		WaitBatch:        wl.WaitBatch,
		WaitMin:          wl.WaitMin,
		ReturnAfterStorm: -1,
	}
}

// open reports whether the workload is open loop.
func (wl Workload) open() bool { return wl.Rate > 0 }

// depth returns how many requests one connection may have in flight: the
// ring of send times each engine keeps per connection has this many slots.
func (wl Workload) depth() int {
	switch {
	case wl.Reconnect:
		return 1
	case wl.open():
		return max(wl.MaxInFlight, 1)
	}
	return max(wl.Pipeline, 1)
}

// Engine generates a Workload's traffic. Run opens the connections, drives
// them until ctx is done, and returns once every connection is closed. It
// gets one Worker per unit of concurrency it runs (a goroutine, a loop)
// from rec.NewWorker and reports every completed request, error and mismatch
// there; it builds and checks the requests with newPayload so that every
// engine sends the same bytes and verifies every reply byte for byte. Run
// returns an error only when the engine cannot run at all; failures of single
// connections are counted with Worker.Error and the connection is opened
// again.
type Engine interface {
	Run(ctx context.Context, wl Workload, rec *Recorder) error
}

// engineNames lists the engines engineByName knows, for -help.
const engineNames = "percore (io_uring, else epoll), percore-epoll, std"

// engineByName returns the engine the -engine flag names.
func engineByName(name string) (Engine, error) {
	switch name {
	case "percore", "":
		return percoreEngine{}, nil
	case "percore-epoll":
		return percoreEngine{backend: percore.Epoll}, nil
	case "std":
		return stdEngine{}, nil
	}
	return nil, fmt.Errorf("unknown engine %q (have: %s)", name, engineNames)
}

// Recorder collects what the workers of one run observed. Its measuring flag
// says whether a completed request falls in the measurement window (after the
// warm-up) and so goes into the latency histogram. Slack is how late an
// open-loop request may fall due before its pacer releases it without
// counting as late (set it before the engine runs). Its methods are safe for
// concurrent use; Latency must wait until the engine's Run has returned.
type Recorder struct {
	Slack     time.Duration
	measuring atomic.Bool
	mu        sync.Mutex
	workers   []*Worker
}

// NewWorker returns a new Worker whose counts the Recorder includes. Engines
// call it while setting up, not per request.
func (r *Recorder) NewWorker() *Worker {
	w := &Worker{measuring: &r.measuring, slack: r.Slack}
	r.mu.Lock()
	r.workers = append(r.workers, w)
	r.mu.Unlock()
	return w
}

// setMeasuring starts (true) or ends (false) the measurement window.
func (r *Recorder) setMeasuring(on bool) { r.measuring.Store(on) }

// Totals are counts summed over a Recorder's workers.
type Totals struct {
	Requests   uint64        // completed and verified requests, warm-up included
	Errors     uint64        // connection failures: dial, read, write, early EOF
	Mismatches uint64        // replies that differed from their request
	Lost       uint64        // UDP: datagrams unanswered within udpTimeout
	Late       uint64        // UDP: replies that came after their datagram was counted lost
	Paced      uint64        // open loop: requests released by a pacer, in the window
	LateSends  uint64        // open loop: of those, released more than Slack after their due time
	SpinIdle   time.Duration // open loop with -spin: time the loops polled and found nothing, in the window
	Gaps       uint64        // open loop with -spin: polling intervals above gapLimit, in the window
	GapTime    time.Duration // their sum
	GapMax     time.Duration // the longest
}

// Totals returns the counts so far. It is safe to call while the engine runs
// (the progress line does).
func (r *Recorder) Totals() Totals {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t Totals
	for _, w := range r.workers {
		t.Requests += w.requests.Load()
		t.Errors += w.errors.Load()
		t.Mismatches += w.mismatches.Load()
		t.Lost += w.lost.Load()
		t.Late += w.late.Load()
		t.Paced += w.paced.Load()
		t.LateSends += w.lateSends.Load()
		t.SpinIdle += time.Duration(w.spinIdle.Load())
		t.Gaps += w.gaps.Load()
		t.GapTime += time.Duration(w.gapTime.Load())
		t.GapMax = max(t.GapMax, time.Duration(w.gapMax.Load()))
	}
	return t
}

// Latency merges the workers' histograms of the requests completed inside
// the measurement window. Call it only after the engine's Run has returned.
func (r *Recorder) Latency() *hist.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	var h hist.Histogram
	for _, w := range r.workers {
		h.Merge(&w.hist)
	}
	return &h
}

// SendLag merges the workers' histograms of how late their pacers released
// the requests that fell due in the window (open loop; empty otherwise).
// Call it only after the engine's Run has returned.
func (r *Recorder) SendLag() *hist.Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	var h hist.Histogram
	for _, w := range r.workers {
		if w.lag != nil {
			h.Merge(w.lag)
		}
	}
	return &h
}

// Worker counts what one goroutine or loop of an engine observed. Only its
// owner may call Done and Paced; Error and Mismatch are safe from anywhere.
// Counts are atomic so that the progress line can read them; the histograms
// are not shared until the run ends, so recording a latency takes no lock.
type Worker struct {
	requests   atomic.Uint64
	errors     atomic.Uint64
	mismatches atomic.Uint64
	lost       atomic.Uint64
	late       atomic.Uint64
	paced      atomic.Uint64
	lateSends  atomic.Uint64
	spinIdle   atomic.Int64 // nanoseconds
	gaps       atomic.Uint64
	gapTime    atomic.Int64 // nanoseconds
	gapMax     atomic.Int64 // nanoseconds; only the owner stores it
	measuring  *atomic.Bool
	slack      time.Duration
	hist       hist.Histogram
	lag        *hist.Histogram // open loop only: allocated by the first Paced
}

// Done counts one verified request that took d from its start to its reply:
// from its send in closed loop, from the time it fell due in open loop.
func (w *Worker) Done(d time.Duration) {
	w.requests.Add(1)
	if w.measuring.Load() {
		w.hist.Record(int64(d))
	}
}

// Paced counts one open-loop request that its pacer released lag after it
// fell due; a lag above the Recorder's Slack is the generator falling
// behind its own schedule, which invalidates the run.
func (w *Worker) Paced(lag time.Duration) {
	if !w.measuring.Load() {
		return
	}
	if w.lag == nil {
		w.lag = new(hist.Histogram)
	}
	w.lag.Record(int64(lag))
	w.paced.Add(1)
	if lag > w.slack {
		w.lateSends.Add(1)
	}
}

// SpinIdle counts d of a polling loop's time in which it found nothing to
// do (open loop with -spin), in the window: CPU time, but not the
// generator's work.
func (w *Worker) SpinIdle(d time.Duration) {
	if w.measuring.Load() {
		w.spinIdle.Add(int64(d))
	}
}

// gapLimit is the polling interval above which a polling loop counts a
// gap: a turn takes microseconds, so a longer interval is time the loop did
// not run (its own long turn, an interrupt storm, the hypervisor taking the
// CPU: steal that the kernel accounts only in 10 ms ticks).
const gapLimit = 200 * time.Microsecond

// PollGap counts one polling interval d of a polling loop (open loop with
// -spin), in the window, if it is above gapLimit.
func (w *Worker) PollGap(d time.Duration) {
	if d <= gapLimit || !w.measuring.Load() {
		return
	}
	w.gaps.Add(1)
	w.gapTime.Add(int64(d))
	if int64(d) > w.gapMax.Load() {
		w.gapMax.Store(int64(d))
	}
}

// Error counts one connection failure.
func (w *Worker) Error() { w.errors.Add(1) }

// Mismatch counts one reply that was not the request it answered.
func (w *Worker) Mismatch() { w.mismatches.Add(1) }

// Lost counts one UDP datagram that got no reply in time.
func (w *Worker) Lost() { w.lost.Add(1) }

// Late counts one UDP reply to a datagram already counted lost.
func (w *Worker) Late() { w.late.Add(1) }
