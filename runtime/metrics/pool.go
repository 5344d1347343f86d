//go:build linux

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/percore/percore/runtime/pool"
)

// PoolSource is what a pool collector reads: *pool.Pool[C] implements it
// for every C. Snapshot must be safe for concurrent use and must not wait
// for the loops (the collector runs on the scraper's goroutine).
type PoolSource interface {
	Snapshot() (pool.State, pool.Statistics)
}

// PoolConfig configures a pool collector. The zero value works: a field's
// zero means its default (the Default constants).
type PoolConfig struct {
	// Name is the value of the pool label on every series, for a process
	// with several pools. Empty means DefaultPoolName.
	Name string
}

// DefaultPoolName is the pool label of a collector whose PoolConfig names none.
const DefaultPoolName = "default"

// poolMetric is one exported field of pool.State or pool.Statistics, like
// statMetric; the table of them, poolMetrics, with poolLabelNames and
// poolNotExported, is generated into stats_gen.go, and TestEveryPoolField
// checks that every field moves exactly its own series. The conservation
// law reads percore_pool_connections_created_total ==
// sum(percore_pool_connections_closed_total) + percore_pool_connections,
// in every scrape.
type poolMetric struct {
	field string // "Statistics.Field" or "State.Field"
	name  string // without the namespace
	help  string
	kind  prometheus.ValueType
	label string // the value of the metric's one variable label, if any
	value func(*pool.State, *pool.Statistics) float64
}

// PoolCollector is a prometheus.Collector over a connection pool's State
// and Statistics, summed over the loops. Its methods are safe for
// concurrent use.
type PoolCollector struct {
	p     PoolSource
	descs []*prometheus.Desc // poolMetrics' descriptors, in their order
}

// NewPool returns a collector over p.
func NewPool(p PoolSource, cfg PoolConfig) *PoolCollector {
	if cfg.Name == "" {
		cfg.Name = DefaultPoolName
	}
	c := &PoolCollector{p: p}
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
}

// Collect reads the pool's snapshot (what each loop published at the end
// of its last turn; it never waits for a loop) and sends it.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	st, s := c.p.Snapshot()
	for i, m := range poolMetrics {
		var labels []string
		if m.label != "" {
			labels = []string{m.label}
		}
		ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&st, &s), labels...)
	}
}
