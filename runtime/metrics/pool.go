//go:build linux

package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/percore/percore/runtime/pool"
)

// PoolSource is what a pool collector reads: *pool.Pool[C] implements it
// for every C. Both methods must be safe for concurrent use and must not be
// called on a loop's thread (the collector runs on the scraper's
// goroutine).
type PoolSource interface {
	State(ctx context.Context) (pool.State, error)
	Statistics(ctx context.Context) (pool.Statistics, error)
}

// PoolConfig configures a pool collector. The zero value works: a field's
// zero means its default (the Default constants), and a negative Timeout
// means none.
type PoolConfig struct {
	// Name is the value of the pool label on every series, for a process
	// with several pools. Empty means DefaultPoolName.
	Name string
	// Timeout bounds how long a scrape waits for the loops to report
	// their pool's numbers. Zero means DefaultPoolTimeout; negative means
	// no bound (a scrape waits as long as the loops take).
	Timeout time.Duration
}

// PoolConfig's defaults.
const (
	DefaultPoolName    = "default"
	DefaultPoolTimeout = time.Second
)

// poolMetric is one exported field of pool.Statistics or pool.State, like
// statMetric; TestEveryPoolField checks that every field has one.
type poolMetric struct {
	field string // "Statistics.Field" or "State.Field"
	name  string // without the namespace
	help  string
	kind  prometheus.ValueType
	label string // the value of the metric's one variable label, if any
	value func(*pool.Statistics, *pool.State) float64
}

// poolLabelNames names the one variable label of the pool metrics that
// have one; poolMetric.label is its value.
var poolLabelNames = map[string]string{
	"pool_gets_total":               "result",
	"pool_connections_closed_total": "cause",
}

// poolMetrics are the pool's metrics. The conservation law reads
// percore_pool_connections_created_total ==
// sum(percore_pool_connections_closed_total) + percore_pool_connections.
var poolMetrics = []poolMetric{
	{"Statistics.GetsDirect", "pool_gets_total", "Gets that ended, by result: direct (an idle connection), waited (a new or returned connection after a wait), timed_out, failed (a connect error or a closed pool).", counter, "direct",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.GetsDirect) }},
	{"Statistics.GetsWaited", "pool_gets_total", "", counter, "waited",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.GetsWaited) }},
	{"Statistics.GetsTimedOut", "pool_gets_total", "", counter, "timed_out",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.GetsTimedOut) }},
	{"Statistics.GetsFailed", "pool_gets_total", "", counter, "failed",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.GetsFailed) }},
	{"Statistics.WaitTime", "pool_get_wait_seconds_total", "Total time the gets that waited spent waiting.", counter, "",
		func(s *pool.Statistics, _ *pool.State) float64 { return s.WaitTime.Seconds() }},
	{"Statistics.Created", "pool_connections_created_total", "Connections the pool opened.", counter, "",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.Created) }},
	{"Statistics.ConnectErrors", "pool_connect_errors_total", "Connects that failed.", counter, "",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.ConnectErrors) }},
	{"Statistics.ClosedBroken", "pool_connections_closed_total", "Connections the pool closed, by cause: broken, invalid (failed validation), idle_timeout, max_lifetime, cleared, pool_closed (the pool closed or its loop stopped).", counter, "broken",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.ClosedBroken) }},
	{"Statistics.ClosedInvalid", "pool_connections_closed_total", "", counter, "invalid",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.ClosedInvalid) }},
	{"Statistics.ClosedIdleTimeout", "pool_connections_closed_total", "", counter, "idle_timeout",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.ClosedIdleTimeout) }},
	{"Statistics.ClosedMaxLifetime", "pool_connections_closed_total", "", counter, "max_lifetime",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.ClosedMaxLifetime) }},
	{"Statistics.ClosedCleared", "pool_connections_closed_total", "", counter, "cleared",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.ClosedCleared) }},
	{"Statistics.ClosedOnClose", "pool_connections_closed_total", "", counter, "pool_closed",
		func(s *pool.Statistics, _ *pool.State) float64 { return float64(s.ClosedOnClose) }},
	{"State.Loops", "pool_loops", "Loops that have a pool of their own now.", gauge, "",
		func(_ *pool.Statistics, st *pool.State) float64 { return float64(st.Loops) }},
	{"State.Connections", "pool_connections", "Connections open now (idle, lent and being validated): created minus closed.", gauge, "",
		func(_ *pool.Statistics, st *pool.State) float64 { return float64(st.Connections) }},
	{"State.Connecting", "pool_connecting", "Connects in progress now.", gauge, "",
		func(_ *pool.Statistics, st *pool.State) float64 { return float64(st.Connecting) }},
	{"State.Idle", "pool_idle_connections", "Connections idle, ready to lend, now.", gauge, "",
		func(_ *pool.Statistics, st *pool.State) float64 { return float64(st.Idle) }},
	{"State.Waiters", "pool_waiters", "Gets queued for a connection now.", gauge, "",
		func(_ *pool.Statistics, st *pool.State) float64 { return float64(st.Waiters) }},
}

// poolNotExported are the fields of pool.Statistics and pool.State with no
// metric of their own, and why. None so far.
var poolNotExported = map[string]string{}

// PoolCollector is a prometheus.Collector over a connection pool's State
// and Statistics, summed over the loops. Its methods are safe for
// concurrent use.
type PoolCollector struct {
	p       PoolSource
	timeout time.Duration
	descs   []*prometheus.Desc // poolMetrics' descriptors, in their order
	errDesc *prometheus.Desc
	errors  atomic.Uint64
}

// NewPool returns a collector over p.
func NewPool(p PoolSource, cfg PoolConfig) *PoolCollector {
	if cfg.Name == "" {
		cfg.Name = DefaultPoolName
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultPoolTimeout
	}
	c := &PoolCollector{p: p, timeout: cfg.Timeout}
	constLabels := prometheus.Labels{"pool": cfg.Name}
	byName := map[string]*prometheus.Desc{}
	for _, m := range poolMetrics {
		d, ok := byName[m.name]
		if !ok {
			var labels []string
			if l, ok := poolLabelNames[m.name]; ok {
				labels = []string{l}
			}
			d = prometheus.NewDesc(namespace+"_"+m.name, m.help, labels, constLabels)
			byName[m.name] = d
		}
		c.descs = append(c.descs, d)
	}
	c.errDesc = prometheus.NewDesc(namespace+"_pool_scrape_errors_total",
		"Scrapes that left the pool's series out because the loops did not report within the timeout.",
		nil, constLabels)
	return c
}

// Describe sends the descriptors of every metric the collector exports.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, d := range c.descs {
		if !seen[d] {
			seen[d] = true
			ch <- d
		}
	}
	ch <- c.errDesc
}

// Collect asks the pool's loops for their numbers and sends them. The
// Statistics are read before the State, so between the two reads a
// connection may be created and counted only as live: the conservation law
// holds exactly on a quiet pool.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if c.timeout > 0 { // negative: no bound
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	defer cancel()
	s, err := c.p.Statistics(ctx)
	var st pool.State
	if err == nil {
		st, err = c.p.State(ctx)
	}
	if err == nil {
		for i, m := range poolMetrics {
			var labels []string
			if m.label != "" {
				labels = []string{m.label}
			}
			ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&s, &st), labels...)
		}
	} else {
		c.errors.Add(1)
	}
	ch <- prometheus.MustNewConstMetric(c.errDesc, counter, float64(c.errors.Load()))
}
