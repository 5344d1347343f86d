//go:build linux

package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/percore/percore/runtime"
)

// namespace prefixes every metric this package exports.
const namespace = "percore"

// loopLabels are the variable labels of every per-loop series.
var loopLabels = []string{"loop", "cpu"}

// statMetric is one exported runtime.Stats field: the table below is the one
// place that says which field becomes which metric, and TestEveryStatsField
// fails when a field of runtime.Stats is neither in it nor in
// statsNotExported.
type statMetric struct {
	field string // the runtime.Stats field
	name  string // the metric's name without the namespace
	help  string
	kind  prometheus.ValueType
	value func(*runtime.Stats) float64
}

const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

// statMetrics are the per-loop metrics, in the order of runtime.Stats.
var statMetrics = []statMetric{
	{"Accepts", "accepts_total", "Connections the loop accepted.", counter,
		func(s *runtime.Stats) float64 { return float64(s.Accepts) }},
	{"Dials", "dials_total", "Connections the loop dialed (a dial that failed is not counted).", counter,
		func(s *runtime.Stats) float64 { return float64(s.Dials) }},
	{"Closes", "closes_total", "Connections the loop closed, accepted and dialed, for any reason.", counter,
		func(s *runtime.Stats) float64 { return float64(s.Closes) }},
	{"Open", "connections_open", "Connections open on the loop now, dials in progress included.", gauge,
		func(s *runtime.Stats) float64 { return float64(s.Open) }},
	{"AcceptErrors", "accept_errors_total", "Accepts that failed and were retried after a back-off (descriptor or memory shortage while a connection waited, or an error that is not one connection's own).", counter,
		func(s *runtime.Stats) float64 { return float64(s.AcceptErrors) }},
	{"BytesIn", "received_bytes_total", "Payload bytes the loop received.", counter,
		func(s *runtime.Stats) float64 { return float64(s.BytesIn) }},
	{"BytesOut", "sent_bytes_total", "Payload bytes the loop sent.", counter,
		func(s *runtime.Stats) float64 { return float64(s.BytesOut) }},
	{"Turns", "loop_turns_total", "Loop iterations: one kernel wait and the batch of events it returned.", counter,
		func(s *runtime.Stats) float64 { return float64(s.Turns) }},
	{"Completions", "loop_completions_total", "Kernel events the loop handled (io_uring completions, epoll events).", counter,
		func(s *runtime.Stats) float64 { return float64(s.Completions) }},
	{"Syscalls", "loop_syscalls_total", "System calls the loop's thread made (on io_uring nearly all io_uring_enter; on epoll every read, write, accept and epoll_wait).", counter,
		func(s *runtime.Stats) float64 { return float64(s.Syscalls) }},
	{"Waits", "loop_waits_total", "System calls of the loop that waited for the kernel (io_uring_enter with a wait, epoll_wait).", counter,
		func(s *runtime.Stats) float64 { return float64(s.Waits) }},
	{"Posted", "loop_posted_total", "Functions run on the loop from Loop.Post.", counter,
		func(s *runtime.Stats) float64 { return float64(s.Posted) }},
	{"Timers", "loop_timers_total", "Timer functions run on the loop.", counter,
		func(s *runtime.Stats) float64 { return float64(s.Timers) }},
	{"CapHolds", "accept_cap_holds_total", "Times the loop held accepting because it had MaxConns connections.", counter,
		func(s *runtime.Stats) float64 { return float64(s.CapHolds) }},
	{"IdleTimeouts", "idle_timeouts_total", "Connections closed for being idle longer than IdleTimeout.", counter,
		func(s *runtime.Stats) float64 { return float64(s.IdleTimeouts) }},
	{"LifetimeCloses", "lifetime_closes_total", "Connections closed for reaching MaxLifetime.", counter,
		func(s *runtime.Stats) float64 { return float64(s.LifetimeCloses) }},
	{"SlowConsumers", "slow_consumers_total", "Connections closed because their peer did not read their replies (the outbound cap was reached).", counter,
		func(s *runtime.Stats) float64 { return float64(s.SlowConsumers) }},
	{"Pauses", "read_pauses_total", "Times a connection's reads were paused for outbound backpressure.", counter,
		func(s *runtime.Stats) float64 { return float64(s.Pauses) }},
	{"Deferrals", "receive_deferrals_total", "Receives deferred to a later turn by the per-turn fairness budget.", counter,
		func(s *runtime.Stats) float64 { return float64(s.Deferrals) }},
	{"Panics", "handler_panics_total", "Handler panics the loop recovered from (the connection was closed).", counter,
		func(s *runtime.Stats) float64 { return float64(s.Panics) }},
	{"WriteTimeouts", "write_timeouts_total", "Connections closed because their queued bytes made no progress for WriteTimeout.", counter,
		func(s *runtime.Stats) float64 { return float64(s.WriteTimeouts) }},
	{"LingerTimeouts", "linger_timeouts_total", "Closing connections aborted after Linger with bytes still unsent.", counter,
		func(s *runtime.Stats) float64 { return float64(s.LingerTimeouts) }},
	{"LingerDiscarded", "linger_discarded_bytes_total", "Bytes lingering closes (Conn.CloseLinger) read and dropped.", counter,
		func(s *runtime.Stats) float64 { return float64(s.LingerDiscarded) }},
	{"Paused", "connections_paused", "Connections whose reads are paused for backpressure now.", gauge,
		func(s *runtime.Stats) float64 { return float64(s.Paused) }},
	{"PostRejects", "post_rejects_total", "Loop.Post calls refused because MaxPosted functions were queued.", counter,
		func(s *runtime.Stats) float64 { return float64(s.PostRejects) }},
	{"GoRejects", "go_rejects_total", "Loop.Go calls refused because MaxGo goroutines were running.", counter,
		func(s *runtime.Stats) float64 { return float64(s.GoRejects) }},
	{"GoDropped", "go_dropped_total", "Continuations of Loop.Go that could not run because the loop had stopped.", counter,
		func(s *runtime.Stats) float64 { return float64(s.GoDropped) }},
	{"GoRunning", "go_running", "Loop.Go goroutines running now.", gauge,
		func(s *runtime.Stats) float64 { return float64(s.GoRunning) }},
	{"PooledBytes", "outbound_pooled_bytes", "Size of the outbound buffers the loop keeps for reuse now.", gauge,
		func(s *runtime.Stats) float64 { return float64(s.PooledBytes) }},
	{"MappedBytes", "outbound_mapped_bytes", "Size of the outbound buffers held as anonymous mappings now (16 KiB and larger, in use or pooled).", gauge,
		func(s *runtime.Stats) float64 { return float64(s.MappedBytes) }},
	{"CQOverflows", "cq_overflows_total", "Loop turns that found the io_uring completion queue overflowed (nothing is lost; a steady rate says RingEntries is too small).", counter,
		func(s *runtime.Stats) float64 { return float64(s.CQOverflows) }},
	{"CallsMade", "loop_calls_made_total", "Cross-loop calls this loop made (Loop.Call).", counter,
		func(s *runtime.Stats) float64 { return float64(s.CallsMade) }},
	{"CallsRun", "loop_calls_run_total", "Cross-loop calls other loops made that this loop ran.", counter,
		func(s *runtime.Stats) float64 { return float64(s.CallsRun) }},
	{"CallBatches", "loop_call_batches_total", "Batches the cross-loop calls this loop ran came in: one per caller per turn, each with one wake-up.", counter,
		func(s *runtime.Stats) float64 { return float64(s.CallBatches) }},
	{"CallRejects", "loop_call_rejects_total", "Cross-loop calls this loop refused with ErrLoopBusy: it held MaxHeldCalls for a target that was behind.", counter,
		func(s *runtime.Stats) float64 { return float64(s.CallRejects) }},
	{"FileOps", "file_ops_total", "File operations handed to the kernel or the file workers.", counter,
		func(s *runtime.Stats) float64 { return float64(s.FileOps) }},
	{"FilesOpen", "files_open", "Files open on the loop now.", gauge,
		func(s *runtime.Stats) float64 { return float64(s.FilesOpen) }},
	{"FileBytesRead", "file_read_bytes_total", "Bytes read from files.", counter,
		func(s *runtime.Stats) float64 { return float64(s.FileBytesRead) }},
	{"FileBytesWritten", "file_written_bytes_total", "Bytes written to files.", counter,
		func(s *runtime.Stats) float64 { return float64(s.FileBytesWritten) }},
	{"FileSyncs", "file_syncs_total", "fsyncs and fdatasyncs completed (with those linked to a write).", counter,
		func(s *runtime.Stats) float64 { return float64(s.FileSyncs) }},
	{"FileOffloaded", "file_offloaded_total", "File operations run on the loop's file worker threads (epoll, or io_uring without the opcodes).", counter,
		func(s *runtime.Stats) float64 { return float64(s.FileOffloaded) }},
	{"FileSendBytes", "file_send_bytes_total", "Bytes Conn.SendFile sent.", counter,
		func(s *runtime.Stats) float64 { return float64(s.FileSendBytes) }},
	{"FileSendFallbacks", "file_send_fallbacks_total", "File sends that read and sent instead of splice or sendfile.", counter,
		func(s *runtime.Stats) float64 { return float64(s.FileSendFallbacks) }},
	{"PacketsIn", "loop_packets_received_total", "Datagrams received on the loop's UDP sockets.", counter,
		func(s *runtime.Stats) float64 { return float64(s.PacketsIn) }},
	{"PacketsOut", "loop_packets_sent_total", "Datagrams the kernel took from the loop's UDP sockets.", counter,
		func(s *runtime.Stats) float64 { return float64(s.PacketsOut) }},
	{"PacketsTruncated", "loop_packets_truncated_total", "Datagrams larger than the packet buffer size, truncated by the kernel.", counter,
		func(s *runtime.Stats) float64 { return float64(s.PacketsTruncated) }},
	{"PacketDrops", "loop_packet_send_drops_total", "Datagrams dropped because the send queue (MaxPacketQueue) was full.", counter,
		func(s *runtime.Stats) float64 { return float64(s.PacketDrops) }},
	{"PacketErrors", "loop_packet_errors_total", "Datagram sends and receives the kernel failed (ICMP errors, unreachable destinations); the socket goes on.", counter,
		func(s *runtime.Stats) float64 { return float64(s.PacketErrors) }},
	{"PacketsLost", "loop_packets_lost_total", "Datagrams the kernel dropped for want of room in a socket's receive buffer (SO_RXQ_OVFL).", counter,
		func(s *runtime.Stats) float64 { return float64(s.PacketsLost) }},
	{"PacketsCoalesced", "loop_packets_coalesced_total", "Receives that carried several datagrams of one sender at once (UDP_GRO).", counter,
		func(s *runtime.Stats) float64 { return float64(s.PacketsCoalesced) }},
	{"PacketsSegmented", "loop_packets_segmented_total", "Sends that carried several datagrams to one destination at once (UDP_SEGMENT).", counter,
		func(s *runtime.Stats) float64 { return float64(s.PacketsSegmented) }},
	{"HandedOver", "loop_connections_handed_over_total", "Connections of shared listeners (Unix, inherited) this loop accepted and handed to another loop.", counter,
		func(s *runtime.Stats) float64 { return float64(s.HandedOver) }},
	{"LagP50", "loop_lag_p50_seconds", "Median loop lag over the last window of about a second: from the kernel returning a batch of events to the last of them handled.", gauge,
		func(s *runtime.Stats) float64 { return s.LagP50.Seconds() }},
	{"LagP99", "loop_lag_p99_seconds", "99th percentile of the loop lag over the last window of about a second.", gauge,
		func(s *runtime.Stats) float64 { return s.LagP99.Seconds() }},
	{"LagMax", "loop_lag_max_seconds", "Largest loop lag over the last window of about a second.", gauge,
		func(s *runtime.Stats) float64 { return s.LagMax.Seconds() }},
	{"PostedBatchMax", "loop_posted_batch_max", "Largest batch of posted functions the loop drained at once over the last window of about a second.", gauge,
		func(s *runtime.Stats) float64 { return float64(s.PostedBatchMax) }},
}

// statsNotExported are the runtime.Stats fields with no metric of their
// own, and why.
var statsNotExported = map[string]string{
	"Loops": "always 1 for one loop's Stats; count(percore_loop_info) counts the loops",
}

// Collector is a prometheus.Collector over a runtime's loops. It reads the
// loops' published Stats when it is collected and keeps nothing between
// scrapes. Its methods are safe for concurrent use.
type Collector struct {
	loops []loopSeries
	descs []*prometheus.Desc // statMetrics' descriptors, in their order
	info  *prometheus.Desc
}

// loopSeries is one loop and its label values.
type loopSeries struct {
	stats   func() runtime.Stats
	labels  []string // loop, cpu
	backend string
}

// New returns a collector over rt's loops (rt.Loops(), fixed for the
// runtime's life).
func New(rt *runtime.Runtime) *Collector {
	var loops []loopSeries
	for _, l := range rt.Loops() {
		loops = append(loops, loopSeries{
			stats:   l.Stats,
			labels:  []string{strconv.Itoa(l.ID()), strconv.Itoa(l.CPU())},
			backend: l.Backend().String(),
		})
	}
	return newCollector(loops)
}

func newCollector(loops []loopSeries) *Collector {
	c := &Collector{loops: loops}
	for _, m := range statMetrics {
		c.descs = append(c.descs, prometheus.NewDesc(namespace+"_"+m.name, m.help, loopLabels, nil))
	}
	c.info = prometheus.NewDesc(namespace+"_loop_info",
		"A loop of the runtime, always 1; the backend label names the loop's backend (io_uring or epoll).",
		append(loopLabels[:len(loopLabels):len(loopLabels)], "backend"), nil)
	return c
}

// Describe sends the descriptors of every metric the collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.info
}

// Collect reads every loop's Stats and sends one sample per loop and
// metric.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.loops {
		s := l.stats()
		for i, m := range statMetrics {
			ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&s), l.labels...)
		}
		ch <- prometheus.MustNewConstMetric(c.info, gauge, 1, append(l.labels[:len(l.labels):len(l.labels)], l.backend)...)
	}
}
