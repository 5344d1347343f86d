//go:build linux

package main

import (
	"bytes"
	"strconv"

	"github.com/percore/percore/runtime/frame/http1"
)

// fieldRule is what the proxy does with a header field, by the field's
// definition in RFC 9110 and RFC 9112.
type fieldRule uint8

const (
	// fieldEndToEnd: forwarded as it came (every field not in fieldTable),
	// unless the message's Connection names it.
	fieldEndToEnd fieldRule = iota
	// fieldHopByHop: connection-specific, removed before forwarding
	// whether or not Connection names it (RFC 9110 7.6.1: "intermediaries
	// SHOULD remove or replace fields that are known to require removal").
	fieldHopByHop
	// fieldFraming: says where the message's body ends (RFC 9112 6). The
	// proxy forwards bodies with the framing they came with, so the field
	// goes with its body, and it can never be hop-by-hop: a message whose
	// Connection names one is refused (400 from a client, 502 from the
	// upstream). Removing it, as RFC 9110 7.6.1 would have, while the body
	// goes on as it came, makes the next hop read the body as the next
	// message: request smuggling (issue 31).
	fieldFraming
)

// fieldTable is every field with a rule of its own, and where the rule is
// written. Names are compared case-insensitively.
var fieldTable = []struct {
	name string
	rule fieldRule
	spec string
}{
	{"Connection", fieldHopByHop, "RFC 9110 7.6.1"},
	{"Keep-Alive", fieldHopByHop, "RFC 9110 7.6.1 (RFC 2068 19.7.1)"},
	{"Proxy-Connection", fieldHopByHop, "RFC 9110 7.6.1 (RFC 9112 C.2.2)"},
	{"TE", fieldHopByHop, "RFC 9110 7.6.1, 10.1.4"},
	{"Upgrade", fieldHopByHop, "RFC 9110 7.6.1, 7.8 (the proxy opens no tunnels)"},
	{"HTTP2-Settings", fieldHopByHop, "RFC 7540 3.2.1: connection-specific, sent only with Upgrade: h2c"},
	// Transfer-Encoding is in RFC 9110 7.6.1's list of fields to remove,
	// for an intermediary that decodes the body; this one forwards the
	// chunks as they came, so the coding goes with them.
	{"Transfer-Encoding", fieldFraming, "RFC 9112 6.1"},
	{"Content-Length", fieldFraming, "RFC 9112 6.2, 6.3"},
}

// ruleOf returns the rule of the field called name.
func ruleOf(name []byte) fieldRule {
	for i := range fieldTable {
		if http1.EqualFold(name, fieldTable[i].name) {
			return fieldTable[i].rule
		}
	}
	return fieldEndToEnd
}

// namedFraming returns the framing field that a Connection field of h
// names, or "" when none does: such a message is refused.
func namedFraming(h *http1.Headers) string {
	for _, f := range h.All() {
		if !http1.EqualFold(f.Name, "connection") {
			continue
		}
		for i := range fieldTable {
			if fieldTable[i].rule == fieldFraming && http1.HasToken(f.Value, fieldTable[i].name) {
				return fieldTable[i].name
			}
		}
	}
	return ""
}

// hopByHop reports whether a field is connection-specific, and so not
// forwarded: a hop-by-hop field of the table, or one that a Connection
// field of h names (RFC 9110 7.6.1). A framing field is never hop-by-hop
// (namedFraming refuses a message whose Connection names one).
func hopByHop(name []byte, h *http1.Headers) bool {
	switch ruleOf(name) {
	case fieldHopByHop:
		return true
	case fieldFraming:
		return false
	}
	for _, f := range h.All() {
		if http1.EqualFold(f.Name, "connection") && http1.HasToken(f.Value, string(name)) {
			return true
		}
	}
	return false
}

// appendUpstreamHead appends the request head the upstream gets: the
// request line in HTTP/1.1, the client's fields without the hop-by-hop ones
// and Expect (the proxy answered it), a Host when an HTTP/1.0 client sent
// none, and X-Forwarded-For with the client's address appended.
func appendUpstreamHead(dst []byte, req *http1.Request, clientIP, host []byte) []byte {
	dst = append(dst, req.Method...)
	dst = append(dst, ' ')
	dst = append(dst, req.Target...)
	dst = append(dst, " HTTP/1.1\r\n"...)
	var xff []byte
	hasHost := false
	for _, h := range req.Header.All() {
		switch {
		case hopByHop(h.Name, &req.Header):
			continue
		case len(h.Name) == 6 && http1.EqualFold(h.Name, "expect"):
			continue
		case len(h.Name) == 15 && http1.EqualFold(h.Name, "x-forwarded-for"):
			if xff != nil {
				// several fields are one list (RFC 9110 5.3)
				dst = append(dst, "X-Forwarded-For: "...)
				dst = append(dst, xff...)
				dst = append(dst, "\r\n"...)
			}
			xff = h.Value
			continue
		case len(h.Name) == 4 && http1.EqualFold(h.Name, "host"):
			hasHost = true
		}
		dst = append(dst, h.Name...)
		dst = append(dst, ": "...)
		dst = append(dst, h.Value...)
		dst = append(dst, "\r\n"...)
	}
	if !hasHost {
		dst = http1.AppendHeader(dst, "Host", host)
	}
	dst = append(dst, "X-Forwarded-For: "...)
	if len(xff) > 0 {
		dst = append(dst, xff...)
		dst = append(dst, ", "...)
	}
	dst = append(dst, clientIP...)
	return append(dst, "\r\n\r\n"...)
}

// appendClientHead appends the response head the client gets: the status
// line in HTTP/1.1, the upstream's fields without the hop-by-hop ones, and
// the proxy's own Connection field. A response with a Transfer-Encoding
// loses its Content-Length, if it had one (RFC 9112 6.3: the coding
// frames the body, and an intermediary removes the length before it
// forwards the message); one sent to an HTTP/1.0 client loses its
// Transfer-Encoding too (RFC 9112 6.1: no transfer coding to an HTTP/1.0
// recipient; a chunked body then goes de-chunked).
func appendClientHead(dst []byte, resp *http1.Response, closeAfter bool, minor int) []byte {
	dst = appendStatusLine(dst, resp)
	te := resp.Header.Has("transfer-encoding")
	for _, h := range resp.Header.All() {
		if hopByHop(h.Name, &resp.Header) {
			continue
		}
		if te && http1.EqualFold(h.Name, "content-length") {
			continue
		}
		if minor == 0 && http1.EqualFold(h.Name, "transfer-encoding") {
			continue
		}
		dst = append(dst, h.Name...)
		dst = append(dst, ": "...)
		dst = append(dst, h.Value...)
		dst = append(dst, "\r\n"...)
	}
	switch {
	case closeAfter:
		dst = append(dst, "Connection: close\r\n"...)
	case minor == 0:
		dst = append(dst, "Connection: keep-alive\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// appendInterimHead appends a 1xx response for the client: its status line
// and its fields without the hop-by-hop ones (an interim response frames
// no body, and Connection applies to the upstream's connection only).
func appendInterimHead(dst []byte, resp *http1.Response) []byte {
	dst = appendStatusLine(dst, resp)
	for _, h := range resp.Header.All() {
		if hopByHop(h.Name, &resp.Header) || ruleOf(h.Name) == fieldFraming {
			continue
		}
		dst = append(dst, h.Name...)
		dst = append(dst, ": "...)
		dst = append(dst, h.Value...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...)
}

func appendStatusLine(dst []byte, resp *http1.Response) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(resp.Status), 10)
	dst = append(dst, ' ')
	dst = append(dst, resp.Reason...)
	return append(dst, "\r\n"...)
}

// onlyChunked reports whether h's transfer codings are chunked alone: the
// one coding the proxy can take off for an HTTP/1.0 client.
func onlyChunked(h *http1.Headers) bool {
	n := 0
	for _, f := range h.All() {
		if !http1.EqualFold(f.Name, "transfer-encoding") {
			continue
		}
		for v := f.Value; len(v) > 0; {
			var elem []byte
			if i := bytes.IndexByte(v, ','); i >= 0 {
				elem, v = v[:i], v[i+1:]
			} else {
				elem, v = v, nil
			}
			elem = bytes.TrimSpace(elem)
			switch {
			case len(elem) == 0:
			case http1.EqualFold(elem, "chunked"):
				n++
			default:
				return false
			}
		}
	}
	return n == 1
}
