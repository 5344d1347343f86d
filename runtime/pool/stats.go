package pool

//go:generate go run github.com/percore/percore/internal/gen/stats -target pool

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/percore/percore/internal/seqlock"
)

// State and Statistics, their merges, the index constants (sGetsDirect,
// ...) and loadStats and storeStats are generated into stats_gen.go from
// the one definition of the counters, internal/gen/stats/table.go; so are
// their metrics (package runtime/metrics).

// published is a Local's State and Statistics as of the end of its loop's
// last turn: written by the loop (Local.publish, an OnPublish function),
// read by Pool.Snapshot from any goroutine under a sequence lock, so that
// a snapshot never mixes two turns.
type published struct {
	seq  seqlock.Seq
	vals [numStats]atomic.Uint64
	last [numStats]uint64 // what vals holds, for the loop alone
}

// publish publishes l's numbers. It runs on the loop's thread between
// callbacks, where the conservation law holds; a turn that changed
// nothing costs a comparison of the values and no store.
func (l *Local[C]) publish() {
	var v [numStats]uint64
	st, s := l.State(), l.st
	storeStats(&v, &st, &s)
	l.pub.seq.Publish(l.pub.vals[:], l.pub.last[:], v[:])
}

// snapshot returns what l published last. It is safe for concurrent use.
func (l *Local[C]) snapshot() (State, Statistics) {
	var v [numStats]uint64
	l.pub.seq.Read(l.pub.vals[:], v[:])
	var st State
	var s Statistics
	loadStats(&v, &st, &s)
	return st, s
}

// String formats s on one line.
func (s State) String() string {
	return fmt.Sprintf("connections %d (idle %d, in use %d) connecting %d waiters %d",
		s.Connections, s.Idle, s.Connections-s.Idle, s.Connecting, s.Waiters)
}

// Closed returns the number of connections closed, for every cause.
func (s Statistics) Closed() uint64 {
	return s.ClosedBroken + s.ClosedInvalid + s.ClosedIdleTimeout + s.ClosedMaxLifetime +
		s.ClosedCleared + s.ClosedOnClose
}

// Gets returns the number of gets that have ended.
func (s Statistics) Gets() uint64 {
	return s.GetsDirect + s.GetsWaited + s.GetsTimedOut + s.GetsFailed
}

// AverageWait returns WaitTime divided by GetsWaited (zero without any).
func (s Statistics) AverageWait() time.Duration {
	if s.GetsWaited == 0 {
		return 0
	}
	return s.WaitTime / time.Duration(s.GetsWaited)
}

// String formats s on one line.
func (s Statistics) String() string {
	return fmt.Sprintf("gets direct %d waited %d timed out %d failed %d (avg wait %v); "+
		"created %d connect errors %d; closed %d (broken %d invalid %d idle %d lifetime %d cleared %d on close %d)",
		s.GetsDirect, s.GetsWaited, s.GetsTimedOut, s.GetsFailed, s.AverageWait(),
		s.Created, s.ConnectErrors, s.Closed(), s.ClosedBroken, s.ClosedInvalid,
		s.ClosedIdleTimeout, s.ClosedMaxLifetime, s.ClosedCleared, s.ClosedOnClose)
}

// cause is why a connection was closed: one of the Closed counters.
type cause uint8

const (
	causeNone cause = iota
	causeBroken
	causeInvalid
	causeIdleTimeout
	causeMaxLifetime
	causeCleared
	causeOnClose
)

// count adds one to the counter of cause c.
func (s *Statistics) count(c cause) {
	switch c {
	case causeBroken:
		s.ClosedBroken++
	case causeInvalid:
		s.ClosedInvalid++
	case causeIdleTimeout:
		s.ClosedIdleTimeout++
	case causeMaxLifetime:
		s.ClosedMaxLifetime++
	case causeCleared:
		s.ClosedCleared++
	case causeOnClose:
		s.ClosedOnClose++
	}
}
