// Package ws is a WebSocket codec (RFC 6455, and permessage-deflate, RFC
// 7692) for percore servers and clients, without I/O and without anything
// of the runtime: the opening handshake as functions over http1's parsed
// heads, frames parsed in place from the bytes a connection received, and
// frames written into the room of a caller's outbound buffer.
//
// # Reading
//
// Conn.Next is a pull parser for frame.View, like http1's decoders: it is
// shown the unconsumed input, and says how much it took and what it found:
//
//	// OnView of a frame.ViewHandler; wc is the connection's *ws.Conn.
//	func (s *server) OnView(c *percore.Conn, in []byte) (int, error) {
//		off := 0
//		for {
//			n, ev, p, err := wc.Next(in[off:])
//			off += n
//			switch {
//			case err != nil: // a *ws.CloseError: write a Close with its Code, close
//			case ev == ws.Text, ev == ws.Binary: // p: the message, valid until the next Next
//			case ev == ws.Ping: // answer with a Pong of p
//			case ev == ws.Close: // answer with PutClose(room, wc.CloseCode(), ""), then close
//			case ev == ws.NeedMore:
//				return off, nil
//			}
//		}
//	}
//
// The parser keeps its progress across reads: a frame's payload is
// unmasked in place (eight bytes at a time) and taken as it arrives; only
// a header (14 bytes at most) or a control frame (139) that is not whole
// is left unconsumed, so a message trickled in a byte at a time costs time
// linear in its size. A message that arrived whole in one frame is handed
// over in place, without a copy; a fragmented or compressed one is joined
// (or inflated) in a buffer of the Pool, held only while the message is
// partial and until the next call; Conn.Release gives it back, with the
// Conn's side state, when the connection goes away mid-message or failed.
// The Pool keeps some of these buffers for the next messages; Pool.Shed
// lets go of them (on a percore loop, register it with
// Loop.OnShedSpares, so that the runtime's return after a storm frees
// them). Decoder is the frame-level parser under
// Conn, for callers that want the pieces of a message as they arrive.
//
// # Strictness
//
// Every protocol violation fails the connection with the close code RFC
// 6455 gives for it, as a *CloseError: reserved bits without an extension
// that defines them, an unknown opcode, a fragmented control frame or one
// over 125 bytes, an unmasked frame from a client or a masked one from a
// server, a continuation frame with nothing to continue or a new message
// inside a fragmented one, a Close of one byte, with a code that may not
// be sent or with a reason that is not UTF-8 (1002, 1007), a text message
// that is not UTF-8 (1007, found at the first invalid byte, also across
// fragments and inside a frame whose payload is still arriving), and a
// frame or message over Limits (1009, for a compressed message also as it
// inflates). The Autobahn testsuite's fuzzingclient cases of sections 1 to
// 7, 9, 10, 12 and 13 are a table-driven test of this package
// (autobahn_test.go).
//
// # Writing
//
// The Put methods write a whole frame into a []byte the caller hands them
// (percore.Conn.Reserve's room; then Commit with the length they return),
// the payload copied once, into that room: PutMessage (compressed when the
// extension is in use), PutControl, PutClose; MaxLen says how much room a
// message needs. Pool.Prepare encodes a message once for fan-out:
// Conn.PutPrepared copies the shared encoding to every connection that can
// use it (see Prepared).
//
// # permessage-deflate
//
// Off by default (Config.Deflate). Without context takeover (the default
// when it is on) a connection holds no compression state between
// messages: the Pool's compressor and decompressor serve every connection
// of a loop. Context takeover costs each connection a window of the
// peer's plaintext (2^bits bytes, 32 KiB unless ReadWindowBits is lower)
// for reading and a compressor of its own (about 800 KiB) for writing.
// docs/decisions/0032-websocket-codec.md has the measurements, and what is
// done with the window sizes a peer asks for.
//
// # Restarts
//
// At a restart that hands connections to the new process
// (percore.Runtime.HandOver, docs/decisions/0054), a server on frame.View
// implements percore.HandoverHandler: it answers percore.ErrHandoverLater
// while a message is partly read (a fragmented message, or a frame View
// still holds), and otherwise returns what the connection needs in the
// new process (its subscriptions, and whether permessage-deflate was
// negotiated: a connection with context takeover holds compression state
// that cannot cross, and declines); the new process's OnAdopt rebuilds the
// Conn from it, without a handshake. Conn.AppendState writes the codec's
// part (StateLen bytes: ErrInMessage while a message is partly received,
// ErrNotPortable with a compression context in use or a close begun) and
// Conn.Resume makes a Conn of it again; the server appends its own
// (docs/decisions/0059; examples/ws_gateway). Under runtime/httpd the
// upgrade handler answers OnHandover, and httpd.Config.AdoptUpgraded makes
// it again in the new process. A connection that does not go gets
// OnShutdown: send PutClose with CloseServiceRestart (1012), then close
// once it is sent.
//
// # Threads
//
// A Conn, a Decoder and a Pool belong to one goroutine at a time (a
// connection's loop thread). A Prepared is immutable: any goroutine may
// write it. The package holds no state of its own: its functions are safe
// for concurrent use.
package ws
