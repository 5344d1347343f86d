package ws

import (
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"strconv"

	"github.com/percore/percore/runtime/frame/http1"
)

// The opening handshake (RFC 6455 section 4) as functions over http1's
// parsed heads: the server checks a request (Accept) and appends its 101
// answer (AppendAccept) or its refusal (AppendRefusal); the client
// appends its request (AppendRequest) and checks the answer
// (CheckResponse). Neither reads or writes a socket.

// guid is the key suffix of RFC 6455 section 1.3.
const guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// Version is the protocol version this package speaks
// (Sec-WebSocket-Version).
const Version = "13"

// Handshake is what an opening handshake agreed.
type Handshake struct {
	// Accept is the Sec-WebSocket-Accept value (a server's answer, or what
	// a client expects).
	Accept [28]byte
	// Protocol is the subprotocol chosen, "" for none: one of
	// Config.Protocols (the same string).
	Protocol string
	// Deflate is permessage-deflate as agreed.
	Deflate DeflateParams
}

// HandshakeError is a request a server refuses: Status is the response
// RFC 6455 gives (400, 403, 405, 426), Reason says what was wrong.
// AppendRefusal writes the response.
type HandshakeError struct {
	Status int
	Reason string
}

func (e *HandshakeError) Error() string {
	return "ws: handshake refused: " + strconv.Itoa(e.Status) + ": " + e.Reason
}

var (
	errNotGet       = &HandshakeError{405, "the opening handshake must be a GET"}
	errHTTP10       = &HandshakeError{400, "the opening handshake needs HTTP/1.1"}
	errNoUpgrade    = &HandshakeError{400, "no 'websocket' token in the Upgrade field"}
	errNoConnection = &HandshakeError{400, "no 'Upgrade' token in the Connection field"}
	errKey          = &HandshakeError{400, "missing, repeated or malformed Sec-WebSocket-Key (16 bytes in base64)"}
	errNoVersion    = &HandshakeError{400, "missing Sec-WebSocket-Version"}
	errVersion      = &HandshakeError{426, "unsupported Sec-WebSocket-Version (this server speaks 13)"}
	errOrigin       = &HandshakeError{403, "origin not allowed"}
	errBody         = &HandshakeError{400, "an opening handshake with a body"}
)

// ClientError is an answer a client rejects: a status other than 101, or
// a 101 that breaks RFC 6455 section 4.1's rules (the connection must then
// be failed). Status is the response's status code.
type ClientError struct {
	Status int
	Reason string
}

func (e *ClientError) Error() string { return "ws: handshake failed: " + e.Reason }

func errHandshake(reason string) *ClientError { return &ClientError{Status: 101, Reason: reason} }

// acceptKey computes Sec-WebSocket-Accept for a Sec-WebSocket-Key.
func acceptKey(key []byte) (out [28]byte) {
	var buf [64]byte
	n := copy(buf[:], key)
	n += copy(buf[n:], guid)
	sum := sha1.Sum(buf[:n])
	base64.StdEncoding.Encode(out[:], sum[:])
	return out
}

// AcceptKey returns the Sec-WebSocket-Accept value for a Sec-WebSocket-Key
// value.
func AcceptKey(key []byte) [28]byte { return acceptKey(key) }

// IsUpgrade reports whether req asks for a WebSocket (an Upgrade field
// with the websocket token), so that a server routes it to Accept.
func IsUpgrade(req *http1.Request) bool {
	for _, h := range req.Header.All() {
		if http1.EqualFold(h.Name, "upgrade") && http1.HasToken(h.Value, "websocket") {
			return true
		}
	}
	return false
}

// Accept checks a server's opening handshake request against RFC 6455
// section 4.2.1 and negotiates the subprotocol and permessage-deflate with
// cfg. It refuses with a *HandshakeError whose Status is the response to
// give: 405 for a method other than GET, 426 (with Sec-WebSocket-Version:
// 13, AppendRefusal adds it) for another version, 403 for an origin
// outside cfg.Origins, 400 for the rest (HTTP/1.0, no websocket upgrade,
// no Connection: Upgrade, a bad key, a body). It allocates nothing.
func Accept(req *http1.Request, cfg *Config) (Handshake, *HandshakeError) {
	var hs Handshake
	if string(req.Method) != "GET" {
		return hs, errNotGet
	}
	if req.Minor < 1 {
		return hs, errHTTP10
	}
	if req.HasBody() {
		return hs, errBody
	}
	upgrade, connection := false, false
	var key, version, origin []byte
	keys, versions := 0, 0
	var protocols, extensions [8][]byte
	np, ne := 0, 0
	for _, h := range req.Header.All() {
		switch len(h.Name) {
		case 6:
			if http1.EqualFold(h.Name, "origin") {
				origin = h.Value
			}
		case 7:
			if http1.EqualFold(h.Name, "upgrade") {
				upgrade = upgrade || http1.HasToken(h.Value, "websocket")
			}
		case 10:
			if http1.EqualFold(h.Name, "connection") {
				connection = connection || http1.HasToken(h.Value, "upgrade")
			}
		case 17:
			if http1.EqualFold(h.Name, "sec-websocket-key") {
				key, keys = h.Value, keys+1
			}
		case 21:
			if http1.EqualFold(h.Name, "sec-websocket-version") {
				version, versions = h.Value, versions+1
			}
		case 22:
			if http1.EqualFold(h.Name, "sec-websocket-protocol") && np < len(protocols) {
				protocols[np], np = h.Value, np+1
			}
		case 24:
			if http1.EqualFold(h.Name, "sec-websocket-extensions") && ne < len(extensions) {
				extensions[ne], ne = h.Value, ne+1
			}
		}
	}
	if !upgrade {
		return hs, errNoUpgrade
	}
	if !connection {
		return hs, errNoConnection
	}
	if versions == 0 {
		return hs, errNoVersion
	}
	if versions > 1 || string(version) != Version {
		return hs, errVersion
	}
	if keys != 1 || !validKey(key) {
		return hs, errKey
	}
	if cfg.Origins != nil && !allowedOrigin(origin, cfg.Origins) {
		return hs, errOrigin
	}
	hs.Accept = acceptKey(key)
	hs.Protocol = chooseProtocol(protocols[:np], cfg.Protocols)
	if cfg.Deflate.Enabled {
		hs.Deflate, _ = negotiateDeflate(extensions[:ne], &cfg.Deflate)
	}
	return hs, nil
}

// validKey reports whether k is the base64 form of 16 bytes.
func validKey(k []byte) bool {
	if len(k) != 24 || k[22] != '=' || k[23] != '=' {
		return false
	}
	var out [18]byte
	n, err := base64.StdEncoding.Decode(out[:], k)
	return err == nil && n == 16
}

func allowedOrigin(origin []byte, allowed []string) bool {
	if origin == nil {
		return false
	}
	for _, a := range allowed {
		if equalFold(origin, a) || string(origin) == a {
			return true
		}
	}
	return false
}

// chooseProtocol returns the first of the server's protocols that one of
// the Sec-WebSocket-Protocol values offers.
func chooseProtocol(offered [][]byte, ours []string) string {
	for _, p := range ours {
		for _, v := range offered {
			for len(v) > 0 {
				var elem []byte
				elem, v = splitList(v)
				if string(trim(elem)) == p {
					return p
				}
			}
		}
	}
	return ""
}

// AppendAccept appends the server's 101 response for hs, whole.
func AppendAccept(dst []byte, hs *Handshake) []byte {
	dst = http1.AppendStatusLine(dst, 101)
	dst = AppendAcceptFields(dst, hs)
	return append(dst, "\r\n"...)
}

// AppendAcceptFields appends the field lines of the 101 response (Upgrade,
// Connection, Sec-WebSocket-Accept, and the subprotocol and extension when
// agreed), for a server that writes its status line and further fields
// itself.
func AppendAcceptFields(dst []byte, hs *Handshake) []byte {
	dst = append(dst, "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "...)
	dst = append(dst, hs.Accept[:]...)
	dst = append(dst, "\r\n"...)
	if hs.Protocol != "" {
		dst = append(dst, "Sec-WebSocket-Protocol: "...)
		dst = append(dst, hs.Protocol...)
		dst = append(dst, "\r\n"...)
	}
	if hs.Deflate.Enabled {
		dst = append(dst, "Sec-WebSocket-Extensions: "...)
		dst = hs.Deflate.AppendTo(dst)
		dst = append(dst, "\r\n"...)
	}
	return dst
}

// AppendRefusal appends the response to a refused handshake: its status,
// Sec-WebSocket-Version: 13 for a 426 (RFC 6455 section 4.4), Allow: GET
// for a 405, Connection: close and a text body saying why; date (from
// http1.Date) is the Date value, or nil for none. Close the connection once
// it is sent.
func AppendRefusal(dst []byte, e *HandshakeError, date []byte) []byte {
	if e.Status == 426 {
		// http1.StatusText does not know 426 (RFC 9110 15.5.22).
		dst = append(dst, "HTTP/1.1 426 Upgrade Required\r\n"...)
	} else {
		dst = http1.AppendStatusLine(dst, e.Status)
	}
	if date != nil {
		dst = http1.AppendHeader(dst, "Date", date)
	}
	switch e.Status {
	case 426:
		dst = append(dst, "Sec-WebSocket-Version: 13\r\n"...)
	case 405:
		dst = append(dst, "Allow: GET\r\n"...)
	}
	body := len(e.Reason) + 1
	dst = append(dst, "Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"...)
	dst = http1.AppendContentLength(dst, int64(body))
	dst = append(dst, "\r\n"...)
	dst = append(dst, e.Reason...)
	return append(dst, '\n')
}

// NewKey returns a fresh Sec-WebSocket-Key: 16 random bytes in base64.
func NewKey() (k [24]byte) {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read does not fail (Go 1.24+)
	base64.StdEncoding.Encode(k[:], raw[:])
	return k
}

// AppendRequest appends a client's opening handshake: GET target on host,
// with key (from NewKey), the subprotocols of cfg.Protocols, a
// permessage-deflate offer when cfg.Deflate.Enabled, and the field lines
// of extra (each "Name: value\r\n", e.g. an Origin or a cookie), then the
// empty line.
func AppendRequest(dst []byte, host, target string, key *[24]byte, cfg *Config, extra string) []byte {
	dst = append(dst, "GET "...)
	dst = append(dst, target...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, host...)
	dst = append(dst, "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "...)
	dst = append(dst, key[:]...)
	dst = append(dst, "\r\n"...)
	if len(cfg.Protocols) > 0 {
		dst = append(dst, "Sec-WebSocket-Protocol: "...)
		for i, p := range cfg.Protocols {
			if i > 0 {
				dst = append(dst, ", "...)
			}
			dst = append(dst, p...)
		}
		dst = append(dst, "\r\n"...)
	}
	if cfg.Deflate.Enabled {
		dst = append(dst, "Sec-WebSocket-Extensions: "...)
		dst = appendOffer(dst, &cfg.Deflate)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, extra...)
	return append(dst, "\r\n"...)
}

// CheckResponse checks the server's answer to a request made with key and
// cfg (RFC 6455 section 4.1): a 101 with Upgrade: websocket, Connection:
// Upgrade and the right Sec-WebSocket-Accept, a subprotocol among those
// offered (or none), and only the extension offered, with valid
// parameters. It fails with a *ClientError.
func CheckResponse(resp *http1.Response, key *[24]byte, cfg *Config) (Handshake, error) {
	var hs Handshake
	if resp.Status != 101 {
		return hs, &ClientError{Status: resp.Status, Reason: "status " + strconv.Itoa(resp.Status) + ", not 101"}
	}
	hs.Accept = acceptKey(key[:])
	upgrade, connection, accepts := false, false, 0
	var extensions [][]byte
	for _, h := range resp.Header.All() {
		switch {
		case http1.EqualFold(h.Name, "upgrade"):
			upgrade = upgrade || http1.HasToken(h.Value, "websocket")
		case http1.EqualFold(h.Name, "connection"):
			connection = connection || http1.HasToken(h.Value, "upgrade")
		case http1.EqualFold(h.Name, "sec-websocket-accept"):
			accepts++
			if string(h.Value) != string(hs.Accept[:]) {
				return hs, errHandshake("wrong Sec-WebSocket-Accept")
			}
		case http1.EqualFold(h.Name, "sec-websocket-protocol"):
			if hs.Protocol != "" {
				return hs, errHandshake("more than one Sec-WebSocket-Protocol")
			}
			for _, p := range cfg.Protocols {
				if string(h.Value) == p {
					hs.Protocol = p
				}
			}
			if hs.Protocol == "" {
				return hs, errHandshake("subprotocol not offered: " + string(h.Value))
			}
		case http1.EqualFold(h.Name, "sec-websocket-extensions"):
			extensions = append(extensions, h.Value)
		}
	}
	switch {
	case !upgrade:
		return hs, errHandshake("no 'websocket' token in the Upgrade field")
	case !connection:
		return hs, errHandshake("no 'Upgrade' token in the Connection field")
	case accepts != 1:
		return hs, errHandshake("missing or repeated Sec-WebSocket-Accept")
	}
	d, err := parseResponse(extensions, &cfg.Deflate)
	if err != nil {
		return hs, err
	}
	hs.Deflate = d
	return hs, nil
}
