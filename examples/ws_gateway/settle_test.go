//go:build linux

package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestReturnAfterStorms checks that the free pages are returned once a
// storm of at least min upgrades has settled, not while upgrades still
// arrive nor for fewer than min, and once a storm.
func TestReturnAfterStorms(t *testing.T) {
	g := newGateway("s", 0)
	var n loopCounters
	g.counters[0] = &n
	returned := make(chan uint64, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.returnAfterStorms(ctx, 100, time.Millisecond, func(u uint64) { returned <- u },
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })

	// A trickle below min, then the rest of a storm: one return, at the
	// storm's count, whatever the ticks saw in between.
	for range 60 {
		n.upgrades.Add(1)
	}
	for range 40 {
		n.upgrades.Add(1)
	}
	select {
	case u := <-returned:
		if u != 100 {
			t.Fatalf("returned after %d upgrades; want 100 (not before min)", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no return 10 s after a storm of 100 upgrades settled")
	}
	// The next storm returns again, counted from the last return.
	n.upgrades.Add(150)
	select {
	case u := <-returned:
		if u != 250 {
			t.Fatalf("second return after %d upgrades in all; want 250", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no return after the second storm")
	}
}
