// Package metrics exports a percore runtime's counters to Prometheus, and
// serves them with the process's profiles on a side port.
//
// [New] returns a prometheus.Collector over a [runtime.Runtime]'s loops: at
// every scrape it reads each loop's published [runtime.Stats] (Loop.Stats,
// a few atomic loads), so the request path pays nothing for being watched.
// Every series carries the labels loop (the loop's index) and cpu (the CPU
// its thread is pinned to). [NewPool] does the same for a connection pool's
// State and Statistics, summed over the loops (pool.Pool.Snapshot), with a
// pool label.
// [Listen] serves both, with the Go runtime's and the process's own
// collectors, at /metrics, and net/http/pprof at /debug/pprof/, from
// ordinary goroutines that never run on a loop's thread.
//
// The metric names follow Prometheus's naming guide: the percore_ prefix,
// _total on counters, base units (seconds, bytes). docs/operations.md lists
// them with what is normal and what is worth a look, and
// docs/grafana-percore.json is a dashboard over them.
//
// # Caveats
//
// Counters are read as each loop published them at the end of its last
// turn; a loop blocked in a handler publishes nothing until it returns, and
// its loop lag then shows it. The lag percentiles (percore_loop_lag_*) are
// those of the loop's last window of about a second, not a running summary:
// plot them as they are, do not rate() or average them over loops.
//
// A pool's collector reads pool.Pool.Snapshot: what each loop's Local
// published at the end of the loop's last turn, with the same caveat. It
// never asks a loop for anything, so it cannot time out, and each loop's
// numbers are of one moment between its callbacks: the conservation law
// percore_pool_connections_created_total ==
// sum(percore_pool_connections_closed_total) + percore_pool_connections
// holds in every scrape.
//
// The metrics, with their names, kinds and help, are defined once with
// the runtime's and the pool's counters (internal/gen/stats/table.go, see
// docs/decisions/0038-counters-from-one-table.md).
//
// Importing this package imports net/http/pprof, which registers its
// handlers on http.DefaultServeMux. [Listen] serves its own mux, never that
// one.
package metrics
