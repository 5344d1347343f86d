//go:build race

package tlsconn_test

// raceEnabled: the race detector makes sync.Pool drop a quarter of what is
// put back, by design, so counts of allocations that the pool saves are
// not deterministic under -race.
const raceEnabled = true
