//go:build linux

package main

import (
	"strconv"

	"github.com/percore/percore/runtime/frame/http1"
)

// hopByHop reports whether a field is connection-specific (RFC 9110
// section 7.6.1), and so not forwarded: Connection and the fields it names,
// Keep-Alive, Proxy-Connection, TE and Upgrade. Transfer-Encoding is
// connection-specific too, but the body is forwarded with its framing as it
// came, so its coding is kept with it.
func hopByHop(name []byte, connection *http1.Headers) bool {
	switch len(name) {
	case 2:
		if http1.EqualFold(name, "te") {
			return true
		}
	case 7:
		if http1.EqualFold(name, "upgrade") {
			return true
		}
	case 10:
		if http1.EqualFold(name, "connection") || http1.EqualFold(name, "keep-alive") {
			return true
		}
	case 16:
		if http1.EqualFold(name, "proxy-connection") {
			return true
		}
	}
	for _, h := range connection.All() {
		if http1.EqualFold(h.Name, "connection") && http1.HasToken(h.Value, string(name)) {
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
// line in HTTP/1.1, the upstream's fields without the hop-by-hop ones (and
// without Transfer-Encoding when the body is sent de-chunked to an HTTP/1.0
// client), and the proxy's own Connection field.
func appendClientHead(dst []byte, resp *http1.Response, closeAfter bool, minor int, dechunk bool) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(resp.Status), 10)
	dst = append(dst, ' ')
	dst = append(dst, resp.Reason...)
	dst = append(dst, "\r\n"...)
	for _, h := range resp.Header.All() {
		if hopByHop(h.Name, &resp.Header) {
			continue
		}
		if dechunk && http1.EqualFold(h.Name, "transfer-encoding") {
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
