//go:build linux

package runtime

import (
	"errors"
	"net"
)

// ErrOutboundFull is returned (wrapped in a *net.OpError) by a write that
// was refused because the connection's outbound queue is at
// Config.MaxOutbound: Conn.TryWrite and Conn.TryReserve always, and Write,
// Writev and Commit under the DropWrites policy. Nothing of the refused
// write was queued, and the connection stays open: the caller drops that
// message for this peer (Stats.WritesRefused counts it) or tries again
// after OnDrain (a DrainHandler's OnDrain runs once a queue that refused
// a write has drained to Config.OutboundLowWater). A peer that takes nothing at all is closed by
// Config.WriteTimeout, with ErrWriteTimeout.
var ErrOutboundFull = errors.New("outbound queue at its cap")

// Fits reports whether n more bytes may be queued on c now without taking
// its queue past Config.MaxOutbound. An empty queue takes a write of any
// size (so that a message larger than the cap is not refused for good),
// and so does a connection without a cap (MaxOutbound negative). It says
// nothing of whether c may still be written to (Closed).
func (c *Conn) Fits(n int) bool {
	limit := c.loop.cfg.MaxOutbound
	b := c.Buffered()
	return limit <= 0 || b == 0 || b+n <= limit
}

// TryWrite is Write that refuses, with ErrOutboundFull and nothing queued,
// when p does not fit (Fits) in c's outbound queue, whatever the
// OutboundPolicy: a producer that writes without being asked (a fan-out
// to subscribers, a stream relayed to a slow reader) drops what a slow
// peer cannot take, instead of queueing it without bound as Write does
// under PauseReading. Each refusal counts in Stats.WritesRefused.
func (c *Conn) TryWrite(p []byte) (int, error) {
	if err := c.refuse(len(p)); err != nil {
		return 0, err
	}
	return c.Write(p)
}

// TryReserve is Reserve that refuses, with ErrOutboundFull, room for n
// bytes that would not fit in c's outbound queue (Fits), so that a message
// built in place is queued whole or not at all; a refusal counts in
// Stats.WritesRefused. The room it returns is committed with Commit. It
// returns net.ErrClosed (wrapped) when c can no longer be written to.
func (c *Conn) TryReserve(n int) ([]byte, error) {
	if err := c.refuse(n); err != nil {
		return nil, err
	}
	room := c.Reserve(n)
	if room == nil && n > 0 {
		return nil, c.opError("write", net.ErrClosed)
	}
	return room, nil
}

// refuse returns the error of a write of n bytes that c cannot take: its
// queue is at the cap (counted), or it is closed.
func (c *Conn) refuse(n int) error {
	if !c.writable() {
		return c.opError("write", net.ErrClosed)
	}
	if c.Fits(n) {
		return nil
	}
	return c.refused()
}

// dropsWrite is the DropWrites policy's hook in Write, Writev and Commit:
// the error refusing a write of n bytes that does not fit, or nil (any
// other policy, or it fits).
func (c *Conn) dropsWrite(n int) error {
	if c.loop.cfg.OutboundPolicy != DropWrites || c.Fits(n) {
		return nil
	}
	return c.refused()
}

// refused counts a refused write and marks c as over its cap, so that
// OnDrain runs once its queue drains to Config.OutboundLowWater.
func (c *Conn) refused() error {
	c.state |= stOverCap
	c.loop.cnt[sWritesRefused]++
	return c.opError("write", ErrOutboundFull)
}
