//go:build linux

package main

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// loopCounters are a loop's gateway counters: written by the loop only,
// read by the collector at scrape time.
type loopCounters struct {
	upgrades, closes, protocolCloses, heartbeatCloses, pings atomic.Uint64
	delivered, dropped                                       atomic.Uint64
	handedOver, adopted, restartCloses                       atomic.Uint64 // a restart's (handover.go)
	clients, backlog                                         atomic.Uint64 // as of the last heartbeat sweep
}

// collector exports every loop's counters with a loop label, beside the
// runtime's own (runtime/metrics): the seed's three signals are the
// runtime's loop lag (percore_loop_lag_p99_seconds), the work waiting per
// loop (percore_ws_outbound_backlog_bytes, with percore_loop_posted_batch_max)
// and the churn (rate(percore_accepts_total), rate(percore_closes_total),
// rate(percore_ws_upgrades_total)).
type collector struct {
	g     *gateway
	descs []*prometheus.Desc
}

var gatewayMetrics = []struct {
	name, help string
	counter    bool
	get        func(*loopCounters) uint64
}{
	{"percore_ws_upgrades_total", "Connections upgraded to WebSocket.", true, func(n *loopCounters) uint64 { return n.upgrades.Load() }},
	{"percore_ws_closes_total", "WebSocket connections closed, for any reason.", true, func(n *loopCounters) uint64 { return n.closes.Load() }},
	{"percore_ws_protocol_closes_total", "Connections closed for breaking RFC 6455 or a limit (with the close code it gives).", true, func(n *loopCounters) uint64 { return n.protocolCloses.Load() }},
	{"percore_ws_heartbeat_closes_total", "Connections closed for sending nothing, not even a Pong, for two ping intervals.", true, func(n *loopCounters) uint64 { return n.heartbeatCloses.Load() }},
	{"percore_ws_pings_total", "Pings sent to silent connections.", true, func(n *loopCounters) uint64 { return n.pings.Load() }},
	{"percore_ws_delivered_total", "Published messages handed to subscribers.", true, func(n *loopCounters) uint64 { return n.delivered.Load() }},
	{"percore_ws_dropped_total", "Published messages dropped for a subscriber whose outbound queue was at its cap.", true, func(n *loopCounters) uint64 { return n.dropped.Load() }},
	{"percore_ws_handed_over_total", "Clients handed to a new process at a restart, with their subscriptions.", true, func(n *loopCounters) uint64 { return n.handedOver.Load() }},
	{"percore_ws_adopted_total", "Clients adopted from the process this one replaced, with their subscriptions.", true, func(n *loopCounters) uint64 { return n.adopted.Load() }},
	{"percore_ws_restart_closes_total", "Clients a restart could not hand over, closed with 1012 (service restart).", true, func(n *loopCounters) uint64 { return n.restartCloses.Load() }},
	{"percore_ws_clients", "WebSocket connections open, as of the last heartbeat sweep.", false, func(n *loopCounters) uint64 { return n.clients.Load() }},
	{"percore_ws_outbound_backlog_bytes", "Bytes queued for WebSocket clients and not yet taken by the kernel, as of the last heartbeat sweep: the loop's work waiting.", false, func(n *loopCounters) uint64 { return n.backlog.Load() }},
}

func newCollector(g *gateway) *collector {
	c := &collector{g: g}
	for _, m := range gatewayMetrics {
		c.descs = append(c.descs, prometheus.NewDesc(m.name, m.help, []string{"loop"}, nil))
	}
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect reads each loop's counters: atomic loads, nothing asked of a
// loop.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	for loop, n := range c.g.counters {
		id := strconv.Itoa(loop)
		for i, m := range gatewayMetrics {
			kind := prometheus.GaugeValue
			if m.counter {
				kind = prometheus.CounterValue
			}
			ch <- prometheus.MustNewConstMetric(c.descs[i], kind, float64(m.get(n)), id)
		}
	}
}
