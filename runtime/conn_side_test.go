//go:build linux

package runtime

import (
	"errors"
	"testing"
	"time"
	"unsafe"
)

// TestConnSizeClass holds Conn in the 288-byte size class: what every
// open connection costs the runtime (decision 0065). A field added to Conn
// that most connections do not use belongs in connSide.
func TestConnSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Conn{}); n > 288 {
		t.Fatalf("Conn is %d bytes; want at most 288 (the 288-byte size class): move rarely used state to connSide", n)
	}
	if n := unsafe.Sizeof(uringConn{}); n > 64 {
		t.Fatalf("uringConn is %d bytes; want at most 64", n)
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
