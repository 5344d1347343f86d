package ws

// Prepared is a message encoded once for many connections (fan-out): the
// frame as a server sends it (unmasked, so that one encoding serves every
// connection), and, when the Pool's Config enables permessage-deflate and
// the message is not below its threshold, the same message compressed on
// its own (no context takeover, a 32 KiB window). It is immutable once
// made: connections on other goroutines (other loops) may write it too.
//
// Conn.PutPrepared copies the form that suits each connection: the
// compressed frame for a connection that compresses without context
// takeover and with a 32 KiB window, the plain frame for one without
// compression. A connection that compresses with context takeover, or
// with a window limited below 15 bits, or a client (which must mask with
// a key of its own), encodes the message itself, from the payload the
// Prepared keeps: its compressor's window must see every message it sends,
// and the shared compressed form refers back up to 32 KiB.
type Prepared struct {
	op       Opcode
	payload  []byte
	frame    []byte
	deflated []byte
}

// Prepare encodes the message p (op is OpText or OpBinary) for fan-out. It
// copies p once, into the frame (p may be reused at once), and compresses
// it once when the Pool's Config enables permessage-deflate.
func (pl *Pool) Prepare(op Opcode, p []byte) (*Prepared, error) {
	if op != OpText && op != OpBinary {
		return nil, ErrNotData
	}
	pm := &Prepared{op: op}
	pm.frame = make([]byte, FrameLen(len(p), false))
	putFrame(pm.frame, Header{Op: op, Fin: true, Length: len(p)}, p)
	pm.payload = pm.frame[HeaderLen(len(p), false):]
	d := &pl.cfg.Deflate
	if d.Enabled && len(p) >= d.threshold() {
		pl.scratch = grow(pl.scratch[:0], deflateBound(len(p)))[:0]
		out, err := pl.compressor(15).compress(pl.scratch, p, true)
		if err != nil {
			return nil, err
		}
		pm.deflated = make([]byte, FrameLen(len(out), false))
		putFrame(pm.deflated, Header{Op: op, Fin: true, RSV1: true, Length: len(out)}, out)
		if cap(pl.scratch) > 1<<20 {
			pl.scratch = nil
		}
	}
	return pm, nil
}

// Payload returns the message. It is part of the prepared frame, which
// connections may be sending (SharedFrame): never write to it.
func (pm *Prepared) Payload() []byte { return pm.payload }

// Frame returns the uncompressed frame, as a server sends it.
func (pm *Prepared) Frame() []byte { return pm.frame }

// shared returns the encoded frame that c may send as it is, or nil when
// c must encode the message itself.
func (c *Conn) shared(pm *Prepared) []byte {
	switch {
	case c.masked():
		return nil
	case !c.compresses(len(pm.payload)):
		return pm.frame
	case c.bits == 15 && c.ext&extWriteReset != 0 && pm.deflated != nil:
		return pm.deflated
	}
	return nil
}

// SharedFrame returns the encoding of pm that c sends as it is, the same
// bytes for every connection that can use it, or nil when c must encode
// pm itself (PutPrepared) or has sent its Close. The slice is pm's and
// never changes: a fan-out queues it on each connection without a copy
// (percore.Conn.WriteShared), where PutPrepared copies it into each
// connection's outbound buffer.
func (c *Conn) SharedFrame(pm *Prepared) []byte {
	if c.st&stCloseSent != 0 {
		return nil
	}
	return c.shared(pm)
}

// PreparedLen returns the room PutPrepared needs for pm.
func (c *Conn) PreparedLen(pm *Prepared) int {
	if f := c.shared(pm); f != nil {
		return len(f)
	}
	return c.MaxLen(len(pm.payload))
}

// PutPrepared writes pm into dst for c, which must hold PreparedLen(pm)
// bytes, and returns the length written: a copy of the shared encoding
// when c can use it, else the message encoded for c (PutMessage).
func (c *Conn) PutPrepared(dst []byte, pm *Prepared) (int, error) {
	if c.st&stCloseSent != 0 {
		return 0, ErrCloseSent
	}
	f := c.shared(pm)
	if f == nil {
		return c.PutMessage(dst, pm.op, pm.payload)
	}
	if len(dst) < len(f) {
		return 0, ErrShortBuffer
	}
	return copy(dst, f), nil
}
