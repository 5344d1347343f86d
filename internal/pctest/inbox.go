//go:build linux

package pctest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// Inbox carries values from handlers, which run on a loop's thread, to the
// test. Put never blocks: a handler that waits for the test can park its
// loop for good (a buffered channel that fills up, say with the closes of
// connections the test did not count on, stops the loop inside OnClose,
// and the runtime's Close then waits for that loop forever). Next waits at
// most 10 seconds, so a value that never comes fails the test instead of
// hanging it.
type Inbox[T any] struct {
	mu    sync.Mutex
	items []T
	ready chan struct{}
}

// NewInbox returns an empty inbox.
func NewInbox[T any]() *Inbox[T] { return &Inbox[T]{ready: make(chan struct{}, 1)} }

// Put adds v; it never blocks.
func (b *Inbox[T]) Put(v T) {
	b.mu.Lock()
	b.items = append(b.items, v)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// Next returns the oldest value not yet taken, waiting for one at most 10
// seconds; what names it in the failure.
func (b *Inbox[T]) Next(t testing.TB, what string) T {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		if len(b.items) > 0 {
			v := b.items[0]
			var zero T
			b.items[0] = zero
			b.items = b.items[1:]
			b.mu.Unlock()
			return v
		}
		b.mu.Unlock()
		select {
		case <-b.ready:
		case <-deadline.C:
			t.Fatalf("no %s within %v", what, waitLimit)
		}
	}
}

// Drain takes every value there is now, without waiting.
func (b *Inbox[T]) Drain() []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	items := b.items
	b.items = nil
	return items
}

// LogInbox returns a logger that puts every record, at every level, in the
// returned inbox. Attributes added with Logger.With are dropped.
func LogInbox() (*slog.Logger, *Inbox[slog.Record]) {
	b := NewInbox[slog.Record]()
	return slog.New(inboxHandler{b}), b
}

type inboxHandler struct{ b *Inbox[slog.Record] }

func (h inboxHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h inboxHandler) Handle(_ context.Context, r slog.Record) error {
	h.b.Put(r.Clone())
	return nil
}

func (h inboxHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h inboxHandler) WithGroup(string) slog.Handler      { return h }
