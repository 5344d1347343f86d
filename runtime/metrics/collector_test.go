package metrics_test

import (
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/metrics"
)

// loopMetrics are the names and types of the per-loop metrics: the names
// docs/operations.md and docs/grafana-percore.json use.
var loopMetrics = map[string]dto.MetricType{
	"percore_accepts_total":                      dto.MetricType_COUNTER,
	"percore_dials_total":                        dto.MetricType_COUNTER,
	"percore_closes_total":                       dto.MetricType_COUNTER,
	"percore_connections_open":                   dto.MetricType_GAUGE,
	"percore_accept_errors_total":                dto.MetricType_COUNTER,
	"percore_received_bytes_total":               dto.MetricType_COUNTER,
	"percore_sent_bytes_total":                   dto.MetricType_COUNTER,
	"percore_loop_turns_total":                   dto.MetricType_COUNTER,
	"percore_loop_completions_total":             dto.MetricType_COUNTER,
	"percore_loop_syscalls_total":                dto.MetricType_COUNTER,
	"percore_loop_waits_total":                   dto.MetricType_COUNTER,
	"percore_loop_posted_total":                  dto.MetricType_COUNTER,
	"percore_loop_timers_total":                  dto.MetricType_COUNTER,
	"percore_accept_cap_holds_total":             dto.MetricType_COUNTER,
	"percore_idle_timeouts_total":                dto.MetricType_COUNTER,
	"percore_lifetime_closes_total":              dto.MetricType_COUNTER,
	"percore_slow_consumers_total":               dto.MetricType_COUNTER,
	"percore_writes_refused_total":               dto.MetricType_COUNTER,
	"percore_read_pauses_total":                  dto.MetricType_COUNTER,
	"percore_receive_deferrals_total":            dto.MetricType_COUNTER,
	"percore_handler_panics_total":               dto.MetricType_COUNTER,
	"percore_write_timeouts_total":               dto.MetricType_COUNTER,
	"percore_linger_timeouts_total":              dto.MetricType_COUNTER,
	"percore_linger_discarded_bytes_total":       dto.MetricType_COUNTER,
	"percore_connections_paused":                 dto.MetricType_GAUGE,
	"percore_post_rejects_total":                 dto.MetricType_COUNTER,
	"percore_go_rejects_total":                   dto.MetricType_COUNTER,
	"percore_go_dropped_total":                   dto.MetricType_COUNTER,
	"percore_go_running":                         dto.MetricType_GAUGE,
	"percore_outbound_pooled_bytes":              dto.MetricType_GAUGE,
	"percore_outbound_mapped_bytes":              dto.MetricType_GAUGE,
	"percore_cq_overflows_total":                 dto.MetricType_COUNTER,
	"percore_loop_calls_made_total":              dto.MetricType_COUNTER,
	"percore_loop_calls_run_total":               dto.MetricType_COUNTER,
	"percore_loop_call_batches_total":            dto.MetricType_COUNTER,
	"percore_loop_call_rejects_total":            dto.MetricType_COUNTER,
	"percore_loop_lag_p50_seconds":               dto.MetricType_GAUGE,
	"percore_loop_lag_p99_seconds":               dto.MetricType_GAUGE,
	"percore_loop_lag_max_seconds":               dto.MetricType_GAUGE,
	"percore_loop_posted_batch_max":              dto.MetricType_GAUGE,
	"percore_loop_info":                          dto.MetricType_GAUGE,
	"percore_loop_packets_received_total":        dto.MetricType_COUNTER,
	"percore_loop_packets_sent_total":            dto.MetricType_COUNTER,
	"percore_loop_packets_truncated_total":       dto.MetricType_COUNTER,
	"percore_loop_packet_send_drops_total":       dto.MetricType_COUNTER,
	"percore_loop_packet_errors_total":           dto.MetricType_COUNTER,
	"percore_loop_packets_lost_total":            dto.MetricType_COUNTER,
	"percore_loop_packets_coalesced_total":       dto.MetricType_COUNTER,
	"percore_loop_packets_segmented_total":       dto.MetricType_COUNTER,
	"percore_loop_connections_handed_over_total": dto.MetricType_COUNTER,
	"percore_handoff_connections_total":          dto.MetricType_COUNTER,
	"percore_handoff_declined_total":             dto.MetricType_COUNTER,
	"percore_handoff_failed_total":               dto.MetricType_COUNTER,
	"percore_adopted_connections_total":          dto.MetricType_COUNTER,

	"percore_file_ops_total":               dto.MetricType_COUNTER,
	"percore_files_open":                   dto.MetricType_GAUGE,
	"percore_file_read_bytes_total":        dto.MetricType_COUNTER,
	"percore_file_written_bytes_total":     dto.MetricType_COUNTER,
	"percore_file_syncs_total":             dto.MetricType_COUNTER,
	"percore_file_offloaded_total":         dto.MetricType_COUNTER,
	"percore_file_send_bytes_total":        dto.MetricType_COUNTER,
	"percore_file_send_fallbacks_total":    dto.MetricType_COUNTER,
	"percore_tls_handshakes_total":         dto.MetricType_COUNTER,
	"percore_tls_handshake_errors_total":   dto.MetricType_COUNTER,
	"percore_tls_handshake_timeouts_total": dto.MetricType_COUNTER,
	"percore_tls_handshakes_in_flight":     dto.MetricType_GAUGE,
	"percore_zero_copy_sends_total":        dto.MetricType_COUNTER,
	"percore_zero_copy_copied_total":       dto.MetricType_COUNTER,
	"percore_zero_copy_fallbacks_total":    dto.MetricType_COUNTER,
	"percore_recv_bundles_total":           dto.MetricType_COUNTER,
	"percore_recv_bundle_buffers_total":    dto.MetricType_COUNTER,
}

// processMetrics are the process-wide metrics: one series each, without
// the loop's labels (the returns after storms are the process's).
var processMetrics = map[string]dto.MetricType{
	"percore_heap_returns_total":        dto.MetricType_COUNTER,
	"percore_heap_returned_bytes_total": dto.MetricType_COUNTER,
	"percore_heap_return_seconds_total": dto.MetricType_COUNTER,
}

func TestCollector(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, b)
		c := metrics.New(rt)

		mfs := gather(t, c)
		if len(mfs) != len(loopMetrics)+len(processMetrics) {
			t.Errorf("%d metric families, want %d", len(mfs), len(loopMetrics)+len(processMetrics))
		}
		for name, typ := range processMetrics {
			mf, ok := mfs[name]
			if !ok {
				t.Errorf("no %s", name)
				continue
			}
			if mf.GetType() != typ || mf.GetHelp() == "" || len(mf.GetMetric()) != 1 || len(mf.GetMetric()[0].GetLabel()) != 0 {
				t.Errorf("%s: %v with help %q and %d series, want one unlabelled %v with help", name, mf.GetType(), mf.GetHelp(), len(mf.GetMetric()), typ)
			}
		}
		for name, typ := range loopMetrics {
			mf, ok := mfs[name]
			if !ok {
				t.Errorf("no %s", name)
				continue
			}
			if mf.GetType() != typ {
				t.Errorf("%s is a %v, want a %v", name, mf.GetType(), typ)
			}
			if mf.GetHelp() == "" {
				t.Errorf("%s has no help text", name)
			}
			if n := len(mf.GetMetric()); n != len(rt.Loops()) {
				t.Errorf("%s has %d series, want one per loop (%d)", name, n, len(rt.Loops()))
			}
		}
		for _, l := range rt.Loops() {
			want := map[string]string{"loop": strconv.Itoa(l.ID()), "cpu": strconv.Itoa(l.CPU()), "backend": b.String()}
			if got := sum(mfs, "percore_loop_info", want); got != 1 {
				t.Errorf("percore_loop_info%v = %v, want 1", want, got)
			}
		}

		const n, size = 100, 512
		echoes(t, rt, n, size)
		pctest.WaitFor(t, "the loops to publish the traffic and the close", func() bool {
			mfs = gather(t, c)
			return sum(mfs, "percore_sent_bytes_total", nil) >= n*size &&
				sum(mfs, "percore_closes_total", nil) >= 1
		})
		for name, least := range map[string]float64{
			"percore_accepts_total":          1,
			"percore_closes_total":           1,
			"percore_received_bytes_total":   n * size,
			"percore_sent_bytes_total":       n * size,
			"percore_loop_turns_total":       n,
			"percore_loop_completions_total": n,
			"percore_loop_syscalls_total":    n,
		} {
			if got := sum(mfs, name, nil); got < least {
				t.Errorf("after %d echoes: %s = %v, want at least %v", n, name, got, least)
			}
		}
		if got := sum(mfs, "percore_connections_open", nil); got != 0 {
			t.Errorf("percore_connections_open = %v after the close, want 0", got)
		}

		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	})
}
