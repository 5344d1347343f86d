// Package metrics exports a percore runtime's counters to Prometheus, and
// serves them with the process's profiles on a side port.
//
// [New] returns a prometheus.Collector over a [runtime.Runtime]'s loops: at
// every scrape it reads each loop's published [runtime.Stats] (Loop.Stats,
// a few atomic loads), so the request path pays nothing for being watched.
// Every series carries the labels loop (the loop's index) and cpu (the CPU
// its thread is pinned to). [NewPool] does the same for a connection pool's
// State and Statistics, summed over the loops, with a pool label.
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
// A pool's collector asks every loop for its pool's numbers (one function
// posted to each loop per scrape) and waits at most PoolConfig.Timeout for
// the answers; a scrape that times out leaves the pool's series out rather
// than export a partial sum that would look like a counter reset, and
// counts the miss in percore_pool_scrape_errors_total.
//
// Importing this package imports net/http/pprof, which registers its
// handlers on http.DefaultServeMux. [Listen] serves its own mux, never that
// one.
package metrics
