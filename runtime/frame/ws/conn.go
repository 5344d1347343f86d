package ws

import "errors"

// Conn is the protocol state of one WebSocket connection, without its
// socket: it turns the bytes received into messages and control frames
// (Next), and writes frames into a buffer the caller hands it (the Put
// methods), keeping RFC 6455's rules in both directions: messages whole
// out of fragments (with control frames between them), UTF-8 of text,
// permessage-deflate both ways as negotiated, the close handshake (no
// frame after a Close).
//
// It is small (see TestConnSize): between messages it holds no buffer, no
// compressor, no decompressor and no decoder's progress (a frame or a
// message partly received, or a message returned from a buffer, takes a
// side state of its Pool's until it is whole and given back), unless
// context takeover was agreed (then a window of the peer's plaintext, a
// compressor of its own, or both). Init it after the handshake, with the Pool of the goroutine that
// will use it. A Conn is used by one goroutine at a time.
type Conn struct {
	pool   *Pool
	side   *side     // from pool, while a frame or message is partly received, failed, or buf is held; nil between messages
	ctx    *takeover // the contexts kept across messages; nil without context takeover
	code   CloseCode // the status of the Close received
	ext    uint8
	st     uint8
	bits   uint8 // our compressor's window: 2^bits bytes (8 to 15)
	dflags uint8 // the decoder's flags while side is nil: its mode (dClient, dDeflate), dDone
}

// side is what a Conn holds only while it receives a message: its
// decoder's progress within a frame or a fragmented message (or its
// failure), and the buffer the message is joined or inflated in. A
// message that arrives whole in one input, uncompressed, never takes
// one: its progress stays on Next's stack. Its Pool keeps the spares.
type side struct {
	dec decoder // its Limits are pool's
	buf []byte  // from pool: the message being joined from its pieces, or the last one returned
}

const (
	extReadReset  = 1 << iota // the peer compresses each message alone
	extWriteReset             // we compress each message alone
)

const (
	stCloseSent = 1 << iota
	stCloseRecv
	stGiveBack // buf was returned by Next: recycle it at the next call
)

// ErrNotData is returned by PutMessage for an opcode other than OpText or
// OpBinary, and by PutControl for one other than OpPing or OpPong.
var ErrNotData = errors.New("ws: wrong opcode for this call")

// ErrControlTooLong is returned by PutControl for a payload over 125
// bytes.
var ErrControlTooLong = errors.New("ws: control frame payload over 125 bytes")

// Init makes c ready for a connection of the given role whose handshake
// agreed hs (nil: no extension), with the Config and buffers of pool.
func (c *Conn) Init(pool *Pool, role Role, hs *Handshake) {
	*c = Conn{pool: pool, dflags: modeFlags(role, false)}
	if hs == nil || !hs.Deflate.Enabled {
		return
	}
	d := hs.Deflate
	c.dflags = modeFlags(role, true)
	var writeBits, readBits uint8
	if role == Server {
		if d.ServerNoContextTakeover {
			c.ext |= extWriteReset
		}
		if d.ClientNoContextTakeover {
			c.ext |= extReadReset
		}
		writeBits, readBits = d.ServerMaxWindowBits, d.ClientMaxWindowBits
	} else {
		if d.ClientNoContextTakeover || !pool.cfg.Deflate.WriteContextTakeover {
			c.ext |= extWriteReset
		}
		if d.ServerNoContextTakeover {
			c.ext |= extReadReset
		}
		writeBits, readBits = d.ClientMaxWindowBits, d.ServerMaxWindowBits
	}
	c.bits = 15
	if writeBits != 0 && writeBits < 15 {
		c.bits = writeBits
	}
	if c.ext&extReadReset == 0 {
		if readBits == 0 {
			readBits = 15
		}
		c.ctx = &takeover{r: &window{size: 1 << readBits}}
	}
}

// takeover is what a connection with context takeover keeps across
// messages, beside Conn so that a connection without it (the default,
// and every connection without permessage-deflate) does not carry two
// nil pointers.
type takeover struct {
	r *window     // the peer's context takeover: its last plaintext
	w *compressor // our context takeover: a compressor of our own
}

// rctx returns the peer's context (its last plaintext), or nil.
func (c *Conn) rctx() *window {
	if c.ctx == nil {
		return nil
	}
	return c.ctx.r
}

// wctx returns our compressor kept across messages, or nil.
func (c *Conn) wctx() *compressor {
	if c.ctx == nil {
		return nil
	}
	return c.ctx.w
}

// Compressed reports whether permessage-deflate is in use.
func (c *Conn) Compressed() bool { return c.dflags&dDeflate != 0 }

// Role returns the end c is.
func (c *Conn) Role() Role {
	if c.dflags&dClient != 0 {
		return Client
	}
	return Server
}

// CloseReceived reports whether the peer's Close frame arrived; CloseSent
// whether ours was written. Once both are true the closing handshake is
// complete: a server closes the TCP connection then (RFC 6455 section
// 7.1.1), a client waits for the server to.
func (c *Conn) CloseReceived() bool { return c.st&stCloseRecv != 0 }

// CloseSent reports whether PutClose wrote a Close frame.
func (c *Conn) CloseSent() bool { return c.st&stCloseSent != 0 }

// CloseCode returns the status of the Close frame received
// (CloseNoStatus for one without a status), or 0 before one arrived.
func (c *Conn) CloseCode() CloseCode { return c.code }

// Next reads from in, the bytes received and not yet consumed, and returns
// how many it consumed and the next event: a whole message (Text, Binary:
// p is the message, inflated if it was compressed), a Ping or Pong (p is
// its payload), the peer's Close (p is its reason; CloseCode has its
// status), or NeedMore. Call it with in[n:] until NeedMore; p is valid
// until the next call (a message that arrived whole in one frame is a
// slice of in, unmasked in place; a fragmented or compressed one is in a
// buffer of c's Pool, given back at the next call).
//
// A *CloseError says the peer broke the protocol or a limit: write a Close
// with its Code (PutClose) and close the connection.
func (c *Conn) Next(in []byte) (n int, ev Event, p []byte, err error) {
	if c.st&stGiveBack != 0 {
		c.giveBack()
	}
	cfg := &c.pool.modes[c.dflags&(dClient|dDeflate)/dClient]
	if c.side != nil {
		k, f, e := c.side.dec.next(in, cfg)
		return c.next(in, cfg, k, f, e)
	}
	// Between messages: the decoder's progress on the stack, moved to a
	// side state only if this input leaves a frame or a message partly
	// received, fails, or brings a compressed message.
	d := decoder{flags: c.dflags}
	k, f, e := d.next(in, cfg)
	if e == nil && d.flags&dInPayload == 0 && d.msgOp == 0 && !f.Compressed {
		c.dflags = d.flags
		switch f.Event {
		case NeedMore:
			return k, NeedMore, nil, nil
		case Close:
			c.code = f.Code
			c.st |= stCloseRecv
			c.ctx = nil
		}
		return k, f.Event, f.Payload, nil // a control frame, or a message whole in one frame
	}
	c.side = c.pool.side()
	c.side.dec = d
	return c.next(in, cfg, k, f, e)
}

// next is Next with a side state, from the decoder's first result
// (consumed k, found f, failed with e).
func (c *Conn) next(in []byte, cfg *Decoder, k int, f Frame, e error) (n int, ev Event, p []byte, err error) {
	s := c.side
	for {
		n += k
		if e != nil {
			c.drop()
			return n, NeedMore, nil, e
		}
		switch f.Event {
		case NeedMore:
			c.settle()
			return n, NeedMore, nil, nil
		case Ping, Pong:
			c.settle()
			return n, f.Event, f.Payload, nil
		case Close:
			c.code = f.Code
			c.st |= stCloseRecv
			c.drop()
			return n, Close, f.Payload, nil
		}
		if f.First && f.Last {
			if !f.Compressed {
				c.settle()
				return n, f.Event, f.Payload, nil
			}
			p, e := c.inflate(f.Payload, f.Event)
			if e != nil {
				return n, NeedMore, nil, e
			}
			return n, f.Event, p, nil
		}
		if f.First {
			// A frame's length says how much of it is still due.
			s.buf = c.pool.get(len(f.Payload) + int(min(s.dec.remaining, 1<<20)))
		}
		s.buf = append(c.pool.grow(s.buf, len(f.Payload)), f.Payload...)
		if f.Last {
			c.st |= stGiveBack
			if !f.Compressed {
				return n, f.Event, s.buf, nil
			}
			src := s.buf
			s.buf = nil
			p, e := c.inflate(src, f.Event)
			c.pool.put(src)
			if e != nil {
				return n, NeedMore, nil, e
			}
			return n, f.Event, p, nil
		}
		k, f, e = s.dec.next(in[n:], cfg)
	}
}

// inflate returns the message that the compressed message src is, and
// checks it.
func (c *Conn) inflate(src []byte, ev Event) ([]byte, error) {
	var dict []byte
	rctx := c.rctx()
	if rctx != nil {
		dict = rctx.b
	}
	limit := c.pool.cfg.Limits.maxMessage()
	guess := max(512, 3*len(src))
	if limit >= 0 {
		guess = int(min(int64(guess), limit+1))
	}
	s := c.side
	s.buf = c.pool.get(guess)
	c.st |= stGiveBack
	out, e := c.pool.decompressor().inflate(c.pool, s.buf, src, dict, limit)
	s.buf = out
	if e == nil && ev == Text && !validUTF8(out) {
		e = errUTF8
	}
	if e != nil {
		e := s.dec.fail(e) // before drop, which would give s back were it not failed
		c.drop()
		return nil, e
	}
	if rctx != nil {
		if rctx.b == nil {
			rctx.b = make([]byte, 0, rctx.size)
		}
		rctx.add(out)
	}
	return out, nil
}

func (c *Conn) giveBack() {
	c.st &^= stGiveBack
	if s := c.side; s != nil && s.buf != nil {
		c.pool.put(s.buf)
		s.buf = nil
	}
	c.settle()
}

// settle gives the side state back once it holds nothing: no buffer, and
// the decoder between messages and not failed (a failed one keeps its
// error in it for good).
func (c *Conn) settle() {
	s := c.side
	if s == nil || s.buf != nil || s.dec.err != nil || s.dec.flags&dInPayload != 0 || s.dec.msgOp != 0 {
		return
	}
	c.dflags = s.dec.flags
	c.side = nil
	c.pool.putSide(s)
}

// Release gives back to c's Pool what c holds, whatever its decoder's
// state: the buffer of a message partly received or last returned, and
// its side state (a connection gone mid-message keeps both otherwise, and
// a failed one its side state, for the collector), and lets its context
// takeover go. Call it once the connection is gone (its OnClose): a
// payload Next returned is invalid after it, and Next reads nothing more
// (it discards its input, as after a Close) until Init.
func (c *Conn) Release() {
	c.giveBack() // the buffer, and the side state if it is between messages
	if s := c.side; s != nil {
		c.side = nil // mid-message or failed: given back all the same
		c.pool.putSide(s)
	}
	c.ctx = nil
	c.dflags |= dDone
}

// drop gives back what a failed or closed connection holds.
func (c *Conn) drop() {
	c.giveBack()
	c.ctx = nil
}

// compresses reports whether PutMessage compresses a message of n bytes.
func (c *Conn) compresses(n int) bool {
	return c.dflags&dDeflate != 0 && n >= c.pool.cfg.Deflate.threshold()
}

func (c *Conn) masked() bool { return c.dflags&dClient != 0 }

// MaxLen returns the room PutMessage needs for a message of n bytes: its
// frame's length, or for a message it compresses the frame of the
// largest output compress/flate can make of n bytes.
func (c *Conn) MaxLen(n int) int {
	if c.compresses(n) {
		return FrameLen(deflateBound(n), c.masked())
	}
	return FrameLen(n, c.masked())
}

// PutMessage writes the message p (op is OpText or OpBinary) as one frame
// into dst and returns its length: the frame a client masks, compressed
// when permessage-deflate is in use and p is not shorter than
// Deflate.Threshold. dst must hold MaxLen(len(p)) bytes (ErrShortBuffer
// otherwise): the room a connection's outbound buffer reserves
// (percore.Conn.Reserve, then Commit with the length returned). The
// payload is copied once, into dst (compressed, it is read by the
// compressor, which writes into dst). p itself is not changed. Text is not
// checked for UTF-8: sending valid text is the caller's part.
func (c *Conn) PutMessage(dst []byte, op Opcode, p []byte) (int, error) {
	if op != OpText && op != OpBinary {
		return 0, ErrNotData
	}
	if c.st&stCloseSent != 0 {
		return 0, ErrCloseSent
	}
	masked := c.masked()
	if !c.compresses(len(p)) {
		return putFrame(dst, Header{Op: op, Fin: true, Masked: masked, Length: len(p)}, p)
	}
	hmax := HeaderLen(deflateBound(len(p)), masked)
	if len(dst) < hmax {
		return 0, ErrShortBuffer
	}
	comp, reset := c.compressor()
	out, err := comp.compress(dst[hmax:hmax:len(dst)], p, reset)
	if err != nil {
		return 0, ErrShortBuffer
	}
	m := len(out)
	h := HeaderLen(m, masked)
	if h < hmax {
		copy(dst[h:h+m], dst[hmax:hmax+m])
	}
	hd := Header{Op: op, Fin: true, RSV1: true, Masked: masked, Length: m}
	if masked {
		hd.Key = newKey()
	}
	PutHeader(dst, hd)
	if masked {
		mask(hd.Key, 0, dst[h:h+m])
	}
	return h + m, nil
}

// AppendMessage appends the frame PutMessage writes to dst, growing it.
func (c *Conn) AppendMessage(dst []byte, op Opcode, p []byte) ([]byte, error) {
	n := len(dst)
	dst = grow(dst, c.MaxLen(len(p)))
	m, err := c.PutMessage(dst[n:], op, p)
	return dst[:n+m], err
}

func (c *Conn) compressor() (*compressor, bool) {
	if c.ext&extWriteReset != 0 {
		return c.pool.compressor(c.bits), true
	}
	if c.ctx == nil {
		c.ctx = &takeover{}
	}
	if c.ctx.w == nil {
		c.ctx.w = newCompressor(c.pool.cfg.Deflate.level(), c.bits)
	}
	return c.ctx.w, false
}

// PutControl writes a Ping or a Pong (op) with payload p, at most 125
// bytes, into dst, which must hold FrameLen(len(p), masked) bytes
// (MaxHeaderLen+125 always does). Answer a Ping with a Pong of its
// payload.
func (c *Conn) PutControl(dst []byte, op Opcode, p []byte) (int, error) {
	if op != OpPing && op != OpPong {
		return 0, ErrNotData
	}
	if len(p) > MaxControlPayload {
		return 0, ErrControlTooLong
	}
	if c.st&stCloseSent != 0 {
		return 0, ErrCloseSent
	}
	return putFrame(dst, Header{Op: op, Fin: true, Masked: c.masked(), Length: len(p)}, p)
}

// PutClose writes a Close frame with code and reason (cut to 123 bytes)
// into dst, which must hold MaxHeaderLen+125 bytes, and marks c closing:
// no frame may follow it. A code of 0 or CloseNoStatus writes a Close
// without a status, so that the answer to a Close is
// PutClose(dst, c.CloseCode(), "") whatever it carried (RFC 6455 section
// 5.5.1: an endpoint echoes the status it received). Any other code that
// must not be sent (CloseCode.Valid is false) is refused with ErrNotData.
func (c *Conn) PutClose(dst []byte, code CloseCode, reason string) (int, error) {
	if c.st&stCloseSent != 0 {
		return 0, ErrCloseSent
	}
	var buf [MaxControlPayload]byte
	var p []byte
	switch {
	case code == 0 || code == CloseNoStatus:
		p = buf[:0]
	case !code.Valid():
		return 0, ErrNotData
	default:
		p = AppendClosePayload(buf[:0], code, reason)
	}
	n, err := putFrame(dst, Header{Op: OpClose, Fin: true, Masked: c.masked(), Length: len(p)}, p)
	if err == nil {
		c.st |= stCloseSent
		if c.ctx != nil {
			c.ctx.w = nil // nothing more is compressed
		}
	}
	return n, err
}
