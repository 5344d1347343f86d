//go:build linux

package frame

import percore "github.com/percore/percore/runtime"

// A restart's hand-over of connections to a new process
// (percore.Runtime.HandOver, docs/decisions/0054). Every adapter of this
// package implements percore.HandoverHandler and percore.AdoptHandler:
// a connection whose adapter holds part of a frame is not between
// requests (ErrHandoverLater: it is asked again once the frame is whole
// and handled), one that is paused (PauseRead) or past the end of its
// stream neither; otherwise the wrapped handler decides with its own
// OnHandover, and a handler without one declines (the runtime cannot know
// what it keeps). A WebSocket server on frame.View hands over a
// connection between messages with its subscriptions as the state, and
// says goodbye with a close frame of code 1012 (ws.CloseServiceRestart) in
// its OnShutdown, which a hand-over calls for the connections it cannot
// move.

var (
	_ percore.HandoverHandler = (*adapter)(nil)
	_ percore.AdoptHandler    = (*adapter)(nil)
)

// OnHandover is the adapter's answer for c: later while a frame is partly
// held, else the handler's.
func (a *adapter) OnHandover(c *percore.Conn) ([]byte, error) {
	if s := sessionOf(c); s != nil && (!s.t.idle() || s.paused || s.eof || s.delivering) {
		return nil, percore.ErrHandoverLater
	}
	if a.hand == nil {
		return nil, percore.ErrHandoverDeclined
	}
	return a.hand.OnHandover(c)
}

// OnAdopt starts the adapter's state for a connection the old process
// handed over, then tells the handler: its OnAdopt, else its OnOpen.
func (a *adapter) OnAdopt(c *percore.Conn, state []byte) {
	if a.view == nil {
		c.SetAdapterValue(a.newSession())
	} else {
		c.SetAdapterValue(nil) // View's session waits for bytes to keep
	}
	if a.adopt != nil {
		a.adopt.OnAdopt(c, state)
		return
	}
	a.opened(c)
}
