//go:build linux

package runtime

import "net"

// WriteShared queues p, as Write does, but without copying it when nothing
// is queued for c: the loop sends p itself and keeps it referenced until
// the kernel has taken it. It is for bytes encoded once and written to
// many connections (a fan-out's frame): a publish to 18,000 subscribers
// then queues 18,000 references to one slice, instead of 18,000 copies in
// buffers of the loop's pool (decision 0060).
//
// p must never be written to again, by anyone, once it has been passed
// here: connections of other loops may be sending it at the same time.
// So OnData's input (the loop's receive buffer, reused at once), a
// buffer from a pool or any other memory that is written again is not
// for WriteShared: Write copies them.
// Behind bytes already queued, on a TLS connection and during a file send,
// p is copied as Write copies it. The outbound policy applies as in Write;
// TryWriteShared refuses instead.
func (c *Conn) WriteShared(p []byte) (int, error) {
	if c.tlsState() != nil || c.fileSend() != nil {
		return c.Write(p)
	}
	if !c.writable() {
		return 0, c.opError("write", net.ErrClosed)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := c.dropsWrite(len(p)); err != nil {
		return 0, err
	}
	if c.out.buffered() == 0 {
		c.progress = c.loop.stamp()
	}
	c.outw().addShared(c.loop, p)
	c.loop.d.committed(c)
	if c.out.buffered() > 0 {
		c.loop.queued(c)
	}
	return len(p), nil
}

// TryWriteShared is WriteShared that refuses, with ErrOutboundFull and
// nothing queued, when p does not fit (Fits) in c's outbound queue, as
// TryWrite does.
func (c *Conn) TryWriteShared(p []byte) (int, error) {
	if err := c.refuse(len(p)); err != nil {
		return 0, err
	}
	return c.WriteShared(p)
}
