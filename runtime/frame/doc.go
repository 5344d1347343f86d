// Package frame splits a percore connection's byte stream into frames, with
// a limit on every frame: tokens of any bufio.SplitFunc or Scanner
// (Splitter, Split), lines ending in '\n' (ScanLines, LineScanner,
// LineDecoder, Lines) and frames prefixed
// with a 4-byte big-endian length (ScanLengthPrefixed, LengthDecoder,
// LengthPrefixed, like Tokio's LengthDelimitedCodec). The line and length
// codecs are split functions on the same machinery as Split, and every
// adapter hands its frames to the same Handler (OnFrame).
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
//		frame.Lines(frame.HandlerFunc(func(c *percore.Conn, line []byte) {
//			frame.WriteLine(c, line)
//		}), frame.LineConfig{MaxLine: 1024}))
//
// A protocol of its own brings its split function, in the shape Go users
// know from bufio.Scanner (runtime/frame/resp has one for Redis commands):
//
//	h := frame.Split(resp.ScanCommand(resp.Limits{}), server, frame.SplitConfig{MaxBuffered: 1 << 20})
//
// # Limits and progress
//
// Every limit of the package's configurations and decoders (MaxLine,
// MaxBuffered, MaxFrame) follows the runtime's rule: zero means its
// default (DefaultMaxLine, DefaultMaxBuffered, DefaultMaxFrame), and a
// negative value means no limit.
//
// A stateless split function is called over a held partial token again at
// every read that adds to it, as bufio.Scanner calls it, so a token that
// arrives in many reads costs the square of its length to split. A Scanner
// keeps its progress instead and costs its length: Lines and LineDecoder
// use a LineScanner, resp has ReplyScanner, and SplitConfig.Scanner and
// Splitter.Scanner take one of your own.
//
// # Pausing
//
// A handler that answers one request at a time (a proxy waiting for its
// upstream) calls PauseRead when a request starts and ResumeRead when it
// is answered: tokens are held back, and the connection stops reading.
// Conn.PauseRead alone stops the reads but not the tokens of the read
// being split. A View handler that leaves input unconsumed on purpose
// (a request answered later, the requests behind it waiting) shows it
// again with Redeliver, which leaves the reads as they are.
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
//   - The adapters (Split, Lines, LengthPrefixed, View) keep their
//     per-connection state in Conn.AdapterValue, so Conn.Value and
//     SetValue are the handler's own under every one of them.
//   - An adapter's connection holds a buffer only while it holds a partial
//     token: the buffer comes from a shared pool and goes back to it once
//     the token is complete. While completing a partial token the buffer
//     may briefly take a few hundred bytes more than the limit (the split
//     function is shown the next read's first bytes, then twice as many);
//     it never keeps more than the limit between reads. A standalone
//     decoder (Splitter, LineDecoder, LengthDecoder) keeps a buffer of up
//     to 4 KiB between frames so that small frames split across reads cost
//     no allocation; a larger one is released after the frame that needed
//     it.
//   - While paused (PauseRead), an adapter keeps the rest of the read it was
//     splitting, whatever its size (at most one read: the runtime reads no
//     more until ResumeRead).
//
// It builds on Linux only (the runtime): elsewhere the package is empty.
package frame
