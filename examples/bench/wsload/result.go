//go:build linux

package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/percore/percore/internal/hist"
)

// Result is one run's outcome. Times are microseconds unless named
// otherwise; server_ fields are zero without -server-pid; a field a mode
// does not measure is left out.
type Result struct {
	Mode    string `json:"mode"`
	Addr    string `json:"addr"`
	Conns   int    `json:"conns"`
	Bytes   int    `json:"bytes,omitempty"`
	Problem string `json:"problem,omitempty"`

	Errors      uint64  `json:"errors"`       // connections that failed, messages that could not be sent
	Mismatches  uint64  `json:"mismatches"`   // messages that differed from what was sent, or unexpected ones
	Lost        uint64  `json:"lost"`         // deliveries that never came
	Duplicates  uint64  `json:"duplicates"`   // deliveries that came twice
	Reordered   uint64  `json:"reordered"`    // deliveries out of order
	ShortCounts uint64  `json:"short_counts"` // publishes answered with fewer subscribers than held
	DialRetries uint64  `json:"dial_retries"`
	OpenS       float64 `json:"open_s"` // time to open and subscribe every connection

	// The client's own cost, after every connection is open.
	ClientRSSPerConnBytes float64 `json:"client_rss_per_conn_bytes"`
	ClientRSSKiB          uint64  `json:"client_rss_kib"`
	ClientGoroutines      int     `json:"client_goroutines"`
	ClientCPUS            float64 `json:"client_cpu_s"`

	// idle
	ServerRSSBeforeKiB     uint64  `json:"server_rss_before_kib,omitempty"`
	ServerRSSAfterKiB      uint64  `json:"server_rss_after_kib,omitempty"`
	ServerRSSPerConnBytes  float64 `json:"server_rss_per_conn_bytes,omitempty"`
	ServerThreads          uint64  `json:"server_threads,omitempty"`
	Checked                uint64  `json:"checked,omitempty"` // connections the final publish reached
	ServerPingsSeen        uint64  `json:"server_pings_seen"`
	ServerCPUUsPerDelivery float64 `json:"server_cpu_us_per_delivery,omitempty"`

	// fanout
	Publishes    int     `json:"publishes,omitempty"`
	LatePublish  int     `json:"late_publishes"` // sent more than one -interval after they fell due
	Delivered    uint64  `json:"delivered,omitempty"`
	LatP50us     float64 `json:"lat_p50_us,omitempty"`
	LatP99us     float64 `json:"lat_p99_us,omitempty"`
	LatP999us    float64 `json:"lat_p999_us,omitempty"`
	LatMaxUs     float64 `json:"lat_max_us,omitempty"`
	LastP50us    float64 `json:"last_p50_us,omitempty"` // time until the last subscriber has a publish
	LastP99us    float64 `json:"last_p99_us,omitempty"`
	LastMaxUs    float64 `json:"last_max_us,omitempty"`
	PublishP99us float64 `json:"publish_p99_us,omitempty"` // the POST's own round trip

	// fanout with -restarts (restarts.go)
	Restarts               int       `json:"restarts,omitempty"`
	RestartError           string    `json:"restart_error,omitempty"`
	RestartReadyMs         []float64 `json:"restart_ready_ms,omitempty"` // SIGHUP until the new process serves
	RestartExitMs          []float64 `json:"restart_exit_ms,omitempty"`  // SIGHUP until the old process exited
	PublishesDuringRestart int       `json:"publishes_during_restart,omitempty"`
	LastP99DuringUs        float64   `json:"last_p99_during_restart_us,omitempty"`
	LastMaxDuringUs        float64   `json:"last_max_during_restart_us,omitempty"`
	LastP99OutsideUs       float64   `json:"last_p99_outside_restart_us,omitempty"`
	PublishP99DuringUs     float64   `json:"publish_p99_during_restart_us,omitempty"`
	PublishP99OutsideUs    float64   `json:"publish_p99_outside_restart_us,omitempty"`

	// echo (and fanout: the busy shares, from the first publish until the
	// last delivery or the end of -drain)
	Messages          uint64  `json:"messages,omitempty"`
	MsgsPerS          float64 `json:"msgs_per_s,omitempty"`
	RttP50us          float64 `json:"rtt_p50_us,omitempty"`
	RttP99us          float64 `json:"rtt_p99_us,omitempty"`
	RttMaxUs          float64 `json:"rtt_max_us,omitempty"`
	ServerCPUUsPerMsg float64 `json:"server_cpu_us_per_msg,omitempty"`
	ServerBusyPct     float64 `json:"server_busy_pct,omitempty"`
	ClientBusyPct     float64 `json:"client_busy_pct,omitempty"`

	// storm
	StormS           float64 `json:"storm_s,omitempty"` // from the mass close until every subscriber is subscribed again
	StormRetries     uint64  `json:"storm_retries"`
	LiveBeforeP99us  float64 `json:"live_before_p99_us,omitempty"`
	LiveDuringP50us  float64 `json:"live_during_p50_us,omitempty"`
	LiveDuringP99us  float64 `json:"live_during_p99_us,omitempty"`
	LiveDuringMaxUs  float64 `json:"live_during_max_us,omitempty"`
	LiveDuringRTTs   uint64  `json:"live_during_rtts,omitempty"`
	ServerCPUStormMs float64 `json:"server_cpu_storm_ms,omitempty"`

	// halfopen (and Checked: the connections the server closed)
	ClosedP50us float64 `json:"closed_p50_us,omitempty"` // from opening to the server's close
	ClosedMaxUs float64 `json:"closed_max_us,omitempty"`
}

func (r *Result) problem() string {
	var p []string
	add := func(n uint64, what string) {
		if n > 0 {
			p = append(p, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(r.Errors, "errors")
	add(r.Mismatches, "mismatched or unexpected messages")
	add(r.Lost, "lost deliveries")
	add(r.Duplicates, "duplicate deliveries")
	add(r.Reordered, "deliveries out of order")
	add(r.ShortCounts, "publishes that reached fewer subscribers than held")
	if r.RestartError != "" {
		p = append(p, "restarts: "+r.RestartError)
	}
	if r.Mode == "echo" && r.Messages == 0 {
		p = append(p, "no message echoed in the window")
	}
	if (r.Mode == "idle" || r.Mode == "storm") && r.Checked != uint64(r.Conns) {
		p = append(p, fmt.Sprintf("the final publish reached %d of %d connections", r.Checked, r.Conns))
	}
	return strings.Join(p, ", ")
}

func (r *Result) writeText(w io.Writer) {
	fmt.Fprintf(w, "wsload -mode %s: %d connections to %s, opened in %.2fs (%d dial retries)\n", r.Mode, r.Conns, r.Addr, r.OpenS, r.DialRetries)
	switch r.Mode {
	case "idle":
		fmt.Fprintf(w, "server RSS %d KiB -> %d KiB: %.0f bytes per connection; %d threads\n",
			r.ServerRSSBeforeKiB, r.ServerRSSAfterKiB, r.ServerRSSPerConnBytes, r.ServerThreads)
	case "fanout":
		fmt.Fprintf(w, "%d publishes (%d late), %d deliveries: latency p50 %.0f p99 %.0f p99.9 %.0f max %.0f us\n",
			r.Publishes, r.LatePublish, r.Delivered, r.LatP50us, r.LatP99us, r.LatP999us, r.LatMaxUs)
		fmt.Fprintf(w, "time to the last subscriber: p50 %.0f p99 %.0f max %.0f us; server CPU %.3f us per delivery\n",
			r.LastP50us, r.LastP99us, r.LastMaxUs, r.ServerCPUUsPerDelivery)
	case "echo":
		fmt.Fprintf(w, "%d messages, %.0f/s; round trip p50 %.0f p99 %.0f max %.0f us; server CPU %.3f us per message (busy %.0f%%, client %.0f%%)\n",
			r.Messages, r.MsgsPerS, r.RttP50us, r.RttP99us, r.RttMaxUs, r.ServerCPUUsPerMsg, r.ServerBusyPct, r.ClientBusyPct)
	case "halfopen":
		fmt.Fprintf(w, "the server closed %d of %d half-open connections, p50 %.0f max %.0f us after opening; server RSS %.0f bytes per connection\n",
			r.Checked, r.Conns, r.ClosedP50us, r.ClosedMaxUs, r.ServerRSSPerConnBytes)
	case "storm":
		fmt.Fprintf(w, "all %d resubscribed %.3fs after the mass close (%d retries); live round trip p99 %.0f us before, p50 %.0f p99 %.0f max %.0f us during (%d)\n",
			r.Conns, r.StormS, r.StormRetries, r.LiveBeforeP99us, r.LiveDuringP50us, r.LiveDuringP99us, r.LiveDuringMaxUs, r.LiveDuringRTTs)
	}
	fmt.Fprintf(w, "client: %.0f bytes RSS per connection, %d goroutines, %.2fs CPU\n", r.ClientRSSPerConnBytes, r.ClientGoroutines, r.ClientCPUS)
	if r.Problem != "" {
		fmt.Fprintf(w, "PROBLEM: %s\n", r.Problem)
	}
}

// shards is a histogram many goroutines record into.
type shards struct {
	s [16]struct {
		mu sync.Mutex
		h  hist.Histogram
	}
}

func (s *shards) record(i int, v int64) {
	sh := &s.s[i&15]
	sh.mu.Lock()
	sh.h.Record(v)
	sh.mu.Unlock()
}

func (s *shards) merged() *hist.Histogram {
	h := new(hist.Histogram)
	for i := range s.s {
		s.s[i].mu.Lock()
		h.Merge(&s.s[i].h)
		s.s[i].mu.Unlock()
	}
	return h
}

// us converts a quantile in nanoseconds to microseconds.
func us(h *hist.Histogram, q float64) float64 {
	if h.Count() == 0 {
		return 0
	}
	if q >= 1 {
		return float64(h.Max()) / 1e3
	}
	return math.Round(float64(h.Quantile(q))/10) / 100
}
