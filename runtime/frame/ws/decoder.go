package ws

import "encoding/binary"

// DefaultMaxMessage is the longest message a decoder accepts when
// Limits.MaxMessage is zero: 16 MiB, the largest message of the Autobahn
// testsuite (case 9.1.6) and gws's default. A server of many connections
// sets a smaller one.
const DefaultMaxMessage = 16 << 20

// Limits bound what a decoder accepts; past them it fails with 1009
// (CloseTooBig). Zero fields mean their defaults, negative ones no limit.
type Limits struct {
	// MaxFrame is the longest data frame payload, checked when its header
	// arrives, before any of its payload. Zero means MaxMessage.
	MaxFrame int64
	// MaxMessage is the longest message: the sum of its frames' payloads,
	// checked at each frame header, and for a compressed message also its
	// length once inflated, checked as it inflates. Zero means
	// DefaultMaxMessage.
	MaxMessage int64
}

func (l Limits) maxMessage() int64 {
	if l.MaxMessage == 0 {
		return DefaultMaxMessage
	}
	return l.MaxMessage
}

func (l Limits) maxFrame() int64 {
	if l.MaxFrame == 0 {
		return l.maxMessage()
	}
	return l.MaxFrame
}

// Decoder parses the frames of one direction of one connection, in place
// in the caller's input: a pull parser for frame.View, like http1's
// decoders. Next is shown the bytes not yet consumed and says how many it
// took and what it found. It keeps its progress across calls: a frame's
// payload is handed over (unmasked in place) as it arrives, and never
// looked at twice; only a header (at most 14 bytes) or a control frame (at
// most 139) that is not yet whole is left unconsumed, to be shown again
// with more bytes, so the cost of a message is linear in its size however
// it is cut.
//
// It enforces RFC 6455 for the frames (reserved bits and opcodes, masking
// by role, control frames whole and at most 125 bytes, continuation
// frames only inside a fragmented message, Close payloads), validates the
// UTF-8 of uncompressed text messages as their bytes arrive (failing at
// the first invalid byte), and applies Limits. A violation is a
// *CloseError with the close code to answer; the decoder then stays
// failed. After a Close frame it consumes and ignores everything (RFC 6455
// section 5.5.1: nothing follows a Close).
//
// Set the exported fields before the first Next; its zero value decodes a
// server's input (masked client frames) without extensions, with the
// default limits. A Decoder is used by one goroutine at a time.
type Decoder struct {
	// Role is the end that decodes: Server (the zero value) expects
	// masked frames, Client unmasked ones.
	Role Role
	// Deflate allows RSV1 on the first frame of a message: set it when
	// permessage-deflate was negotiated.
	Deflate bool
	// Limits bounds frames and messages.
	Limits Limits

	d decoder
}

// decoder is a Decoder's progress; its Role, Deflate and Limits are given
// to each call (next's cfg). A Conn keeps its Role and Deflate as flags,
// its progress only while a message is partly received (side), and
// decodes with its Pool's Decoder of that mode (Pool.modes): its Pool's
// Limits, not a copy of them in every connection.
type decoder struct {
	remaining uint64 // payload bytes of the current data frame still due
	msgLen    int64  // payload bytes of the current message so far
	err       *CloseError
	key       [4]byte
	phase     uint8 // the key byte that the next payload byte is masked with
	msgOp     Opcode
	utf8      utf8State
	flags     uint8
}

const (
	dInPayload  = 1 << iota // inside a data frame's payload
	dFin                    // the current data frame ends its message
	dCompressed             // the current message is compressed
	dStarted                // a piece of the current message was returned
	dDone                   // a Close frame was received
	dClient                 // the Role is Client: frames come unmasked
	dDeflate                // permessage-deflate was negotiated: RSV1 allowed
)

// modeFlags returns the decoder flags of a Conn's role and
// permessage-deflate.
func modeFlags(role Role, deflate bool) uint8 {
	var f uint8
	if role == Client {
		f |= dClient
	}
	if deflate {
		f |= dDeflate
	}
	return f
}

// Reset makes the decoder ready for a new connection, keeping its
// exported fields.
func (d *Decoder) Reset() { d.d = decoder{} }

// Err returns the violation the decoder failed with, or nil.
func (d *Decoder) Err() error {
	if d.d.err == nil {
		return nil
	}
	return d.d.err
}

// InMessage reports whether a data message has begun and not ended.
func (d *Decoder) InMessage() bool { return d.d.msgOp != 0 }

// Closed reports whether a Close frame was received.
func (d *Decoder) Closed() bool { return d.d.flags&dDone != 0 }

func (d *decoder) fail(e *CloseError) *CloseError {
	d.err = e
	return e
}

// Next decodes from in, the bytes received and not yet consumed, and
// returns how many of them it consumed and what it found: a piece of a
// message, a control frame, or NeedMore when it needs more bytes than in
// holds. Call it again with in[n:] (and, after NeedMore, with more bytes
// appended) until it returns NeedMore. A returned Payload is a slice of
// in, unmasked in place.
func (d *Decoder) Next(in []byte) (n int, f Frame, err error) {
	return d.d.next(in, d) // inlined: the caller calls next itself
}

// next is Next, with the Role, Deflate and Limits of cfg (its progress
// unused): the Decoder itself, or for a Conn the Pool's Decoder of its
// mode (Pool.modes, indexed by the mode's flags over dClient: dDeflate
// is dClient's next bit). Both are read through one pointer, so that Next
// stays within the inliner's budget and a Decoder's user pays no call
// of a wrapper.
func (d *decoder) next(in []byte, cfg *Decoder) (n int, f Frame, err error) {
	if d.err != nil {
		return 0, Frame{}, d.err
	}
	if d.flags&dDone != 0 {
		return len(in), Frame{}, nil
	}
	for {
		if d.flags&dInPayload != 0 {
			k := len(in) - n
			if uint64(k) > d.remaining {
				k = int(d.remaining)
			}
			last := uint64(k) == d.remaining && d.flags&dFin != 0
			if k == 0 && !last {
				if d.remaining > 0 {
					return n, Frame{}, nil
				}
				d.flags &^= dInPayload // an empty frame inside a message
				continue
			}
			p := in[n : n+k : n+k]
			if cfg.Role == Server {
				d.phase = uint8(mask(d.key, int(d.phase), p))
			}
			n += k
			d.remaining -= uint64(k)
			if d.remaining == 0 {
				d.flags &^= dInPayload
			}
			if d.msgOp == OpText && d.flags&dCompressed == 0 {
				d.utf8 = d.utf8.feed(p)
				if d.utf8 == utf8Reject || (last && d.utf8 != utf8Accept) {
					return n, Frame{}, d.fail(errUTF8)
				}
			}
			f = Frame{Event: Binary, Payload: p, First: d.flags&dStarted == 0, Last: last,
				Compressed: d.flags&dCompressed != 0}
			if d.msgOp == OpText {
				f.Event = Text
			}
			d.flags |= dStarted
			if last {
				d.msgOp = 0
			}
			return n, f, nil
		}
		m, f, err := d.header(in[n:], cfg)
		n += m
		if err != nil || m == 0 || f.Event != NeedMore {
			return n, f, err
		}
	}
}

// header decodes the frame header at the start of in: it returns 0 while
// the header (or a control frame) is incomplete, a whole control frame, or
// the length of a data frame's header, which it then consumes (the decoder
// is then in its payload).
func (d *decoder) header(in []byte, cfg *Decoder) (int, Frame, error) {
	if len(in) < 2 {
		return 0, Frame{}, nil
	}
	b0, b1 := in[0], in[1]
	op := Opcode(b0 & 0x0F)
	fin := b0&finBit != 0
	if b0&(rsv2Bit|rsv3Bit) != 0 {
		return 0, Frame{}, d.fail(errReservedBits)
	}
	rsv1 := b0&rsv1Bit != 0
	if rsv1 && (!cfg.Deflate || (op != OpText && op != OpBinary)) {
		return 0, Frame{}, d.fail(errRSV1)
	}
	l7 := b1 & 0x7F
	switch op {
	case OpContinuation:
		if d.msgOp == 0 {
			return 0, Frame{}, d.fail(errNoContinuation)
		}
	case OpText, OpBinary:
		if d.msgOp != 0 {
			return 0, Frame{}, d.fail(errContinuationDue)
		}
	case OpClose, OpPing, OpPong:
		if !fin {
			return 0, Frame{}, d.fail(errFragmentedControl)
		}
		if l7 > MaxControlPayload {
			return 0, Frame{}, d.fail(errControlTooLong)
		}
	default:
		return 0, Frame{}, d.fail(errOpcode)
	}
	masked := b1&maskBit != 0
	if masked != (cfg.Role == Server) {
		if masked {
			return 0, Frame{}, d.fail(errMasked)
		}
		return 0, Frame{}, d.fail(errUnmasked)
	}
	hlen := 2
	switch l7 {
	case 126:
		hlen += 2
	case 127:
		hlen += 8
	}
	if masked {
		hlen += 4
	}
	if len(in) < hlen {
		return 0, Frame{}, nil
	}
	length := uint64(l7)
	switch l7 {
	case 126:
		length = uint64(binary.BigEndian.Uint16(in[2:]))
	case 127:
		length = binary.BigEndian.Uint64(in[2:])
		if length>>63 != 0 {
			return 0, Frame{}, d.fail(errLength64)
		}
	}
	var key [4]byte
	if masked {
		copy(key[:], in[hlen-4:hlen])
	}
	if op.IsControl() {
		end := hlen + int(length)
		if len(in) < end {
			return 0, Frame{}, nil // held whole: at most 139 bytes
		}
		p := in[hlen:end:end]
		if masked {
			mask(key, 0, p)
		}
		switch op {
		case OpPing:
			return end, Frame{Event: Ping, Payload: p}, nil
		case OpPong:
			return end, Frame{Event: Pong, Payload: p}, nil
		}
		code, reason, e := parseClose(p)
		if e != nil {
			return end, Frame{}, d.fail(e)
		}
		d.flags |= dDone
		return end, Frame{Event: Close, Payload: reason, Code: code}, nil
	}
	if mf := cfg.Limits.maxFrame(); mf >= 0 && length > uint64(mf) {
		return 0, Frame{}, d.fail(errFrameTooBig)
	}
	if op != OpContinuation {
		d.msgOp, d.msgLen, d.utf8 = op, 0, utf8Accept
		d.flags &^= dCompressed | dStarted
		if rsv1 {
			d.flags |= dCompressed
		}
	}
	if mm := cfg.Limits.maxMessage(); mm >= 0 && uint64(d.msgLen)+length > uint64(mm) {
		return 0, Frame{}, d.fail(errMessageTooBig)
	}
	d.msgLen += int64(length)
	d.remaining, d.key, d.phase = length, key, 0
	d.flags |= dInPayload
	d.flags &^= dFin
	if fin {
		d.flags |= dFin
	}
	return hlen, Frame{}, nil
}
