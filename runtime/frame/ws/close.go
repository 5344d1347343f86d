package ws

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// CloseCode is the status code of a Close frame (RFC 6455 section 7.4).
type CloseCode uint16

// The close codes RFC 6455 section 7.4.1 defines, and the three IANA
// registered after it (1012-1014).
const (
	CloseNormal          CloseCode = 1000 // the purpose of the connection is fulfilled
	CloseGoingAway       CloseCode = 1001 // a server going down, a browser leaving the page
	CloseProtocolError   CloseCode = 1002 // the peer broke the protocol
	CloseUnsupportedData CloseCode = 1003 // a kind of data the endpoint cannot accept
	// CloseNoStatus (1005) is what a Close frame without a code reports; it
	// must never be sent.
	CloseNoStatus CloseCode = 1005
	// CloseAbnormal (1006) reports a connection that closed without a
	// Close frame; it must never be sent.
	CloseAbnormal       CloseCode = 1006
	CloseInvalidPayload CloseCode = 1007 // data inconsistent with its type: invalid UTF-8 in a text message
	ClosePolicy         CloseCode = 1008 // a message that violates the endpoint's policy
	CloseTooBig         CloseCode = 1009 // a message too big to process
	CloseExtension      CloseCode = 1010 // (client) the server did not negotiate an extension it needs
	CloseInternalError  CloseCode = 1011 // (server) an unexpected condition
	CloseServiceRestart CloseCode = 1012
	CloseTryAgainLater  CloseCode = 1013
	CloseBadGateway     CloseCode = 1014
)

// Valid reports whether c may appear in a Close frame on the wire: 1000-1003,
// 1007-1014 (RFC 6455's and IANA's), and 3000-4999 (libraries and
// applications). 1004 is reserved, 1005, 1006 and 1015 are reserved for
// reporting and must not be sent, the rest below 3000 are unassigned, and
// codes from 5000 do not exist; an endpoint that receives one fails the
// connection with 1002.
func (c CloseCode) Valid() bool {
	switch {
	case c >= 1000 && c <= 1003, c >= 1007 && c <= 1014, c >= 3000 && c <= 4999:
		return true
	}
	return false
}

func (c CloseCode) String() string { return strconv.Itoa(int(c)) }

// CloseError is a protocol violation the codec found in what the peer sent
// (or a limit it broke): Code is the close code RFC 6455 gives for it, to
// send in a Close frame before closing the connection (AppendClose,
// Conn.PutClose), Reason says what was wrong. Once a decoder returns one it
// stays failed: the stream's framing can no longer be trusted.
type CloseError struct {
	Code   CloseCode
	Reason string
}

func (e *CloseError) Error() string {
	return "ws: " + strconv.Itoa(int(e.Code)) + ": " + e.Reason
}

// The violations. They are values, so that a rejection allocates nothing;
// match them with errors.As and read Code.
var (
	errReservedBits      = &CloseError{CloseProtocolError, "reserved bits set"}
	errRSV1              = &CloseError{CloseProtocolError, "RSV1 set without permessage-deflate, or on a control or continuation frame"}
	errOpcode            = &CloseError{CloseProtocolError, "unknown opcode"}
	errFragmentedControl = &CloseError{CloseProtocolError, "fragmented control frame"}
	errControlTooLong    = &CloseError{CloseProtocolError, "control frame payload over 125 bytes"}
	errNoContinuation    = &CloseError{CloseProtocolError, "continuation frame without a message to continue"}
	errContinuationDue   = &CloseError{CloseProtocolError, "new data frame inside a fragmented message"}
	errUnmasked          = &CloseError{CloseProtocolError, "unmasked frame from a client"}
	errMasked            = &CloseError{CloseProtocolError, "masked frame from a server"}
	errLength64          = &CloseError{CloseProtocolError, "64-bit payload length with its most significant bit set"}
	errCloseLength       = &CloseError{CloseProtocolError, "close frame payload of 1 byte"}
	errCloseCode         = &CloseError{CloseProtocolError, "invalid close code"}
	errCloseReason       = &CloseError{CloseInvalidPayload, "close reason is not valid UTF-8"}
	errUTF8              = &CloseError{CloseInvalidPayload, "text message is not valid UTF-8"}
	errFrameTooBig       = &CloseError{CloseTooBig, "frame payload over the limit"}
	errMessageTooBig     = &CloseError{CloseTooBig, "message over the limit"}
	errInflate           = &CloseError{CloseInvalidPayload, "compressed message is not valid DEFLATE data"}
)

// ErrCloseSent is returned by the writing methods of a Conn once it has
// sent its Close frame: after it, RFC 6455 allows no more frames.
var ErrCloseSent = errors.New("ws: close frame already sent")

// ErrShortBuffer is returned by the Put functions when the room they are
// given is smaller than the frame (see FrameLen and Conn.MaxLen).
var ErrShortBuffer = errors.New("ws: buffer too short for the frame")

// MaxControlPayload is the longest payload of a control frame (RFC 6455
// section 5.5), so a Close frame's reason is at most 123 bytes.
const MaxControlPayload = 125

// AppendClosePayload appends the payload of a Close frame: the code in
// network order, then the reason, cut to 123 bytes (on a UTF-8 boundary).
// A code of 0 makes an empty payload (a Close without a status).
func AppendClosePayload(dst []byte, code CloseCode, reason string) []byte {
	if code == 0 {
		return dst
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	return append(dst, cutReason(reason)...)
}

// cutReason cuts a close reason to 123 bytes without splitting a code point.
func cutReason(r string) string {
	if len(r) <= MaxControlPayload-2 {
		return r
	}
	r = r[:MaxControlPayload-2]
	for i := len(r) - 1; i >= 0 && i >= len(r)-3; i-- {
		if c := r[i]; c < 0x80 || c >= 0xC0 {
			if !validUTF8([]byte(r[i:])) {
				r = r[:i]
			}
			break
		}
	}
	return r
}

// parseClose checks a received Close payload: empty (no status: code 1005
// reported), or a valid code and a UTF-8 reason.
func parseClose(p []byte) (CloseCode, []byte, *CloseError) {
	switch len(p) {
	case 0:
		return CloseNoStatus, nil, nil
	case 1:
		return 0, nil, errCloseLength
	}
	code := CloseCode(binary.BigEndian.Uint16(p))
	if !code.Valid() {
		return 0, nil, errCloseCode
	}
	if !validUTF8(p[2:]) {
		return 0, nil, errCloseReason
	}
	return code, p[2:], nil
}
