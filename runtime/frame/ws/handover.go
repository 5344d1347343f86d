package ws

import "errors"

// A restart's hand-over of connections to a new process
// (percore.Runtime.HandOver, docs/decisions/0054 and 0059): a Conn that is
// between messages is written down in StateLen bytes (AppendState) and
// resumed from them in the new process (Resume), so that the connection
// goes on without a new handshake. What a Conn holds between messages is
// its role and what permessage-deflate agreed; a compression context
// (context takeover: the peer's last plaintext, our compressor's history)
// is not written down, so a connection that uses one does not move: it is
// closed with CloseServiceRestart instead.

// StateLen is the length of what AppendState writes.
const StateLen = 4

// stateVersion is the first byte of a written state: a new process that
// meets another refuses the state (Resume's ErrState).
const stateVersion = 1

var (
	// ErrInMessage is AppendState's answer while a frame or a fragmented
	// message is partly received: ask again once it is whole.
	ErrInMessage = errors.New("ws: a message is partly received")
	// ErrNotPortable is AppendState's answer for a connection whose
	// state cannot move to another process: it keeps a compression
	// context, it failed, or its closing handshake began.
	ErrNotPortable = errors.New("ws: the connection's state cannot move to another process")
	// ErrState is Resume's answer for a state AppendState did not write.
	ErrState = errors.New("ws: not a connection state written by AppendState")
)

// Between reports whether c is between messages: no frame or fragmented
// message partly received, no failure and no Close either way.
func (c *Conn) Between() bool {
	d := c.progress()
	return d.err == nil && d.flags&(dInPayload|dDone) == 0 && d.msgOp == 0 && c.st&(stCloseSent|stCloseRecv) == 0
}

// progress returns the decoder's progress: its side state's, or between
// messages its flags.
func (c *Conn) progress() decoder {
	if c.side != nil {
		return c.side.dec
	}
	return decoder{flags: c.dflags}
}

// AppendState appends to dst the StateLen bytes that Resume makes a Conn
// of again in another process, for a connection between messages. It
// returns ErrInMessage while a message is partly received (the bytes the
// caller holds of a frame header are its own to check: frame.View's
// adapters do), and ErrNotPortable for a connection that keeps a
// compression context (context takeover in either direction, once a
// message used it), failed or is closing.
func (c *Conn) AppendState(dst []byte) ([]byte, error) {
	d := c.progress()
	switch {
	case d.err != nil || d.flags&dDone != 0 || c.st&(stCloseSent|stCloseRecv) != 0:
		return dst, ErrNotPortable
	case d.flags&dInPayload != 0 || d.msgOp != 0:
		return dst, ErrInMessage
	case c.wctx() != nil || (c.rctx() != nil && len(c.rctx().b) > 0):
		return dst, ErrNotPortable
	}
	var flags byte
	if c.Compressed() {
		flags |= 1
	}
	if c.rctx() != nil {
		flags |= 2
	}
	readBits := byte(0)
	if r := c.rctx(); r != nil {
		for s := r.size; s > 1; s >>= 1 {
			readBits++
		}
	}
	return append(dst, stateVersion<<4|byte(c.Role()), flags|c.ext<<2, c.bits, readBits), nil
}

// Resume makes c the connection that AppendState wrote down in the first
// StateLen bytes of state, with the Config and buffers of pool (the Pool
// of the goroutine that will use it, as for Init), and returns the bytes
// after them (the caller's own state). The role is the one written down.
func (c *Conn) Resume(pool *Pool, state []byte) (rest []byte, err error) {
	if len(state) < StateLen || state[0]>>4 != stateVersion {
		return state, ErrState
	}
	role := Role(state[0] & 0x0f)
	flags, bits, readBits := state[1], state[2], state[3]
	ext := flags >> 2
	if role > Client || !validState(flags, ext, bits, readBits) {
		return state, ErrState
	}
	*c = Conn{pool: pool, ext: ext, bits: bits, dflags: modeFlags(role, flags&1 != 0)}
	if flags&2 != 0 {
		c.ctx = &takeover{r: &window{size: 1 << readBits}}
	}
	return state[StateLen:], nil
}

// validState reports whether flags, ext, bits and readBits are a state
// AppendState writes, as Init sets them up: without permessage-deflate
// nothing else; with it a write window of 8 to 15 bits, and a read
// context (of 8 to 15 bits) exactly when the peer keeps its context.
// Anything else would fail later, in the compressor (a window under 8
// bits) or the decoder, instead of here.
func validState(flags, ext, bits, readBits byte) bool {
	if flags&1 == 0 {
		return flags == 0 && bits == 0 && readBits == 0
	}
	if ext > extReadReset|extWriteReset || bits < 8 || bits > 15 {
		return false
	}
	if ext&extReadReset == 0 {
		return flags&2 != 0 && readBits >= 8 && readBits <= 15
	}
	return flags&2 == 0 && readBits == 0
}
