//go:build linux

package runtime

import (
	"errors"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// TestConnSizeClass holds Conn in the 144-byte size class: what every
// open connection costs the runtime (decisions 0065, 0072, 0075, 0078). A
// field added to Conn that most connections do not use belongs in
// connSide, or behind a pointer taken on use as the outbound queue is.
// Each driver's own state is held to its size too: Conn carries both.
func TestConnSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Conn{}); n > 144 {
		t.Fatalf("Conn is %d bytes; want at most 144 (the 144-byte size class): move rarely used state to connSide", n)
	}
	if n := unsafe.Sizeof(uringConn{}); n > 32 {
		t.Fatalf("uringConn is %d bytes; want at most 32", n)
	}
	if n := unsafe.Sizeof(epollConn{}); n > 8 {
		t.Fatalf("epollConn is %d bytes; want at most 8", n)
	}
	// connSide's size is what a TLS connection and one with an idle
	// timeout pay on top of Conn, and what maxSpares bounds (decisions
	// 0075, 0078).
	if n := unsafe.Sizeof(connSide{}); n > 128 {
		t.Fatalf("connSide is %d bytes; want at most 128", n)
	}
}

// TestConnSideDroppedWhenUnused checks that a connection's side state is
// there while something in it is in use and gone once nothing is, and
// that the idle timeout it holds still counts from the last read.
func TestConnSideDroppedWhenUnused(t *testing.T) {
	var closeErr []error
	h := &lingerHandler{closed: &closeErr}
	l, _, clock := newTestLoop(t, Config{IdleTimeout: 10 * time.Second}, h)
	l.acceptResult(fakeFd, 0, 0)
	c := l.conns[0]
	if c.side == nil || c.side.idleTimer == nil {
		t.Fatal("a connection with an idle timeout has no idle timer")
	}
	l.safely("test", func() {
		c.BeginRequest()
		c.SetIdleTimeout(0)
	})
	if c.side == nil || c.inFlight() != 1 {
		t.Fatalf("side %v, %d in flight; want the request kept", c.side, c.inFlight())
	}
	l.safely("test", func() { c.EndRequest() })
	if c.side != nil {
		t.Fatalf("side state %+v kept with nothing in use", *c.side)
	}
	l.safely("test", func() { c.SetMaxLifetime(time.Hour); c.SetMaxLifetime(0) })
	if c.side != nil {
		t.Fatalf("side state %+v kept after the lifetime limit was removed", *c.side)
	}
	// A protocol adapter's value is kept in the side state while it is
	// set (decision 0078), and reads back through a side state shared
	// with other uses.
	partial := &struct{ kept []byte }{}
	l.safely("test", func() { c.SetAdapterValue(partial) })
	if c.side == nil || c.AdapterValue() != partial {
		t.Fatalf("side %v, adapter value %v; want the adapter's value kept beside the connection", c.side, c.AdapterValue())
	}
	l.safely("test", func() { c.BeginRequest(); c.SetAdapterValue(nil) })
	if c.side == nil || c.AdapterValue() != nil {
		t.Fatalf("side %v, adapter value %v; want the request kept and no adapter value", c.side, c.AdapterValue())
	}
	l.safely("test", func() { c.SetAdapterValue(partial); c.EndRequest() })
	if c.side == nil || c.AdapterValue() != partial {
		t.Fatal("the end of a request dropped the side state that holds the adapter's value")
	}
	l.safely("test", func() { c.SetAdapterValue(nil) })
	if c.side != nil {
		t.Fatalf("side state %+v kept after the adapter's value was cleared", *c.side)
	}

	// The idle timeout counts from the last read, with the read's time
	// kept in the side state.
	l.safely("test", func() { c.SetIdleTimeout(10 * time.Second) })
	tick(l, clock, 6*time.Second)
	l.received(c, []byte("x"))
	tick(l, clock, 6*time.Second)
	if c.closed() {
		t.Fatal("closed as idle 6 s after a read; the timeout is 10 s")
	}
	tick(l, clock, 5*time.Second)
	if !c.closed() || len(closeErr) != 1 || !errors.Is(closeErr[0], ErrIdleTimeout) {
		t.Fatalf("closed %v, OnClose %v; want an idle timeout 11 s after the last read", c.closed(), closeErr)
	}
}

// TestStampRoundTrip checks that a stamp stands for the loop's time it
// was taken at.
func TestStampRoundTrip(t *testing.T) {
	l, _, clock := newTestLoop(t, Config{}, nil)
	s0 := l.stamp()
	tick(l, clock, 1500*time.Millisecond)
	s1 := l.stamp()
	if got := l.at(s1).Sub(l.at(s0)); got != 1500*time.Millisecond {
		t.Fatalf("two stamps 1.5 s apart are %v apart", got)
	}
	if !l.at(s1).Equal(l.now) {
		t.Fatalf("at(stamp()) = %v, want the loop's time %v", l.at(s1), l.now)
	}
}

// TestWriteTimerReused: a connection's write timer, let go a second after
// its queue drained, is the one the next connection that writes arms,
// and a closed connection's timers are kept for reuse too.
func TestWriteTimerReused(t *testing.T) {
	var closeErr []error
	h := &lingerHandler{closed: &closeErr}
	l, d, clock := newTestLoop(t, Config{WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute}, h)
	l.acceptResult(fakeFd, 0, 0)
	l.acceptResult(fakeFd+1, 0, 0)
	a, b := l.conns[0], l.conns[1]
	l.safely("test", func() { a.Write([]byte("hello")) })
	first := a.writeTimer
	if first == nil {
		t.Fatal("a write armed no write timer")
	}
	d.take = -1
	d.flush(a)
	tick(l, clock, time.Second)
	if a.writeTimer != nil || len(l.spare.free) != 1 || l.spare.free[0] != first {
		t.Fatalf("drained: write timer %p, spare %v; want none kept and %p spare", a.writeTimer, l.spare.free, first)
	}
	d.take = 0
	l.safely("test", func() { b.Write([]byte("hello")) })
	if b.writeTimer != first || len(l.spare.free) != 0 {
		t.Fatalf("the next write armed %p (spare %v), want the spare %p", b.writeTimer, l.spare.free, first)
	}
	idle := b.side.idleTimer
	l.safely("test", func() { b.Abort() })
	if len(l.spare.free) != 2 || !slices.Contains(l.spare.free, first) || !slices.Contains(l.spare.free, idle) {
		t.Fatalf("closed: spare %v, want its write and idle timers", l.spare.free)
	}
	// The reused timer still times out: a connection that takes nothing.
	l.safely("test", func() { a.Write([]byte("stuck")) })
	for range 11 {
		tick(l, clock, time.Second)
	}
	if !a.closed() || len(closeErr) != 2 || !errors.Is(closeErr[1], ErrWriteTimeout) {
		t.Fatalf("closed %v, OnClose %v; want a write timeout", a.closed(), closeErr)
	}
}

// TestConnSideReused: the side state a connection gives back is the one
// the next connection that needs one takes.
func TestConnSideReused(t *testing.T) {
	l, _, _ := newTestLoop(t, Config{}, &lingerHandler{closed: new([]error)})
	l.acceptResult(fakeFd, 0, 0)
	l.acceptResult(fakeFd+1, 0, 0)
	a, b := l.conns[0], l.conns[1]
	l.safely("test", func() { a.BeginRequest() })
	side := a.side
	l.safely("test", func() { a.EndRequest() })
	if a.side != nil || len(l.spareSides) != 1 {
		t.Fatalf("a's side %p, %d spare; want it given back", a.side, len(l.spareSides))
	}
	l.safely("test", func() { b.SetIdleTimeout(time.Second) })
	if b.side != side || len(l.spareSides) != 0 || b.side.idleTimeout != time.Second || b.side.requests != 0 {
		t.Fatalf("b's side %p %+v, want the spare %p with only its idle timeout", b.side, *b.side, side)
	}
}
