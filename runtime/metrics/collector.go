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

//go:generate go run github.com/percore/percore/internal/gen/stats -target metrics

// statMetric is one exported runtime.Stats field. The table of them,
// statMetrics, and statsNotExported are generated into stats_gen.go from
// the one definition of the counters (internal/gen/stats/table.go), with
// the pool's; TestEveryStatsField checks that every field of runtime.Stats
// moves exactly its own metric.
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

// Collector is a prometheus.Collector over a runtime's loops. It reads the
// loops' published Stats when it is collected and keeps nothing between
// scrapes. Its methods are safe for concurrent use.
type Collector struct {
	loops []loopSeries
	descs []*prometheus.Desc // statMetrics' descriptors, in their order
	info  *prometheus.Desc
	// returns, returned and returnTook are the process's returns after
	// storms (runtime.HeapReturns): one series each, without loop labels.
	returns, returned, returnTook *prometheus.Desc
}

// heapReturns reads the process's returns after storms; tests replace it.
var heapReturns = runtime.HeapReturns

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
	c.returns = prometheus.NewDesc(namespace+"_heap_returns_total",
		"The process's returns after storms (Config.ReturnAfterStorm): a collection and the heap's free pages given back, once a storm of new connections settled.", nil, nil)
	c.returned = prometheus.NewDesc(namespace+"_heap_returned_bytes_total",
		"The bytes the process's returns after storms gave back to the kernel.", nil, nil)
	c.returnTook = prometheus.NewDesc(namespace+"_heap_return_seconds_total",
		"The time the process's returns after storms took (the collection and the scavenge), summed.", nil, nil)
	return c
}

// Describe sends the descriptors of every metric the collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.info
	ch <- c.returns
	ch <- c.returned
	ch <- c.returnTook
}

// Collect reads every loop's Stats and sends one sample per loop and
// metric, and the process's returns after storms.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	r := heapReturns()
	ch <- prometheus.MustNewConstMetric(c.returns, counter, float64(r.Returns))
	ch <- prometheus.MustNewConstMetric(c.returned, counter, float64(r.Bytes))
	ch <- prometheus.MustNewConstMetric(c.returnTook, counter, r.Took.Seconds())
	for _, l := range c.loops {
		s := l.stats()
		for i, m := range statMetrics {
			ch <- prometheus.MustNewConstMetric(c.descs[i], m.kind, m.value(&s), l.labels...)
		}
		ch <- prometheus.MustNewConstMetric(c.info, gauge, 1, append(l.labels[:len(l.labels):len(l.labels)], l.backend)...)
	}
}
