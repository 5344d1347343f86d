// Package http1 is a strict HTTP/1.1 codec (RFC 9112) for percore servers,
// proxies and clients: requests for a server, responses for a proxy or a
// load generator, their bodies (Content-Length and chunked, with trailers),
// and appenders for status lines, error replies and a cached Date.
//
// The decoders are pull parsers over the bytes a connection received, made
// for frame.View: Next is shown the unconsumed input and says how much of
// it it took and what it found (a head, a piece of the body, the end of the
// message, or nothing until more arrives):
//
//	// OnView of a frame.ViewHandler; d is the connection's *http1.RequestDecoder.
//	func (s *server) OnView(c *percore.Conn, in []byte) (int, error) {
//		d := c.Value().(*http1.RequestDecoder)
//		off := 0
//		for {
//			n, ev, piece, err := d.Next(in[off:])
//			off += n
//			switch {
//			case err != nil:
//				return off, err // a *http1.Error: answer its Status, then close
//			case ev == http1.Head:
//				req := d.Request() // valid during this call only
//			case ev == http1.Body:
//				// piece: a slice of in, valid during this call only
//			case ev == http1.End:
//				// the request is complete: answer it
//			case ev == http1.NeedMore:
//				return off, nil
//			}
//		}
//	}
//
// A head is parsed only when it is whole (Next takes nothing of a partial
// head, so View keeps it and shows it again with the next read). A decoder
// keeps its progress through a partial head, a chunk-size line and a
// trailer section between calls, so that each byte is read about once
// however many reads a head takes (a head trickled in pieces is not parsed
// again from its start at every piece); each call's data must therefore
// begin with the bytes the last call did not consume, as View's does, or
// follow a Reset. Body bytes
// are handed over as they arrive, without a copy, so that a body is never
// held whole. Every byte Next consumes belongs to the message: a proxy
// forwards a body's framing as it came by forwarding in[off:off+n] after
// every Body, End and NeedMore in the body.
//
// # Strictness
//
// The request side rejects, with the status RFC 9112 and RFC 9110 give:
// a bare LF or CR where CRLF is required, obs-fold (a header line starting
// with a space or tab), whitespace between a field name and its colon,
// control characters in a field value, a request with both Content-Length
// and Transfer-Encoding, differing or malformed Content-Length values,
// Transfer-Encoding in an HTTP/1.0 request, a transfer coding other than
// chunked (501), chunked not last, a missing or repeated Host in HTTP/1.1,
// an HTTP version other than 1.0 and 1.1 (505), an expectation other than
// 100-continue (417), and the limits: a request line over
// Limits.MaxRequestLine (414), a head over Limits.MaxHeaderBytes or with
// more than Limits.MaxHeaders fields (431), a body over Limits.MaxBody (413).
// Every rejection is an *Error with its Status; the connection must be
// closed after the reply, since its framing can no longer be trusted.
//
// # Allocation
//
// Parsing allocates nothing: a head's fields are slices of the input, held
// in an array inside the decoder for up to InlineHeaders fields (more grow
// a slice once, which the decoder then keeps for later requests).
//
// # Threads
//
// A decoder belongs to one connection and is used on one goroutine at a
// time (the connection's loop thread). The package holds no state of its
// own: its functions are safe for concurrent use.
package http1
