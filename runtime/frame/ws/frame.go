package ws

import (
	"encoding/binary"
	"math/rand/v2"
)

// Opcode is a frame's opcode (RFC 6455 section 5.2).
type Opcode uint8

// The opcodes RFC 6455 defines; the others (3-7, 11-15) are reserved and
// fail the connection.
const (
	OpContinuation Opcode = 0x0
	OpText         Opcode = 0x1
	OpBinary       Opcode = 0x2
	OpClose        Opcode = 0x8
	OpPing         Opcode = 0x9
	OpPong         Opcode = 0xA
)

// IsControl reports whether op is a control opcode (Close, Ping, Pong, or
// a reserved one from 0xB).
func (op Opcode) IsControl() bool { return op&0x8 != 0 }

// Role says which end of a connection an endpoint is: a client masks the
// frames it sends and expects unmasked frames; a server the reverse.
type Role uint8

const (
	// Server is the accepting end: it receives masked frames and sends
	// unmasked ones.
	Server Role = iota
	// Client is the connecting end.
	Client
)

// Event is what a decoder found.
type Event uint8

const (
	// NeedMore: nothing more until more bytes arrive.
	NeedMore Event = iota
	// Text: (a piece of) a text message's payload.
	Text
	// Binary: (a piece of) a binary message's payload.
	Binary
	// Ping: a ping; answer it with a pong of the same payload.
	Ping
	// Pong: a pong.
	Pong
	// Close: the peer's Close frame; answer with one (Conn.PutClose) and
	// close the connection once it is sent.
	Close
)

var eventNames = [...]string{"NeedMore", "Text", "Binary", "Ping", "Pong", "Close"}

func (e Event) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return "Event(?)"
}

// Frame is what Decoder.Next returns: an event and its payload.
type Frame struct {
	// Event says what this is; NeedMore carries nothing.
	Event Event
	// Payload is the piece of a data message (Text, Binary) that arrived,
	// or the whole payload of a control frame, unmasked in place: a slice
	// of the input given to Next, valid as long as that input is. For
	// Close it is the reason, without the code.
	Payload []byte
	// First says Payload is the message's first piece; Last that it ends
	// the message. A message that arrived whole in one frame is one piece
	// with both set (Payload is then the whole message, in place). A
	// message may end with an empty piece.
	First, Last bool
	// Compressed says the message is compressed with permessage-deflate
	// (RSV1 on its first frame): Payload is DEFLATE data, not yet the
	// message (Conn inflates it).
	Compressed bool
	// Code is a Close frame's status: CloseNoStatus for a Close without
	// one.
	Code CloseCode
}

// The parts of a frame's first two bytes.
const (
	finBit  = 0x80
	rsv1Bit = 0x40
	rsv2Bit = 0x20
	rsv3Bit = 0x10
	maskBit = 0x80
)

// MaxHeaderLen is the longest frame header: 2 bytes, an 8-byte extended
// length and a 4-byte masking key.
const MaxHeaderLen = 14

// HeaderLen returns the length of the header of a frame of n payload bytes,
// masked (a client's frame) or not.
func HeaderLen(n int, masked bool) int {
	h := 2
	switch {
	case n > 0xFFFF:
		h += 8
	case n > 125:
		h += 2
	}
	if masked {
		h += 4
	}
	return h
}

// FrameLen returns the length of a whole frame of n payload bytes.
func FrameLen(n int, masked bool) int { return HeaderLen(n, masked) + n }

// Header is what a frame header says.
type Header struct {
	Op     Opcode
	Fin    bool
	RSV1   bool // permessage-deflate: the message is compressed (first frame only)
	Masked bool
	Key    [4]byte // the masking key, when Masked
	Length int     // the payload length
}

// PutHeader writes h into dst, which must hold HeaderLen(h.Length,
// h.Masked) bytes, and returns how many it wrote (the minimal length
// encoding RFC 6455 section 5.2 requires).
func PutHeader(dst []byte, h Header) int {
	b0 := byte(h.Op)
	if h.Fin {
		b0 |= finBit
	}
	if h.RSV1 {
		b0 |= rsv1Bit
	}
	var b1 byte
	if h.Masked {
		b1 = maskBit
	}
	n := 2
	switch {
	case h.Length > 0xFFFF:
		_ = dst[9]
		dst[0], dst[1] = b0, b1|127
		binary.BigEndian.PutUint64(dst[2:], uint64(h.Length))
		n = 10
	case h.Length > 125:
		_ = dst[3]
		dst[0], dst[1] = b0, b1|126
		binary.BigEndian.PutUint16(dst[2:], uint16(h.Length))
		n = 4
	default:
		_ = dst[1]
		dst[0], dst[1] = b0, b1|byte(h.Length)
	}
	if h.Masked {
		copy(dst[n:n+4], h.Key[:])
		n += 4
	}
	return n
}

// PutFrame writes a whole, final frame of op with payload p into dst and
// returns its length, or ErrShortBuffer when dst is shorter than
// FrameLen(len(p), masked). A masked frame (what a client sends) gets a
// fresh key; its payload is masked in dst, and p is left as it was. The
// payload is copied once, into dst: this is the call to make on the room
// a connection's outbound buffer reserved (percore.Conn.Reserve).
func PutFrame(dst []byte, op Opcode, p []byte, masked bool) (int, error) {
	return putFrame(dst, Header{Op: op, Fin: true, Masked: masked, Length: len(p)}, p)
}

func putFrame(dst []byte, h Header, p []byte) (int, error) {
	if len(dst) < FrameLen(len(p), h.Masked) {
		return 0, ErrShortBuffer
	}
	if h.Masked {
		h.Key = newKey()
	}
	n := PutHeader(dst, h)
	copy(dst[n:], p)
	if h.Masked {
		mask(h.Key, 0, dst[n:n+len(p)])
	}
	return n + len(p), nil
}

// AppendFrame appends a whole, final frame of op with payload p to dst, as
// PutFrame writes it.
func AppendFrame(dst []byte, op Opcode, p []byte, masked bool) []byte {
	n := len(dst)
	dst = grow(dst, FrameLen(len(p), masked))
	m, _ := PutFrame(dst[n:], op, p, masked)
	return dst[:n+m]
}

// grow returns dst extended by n bytes of room (their content undefined).
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		dst = append(dst[:cap(dst)], make([]byte, n-(cap(dst)-len(dst)))...)[:len(dst)]
	}
	return dst[:len(dst)+n]
}

// newKey returns a masking key. RFC 6455 section 5.3 asks for keys that
// the application cannot predict; math/rand/v2's top-level source is
// ChaCha8 seeded by the runtime from the operating system's entropy, per
// thread, and costs no system call.
func newKey() (k [4]byte) {
	binary.LittleEndian.PutUint32(k[:], rand.Uint32())
	return k
}
