package pool

import (
	"fmt"
	"time"
)

// State is what a pool holds right now, on one loop or summed over loops.
type State struct {
	// Loops is the number of per-loop pools summed (1 for a Local).
	Loops int
	// Connections counts open connections: idle, lent out and being
	// validated. Connecting counts connects in progress. Each holds one
	// of the loop's MaxSize slots.
	Connections, Connecting int
	// Idle counts connections ready to lend.
	Idle int
	// Waiters counts gets queued for a connection to come back or a slot
	// to free up.
	Waiters int
}

// Add returns the sum of s and o.
func (s State) Add(o State) State {
	s.Loops += o.Loops
	s.Connections += o.Connections
	s.Connecting += o.Connecting
	s.Idle += o.Idle
	s.Waiters += o.Waiters
	return s
}

// String formats s on one line.
func (s State) String() string {
	return fmt.Sprintf("connections %d (idle %d, in use %d) connecting %d waiters %d",
		s.Connections, s.Idle, s.Connections-s.Idle, s.Connecting, s.Waiters)
}

// Statistics are a pool's counters since it started, on one loop or summed
// over loops. Every counter only grows, and every get ends in exactly one of
// GetsDirect, GetsWaited, GetsTimedOut and GetsFailed. The conservation law
// Created == Closed() + State.Connections holds whenever the loop is between
// callbacks.
type Statistics struct {
	// GetsDirect counts gets served by an idle connection (validated
	// first when test on checkout is on).
	GetsDirect uint64
	// GetsWaited counts gets served by a new connection or by one handed
	// over on return, after waiting for it.
	GetsWaited uint64
	// GetsTimedOut counts gets that ended with ErrTimeout.
	GetsTimedOut uint64
	// GetsFailed counts gets that ended with a connect error or
	// ErrClosed.
	GetsFailed uint64
	// WaitTime is the total time the GetsWaited gets waited.
	WaitTime time.Duration
	// Created counts connections opened; ConnectErrors counts connects
	// that failed (also those that no get was waiting for any more).
	Created, ConnectErrors uint64
	// ClosedBroken counts connections closed because the Manager said
	// they were broken, on return or on checkout.
	ClosedBroken uint64
	// ClosedInvalid counts connections that failed validation on
	// checkout.
	ClosedInvalid uint64
	// ClosedIdleTimeout and ClosedMaxLifetime count connections that
	// expired.
	ClosedIdleTimeout, ClosedMaxLifetime uint64
	// ClosedCleared counts connections closed by Clear (idle ones at
	// once, the others as they come back).
	ClosedCleared uint64
	// ClosedOnClose counts connections closed because the pool was
	// closed or the loop stopped.
	ClosedOnClose uint64
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

// Add returns the sum of s and o.
func (s Statistics) Add(o Statistics) Statistics {
	s.GetsDirect += o.GetsDirect
	s.GetsWaited += o.GetsWaited
	s.GetsTimedOut += o.GetsTimedOut
	s.GetsFailed += o.GetsFailed
	s.WaitTime += o.WaitTime
	s.Created += o.Created
	s.ConnectErrors += o.ConnectErrors
	s.ClosedBroken += o.ClosedBroken
	s.ClosedInvalid += o.ClosedInvalid
	s.ClosedIdleTimeout += o.ClosedIdleTimeout
	s.ClosedMaxLifetime += o.ClosedMaxLifetime
	s.ClosedCleared += o.ClosedCleared
	s.ClosedOnClose += o.ClosedOnClose
	return s
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
