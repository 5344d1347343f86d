package ws

import (
	"bytes"
	"strconv"
)

// DeflateParams is permessage-deflate as a handshake agreed, in the terms
// of RFC 7692's parameters: what the server's response said.
type DeflateParams struct {
	// Enabled says the extension is in use.
	Enabled bool
	// ServerNoContextTakeover: the server resets its compressor for each
	// message.
	ServerNoContextTakeover bool
	// ClientNoContextTakeover: the client resets its compressor for each
	// message.
	ClientNoContextTakeover bool
	// ServerMaxWindowBits bounds the server compressor's window (8-15);
	// 0 when the response does not say (15).
	ServerMaxWindowBits uint8
	// ClientMaxWindowBits bounds the client compressor's window (8-15);
	// 0 when the response does not say (15).
	ClientMaxWindowBits uint8
}

// AppendTo appends the Sec-WebSocket-Extensions value of the response that
// agrees to p.
func (p DeflateParams) AppendTo(dst []byte) []byte {
	dst = append(dst, "permessage-deflate"...)
	if p.ServerNoContextTakeover {
		dst = append(dst, "; server_no_context_takeover"...)
	}
	if p.ClientNoContextTakeover {
		dst = append(dst, "; client_no_context_takeover"...)
	}
	if p.ServerMaxWindowBits != 0 {
		dst = append(dst, "; server_max_window_bits="...)
		dst = strconv.AppendUint(dst, uint64(p.ServerMaxWindowBits), 10)
	}
	if p.ClientMaxWindowBits != 0 {
		dst = append(dst, "; client_max_window_bits="...)
		dst = strconv.AppendUint(dst, uint64(p.ClientMaxWindowBits), 10)
	}
	return dst
}

// deflateOffer is one permessage-deflate offer of a client.
type deflateOffer struct {
	serverNoCtx, clientNoCtx bool
	serverBits               uint8 // 0: absent
	clientBits               uint8 // 0: absent; clientBitsAsk: present without a value
	clientBitsPresent        bool
}

// splitList returns the first element of the comma-separated list s (with
// quoted strings kept whole) and the rest after its comma.
func splitList(s []byte) (elem, rest []byte) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			return s[:i], s[i+1:]
		}
	}
	return s, nil
}

// splitParams returns the part of an extension element before its first
// ';' (outside quotes) and the rest after it.
func splitParam(s []byte) (part, rest []byte, more bool) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case c == ';' && !quoted:
			return s[:i], s[i+1:], true
		}
	}
	return s, nil, false
}

// param splits "name[=value]" and unquotes the value; ok is false for a
// malformed one.
func param(s []byte) (name, value []byte, hasValue, ok bool) {
	s = trim(s)
	eq := bytes.IndexByte(s, '=')
	if eq < 0 {
		return s, nil, false, isToken(s)
	}
	name, value = trim(s[:eq]), trim(s[eq+1:])
	if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
		value = value[1 : len(value)-1] // no escapes are valid in a window size anyway
	}
	return name, value, true, isToken(name) && isToken(value)
}

// windowBits parses a window size parameter: 8 to 15, no leading zero.
func windowBits(v []byte) (uint8, bool) {
	switch {
	case len(v) == 1 && v[0] >= '8' && v[0] <= '9':
		return v[0] - '0', true
	case len(v) == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5':
		return 10 + v[1] - '0', true
	}
	return 0, false
}

// parseOffer parses the parameters of one permessage-deflate offer; ok is
// false for an offer to decline (an unknown or repeated parameter, a
// malformed value).
func parseOffer(params []byte) (o deflateOffer, ok bool) {
	var seen uint8
	for more := len(trim(params)) > 0; more; {
		var part []byte
		part, params, more = splitParam(params)
		name, value, hasValue, good := param(part)
		if !good {
			return o, false
		}
		var bit uint8
		switch {
		case equalFold(name, "server_no_context_takeover"):
			bit, o.serverNoCtx = 1, true
			good = !hasValue
		case equalFold(name, "client_no_context_takeover"):
			bit, o.clientNoCtx = 2, true
			good = !hasValue
		case equalFold(name, "server_max_window_bits"):
			bit = 4
			o.serverBits, good = windowBits(value)
			good = good && hasValue
		case equalFold(name, "client_max_window_bits"):
			bit = 8
			o.clientBitsPresent = true
			if hasValue {
				o.clientBits, good = windowBits(value)
			}
		default:
			return o, false
		}
		if !good || seen&bit != 0 {
			return o, false
		}
		seen |= bit
	}
	return o, true
}

// negotiateDeflate picks the first permessage-deflate offer of the
// request's Sec-WebSocket-Extensions values that it can accept, and says
// how it answers it (RFC 7692 section 7.1).
func negotiateDeflate(values [][]byte, cfg *Deflate) (DeflateParams, bool) {
	for _, v := range values {
		for len(v) > 0 {
			var elem []byte
			elem, v = splitList(v)
			name, params, _ := splitParam(elem)
			if !equalFold(trim(name), "permessage-deflate") {
				continue
			}
			o, ok := parseOffer(params)
			if !ok {
				continue // decline this offer, consider the next
			}
			p := DeflateParams{
				Enabled:                 true,
				ServerNoContextTakeover: o.serverNoCtx || !cfg.WriteContextTakeover,
				ClientNoContextTakeover: !cfg.ReadContextTakeover,
				// A limit the client asks of our window is agreed to:
				// the compressor is made with that window.
				ServerMaxWindowBits: o.serverBits,
			}
			// An offer's client_no_context_takeover is only a hint (RFC
			// 7692 7.1.1.2): Autobahn's client sends it and still keeps
			// its context unless the response says so, so the window is
			// dropped only when the response carries it.
			if cfg.ReadContextTakeover && o.clientBitsPresent {
				if b := cfg.readWindowBits(); b < 15 && (o.clientBits == 0 || b < o.clientBits) {
					p.ClientMaxWindowBits = b
				}
			}
			if o.clientBits != 0 && p.ClientMaxWindowBits == 0 {
				p.ClientMaxWindowBits = o.clientBits // what the client said it will use
			}
			return p, true
		}
	}
	return DeflateParams{}, false
}

// appendOffer appends a client's permessage-deflate offer for cfg.
func appendOffer(dst []byte, cfg *Deflate) []byte {
	dst = append(dst, "permessage-deflate; client_max_window_bits"...)
	if !cfg.WriteContextTakeover {
		dst = append(dst, "; client_no_context_takeover"...)
	}
	if !cfg.ReadContextTakeover {
		dst = append(dst, "; server_no_context_takeover"...)
	} else if b := cfg.readWindowBits(); b < 15 {
		dst = append(dst, "; server_max_window_bits="...)
		dst = strconv.AppendUint(dst, uint64(b), 10)
	}
	return dst
}

// parseResponse checks a server's Sec-WebSocket-Extensions values against
// the offer a client made with cfg (RFC 7692 section 7.1: only an offered
// extension, once, with valid parameters; client_max_window_bits only
// because we offered it; server_no_context_takeover when we asked for it).
func parseResponse(values [][]byte, cfg *Deflate) (DeflateParams, error) {
	var p DeflateParams
	for _, v := range values {
		for len(v) > 0 {
			var elem []byte
			elem, v = splitList(v)
			if len(trim(elem)) == 0 {
				continue
			}
			name, params, _ := splitParam(elem)
			if !equalFold(trim(name), "permessage-deflate") || !cfg.Enabled {
				return p, errHandshake("extension not offered: " + string(trim(name)))
			}
			if p.Enabled {
				return p, errHandshake("permessage-deflate accepted twice")
			}
			o, ok := parseOffer(params)
			if !ok || (o.clientBitsPresent && o.clientBits == 0) {
				return p, errHandshake("invalid permessage-deflate parameters in the response")
			}
			if !cfg.ReadContextTakeover && !o.serverNoCtx {
				return p, errHandshake("server_no_context_takeover was asked for and not agreed")
			}
			if b := cfg.readWindowBits(); cfg.ReadContextTakeover && b < 15 && (o.serverBits == 0 || o.serverBits > b) {
				return p, errHandshake("server_max_window_bits above what was asked for")
			}
			p = DeflateParams{Enabled: true, ServerNoContextTakeover: o.serverNoCtx,
				ClientNoContextTakeover: o.clientNoCtx, ServerMaxWindowBits: o.serverBits,
				ClientMaxWindowBits: o.clientBits}
		}
	}
	return p, nil
}

func trim(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// isToken reports whether b is an RFC 9110 token.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0) {
			return false
		}
	}
	return true
}

// equalFold reports whether b is s, ASCII case-insensitive.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z' {
			return false
		}
	}
	return true
}
