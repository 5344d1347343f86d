// Package frame splits a percore connection's byte stream into frames, with
// a limit on every frame: lines ending in '\n' (LineDecoder, Lines) and
// frames prefixed with a 4-byte big-endian length (LengthDecoder,
// LengthPrefixed, like Tokio's LengthDelimitedCodec).
//
// A Handler's OnData receives whatever one read brought: half a frame,
// several frames, or the end of one and the start of the next. A decoder
// hands every complete frame to a callback, reassembling frames that
// arrived in pieces in its own buffer, and rejects a frame longer than its
// limit as soon as it can tell (from the length header, or once a line has
// more bytes than the limit without its end) without buffering more than
// the limit:
//
//	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:7001"},
//		frame.Lines(frame.LineHandlerFunc(func(c *percore.Conn, line []byte) {
//			frame.WriteLine(c, line)
//		}), frame.LineConfig{MaxLine: 1024}))
//
// # Threads
//
// A decoder, a Writer and the per-connection state of the adapters belong
// to one connection and are used on its loop's thread only, like the Conn.
//
// # Caveats
//
//   - A frame passed to a callback is valid only during the call. It points
//     into the data OnData received when the frame arrived whole (no copy),
//     or into the decoder's buffer when it arrived in pieces; either is
//     reused once the callback returns. Copy what you keep.
//   - After a decoder returns an error it is poisoned: every later Feed
//     returns the same error and delivers nothing, until Reset.
//   - The adapters (Lines, LengthPrefixed) keep their per-connection state
//     in Conn.Value. A handler served by them keeps its own
//     per-connection value with Value and SetValue of this package, never
//     with Conn.SetValue.
//   - A decoder keeps a buffer of up to 4 KiB between frames so that small
//     frames split across reads cost no allocation; a larger buffer is
//     released after the frame that needed it, so an idle connection holds
//     at most 4 KiB of framing state.
//
// It builds on Linux only (the runtime): elsewhere the package is empty.
package frame
