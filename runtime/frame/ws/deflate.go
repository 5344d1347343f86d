package ws

import (
	"errors"
	"io"

	"github.com/klauspost/compress/flate"
)

// permessage-deflate (RFC 7692) on github.com/klauspost/compress/flate,
// a drop-in for compress/flate that reuses its Huffman tables between
// messages (compress/flate allocates them anew for every dynamic block
// with long codes), keeps a smaller compressor, and can limit its window
// (decision record 0032 has the measurements).
//
// A message is compressed as DEFLATE blocks ended by a sync flush, whose
// empty stored block's last four bytes (00 00 FF FF) are taken off before
// sending and put back before inflating (section 7.2.1). Without context
// takeover each message is compressed and inflated on its own, so the
// compressor and the decompressor are shared by every connection of a
// Pool and a connection holds none of them between messages. With it,
// a connection keeps what the next message refers back to: for reading,
// the last 2^bits bytes of plaintext, which the shared decompressor is
// reset with (flate.Resetter's dictionary); for writing, its own
// flate.Writer, whose window carries over from one sync flush to the next.
//
// Window sizes: a limit asked of the peer's compressor costs our
// decompressor nothing (a smaller window inflates with a 32 KiB one). A
// limit asked of ours (server_max_window_bits below 15 from a client,
// client_max_window_bits below 15 from a server) is kept by a compressor
// made with that window (flate.NewWriterWindow), shared by the Pool's
// connections of that window without context takeover, a connection's own
// with it.

// tail is what a sync flush ends with, and what the sender removes.
var tail = [4]byte{0x00, 0x00, 0xFF, 0xFF}

// inflateTail is put back after a message before inflating it: the sync
// flush's four bytes, then a final empty stored block, so that the reader
// ends the stream with io.EOF rather than io.ErrUnexpectedEOF.
var inflateTail = []byte{0x00, 0x00, 0xFF, 0xFF, 0x01, 0x00, 0x00, 0xFF, 0xFF}

// DefaultCompressThreshold is the shortest message compressed when
// Deflate.Threshold is zero: below it DEFLATE's block overhead and the
// work outweigh the saving.
const DefaultCompressThreshold = 128

// Deflate configures permessage-deflate. Its zero value leaves the
// extension off: compression usually costs more CPU than it saves
// bandwidth on small messages, and with context takeover it costs memory
// per connection (docs/decisions/0032-websocket-codec.md has the figures).
type Deflate struct {
	// Enabled offers (client) or accepts (server) permessage-deflate.
	Enabled bool
	// Level is the flate level, 1 (BestSpeed) to 9. Zero means 1. (A
	// compressor whose window a peer limited below 32 KiB has one level
	// of its own.)
	Level int
	// Threshold is the shortest message PutMessage compresses; shorter
	// ones go uncompressed (RFC 7692 lets each message choose). Zero means
	// DefaultCompressThreshold, negative compresses every message.
	Threshold int
	// WriteContextTakeover lets this end's compressor keep its window
	// from one message to the next (better compression of similar
	// messages): each connection then holds a flate.Writer of its own,
	// hundreds of KiB. False (the zero value) asks for no context
	// takeover (server_no_context_takeover from a server,
	// client_no_context_takeover from a client), and the compressor is
	// shared by the Pool's connections.
	WriteContextTakeover bool
	// ReadContextTakeover lets the peer's compressor keep its window:
	// each connection then holds the last 2^ReadWindowBits bytes it
	// received. False (the zero value) asks the peer for no context
	// takeover.
	ReadContextTakeover bool
	// ReadWindowBits (8 to 15) is the window asked of the peer's
	// compressor when ReadContextTakeover is set, to bound what each
	// connection holds. Zero means 15 (32 KiB).
	ReadWindowBits int
}

func (c *Deflate) level() int {
	if c.Level < 1 || c.Level > 9 {
		return flate.BestSpeed
	}
	return c.Level
}

func (c *Deflate) threshold() int {
	if c.Threshold == 0 {
		return DefaultCompressThreshold
	}
	return c.Threshold
}

func (c *Deflate) readWindowBits() uint8 {
	if c.ReadWindowBits < 8 || c.ReadWindowBits > 15 {
		return 15
	}
	return uint8(c.ReadWindowBits)
}

// deflateBound is the most that compressing n bytes can produce with a
// sync flush: stored blocks (5 bytes of header per 16 KiB at most; flate
// falls back to them when Huffman coding would be larger) and the flush.
// TestDeflateBound checks it on incompressible data.
func deflateBound(n int) int { return n + n>>12 + 32 }

// sink is the io.Writer a compressor writes into: the room of a caller's
// buffer, which it does not grow beyond (a full sink fails the write).
type sink struct {
	buf []byte
}

var errSinkFull = errors.New("ws: compressed message does not fit the room")

func (s *sink) Write(p []byte) (int, error) {
	if cap(s.buf)-len(s.buf) < len(p) {
		return 0, errSinkFull
	}
	s.buf = append(s.buf, p...)
	return len(p), nil
}

// compressor is a flate.Writer and its sink.
type compressor struct {
	w *flate.Writer
	s sink
}

// newCompressor returns a compressor at level with a window of 2^bits
// bytes (bits 8 to 15).
func newCompressor(level int, bits uint8) *compressor {
	c := &compressor{}
	if bits < 15 {
		c.w, _ = flate.NewWriterWindow(&c.s, 1<<bits) // 256 to 16 KiB: in range
	} else {
		c.w, _ = flate.NewWriter(&c.s, level) // the level is in range: no error
	}
	return c
}

// compress appends the compressed form of p to dst, within dst's capacity,
// without the sync flush's tail. reset starts a new stream (no context
// takeover); otherwise the window of the previous messages is kept.
func (c *compressor) compress(dst, p []byte, reset bool) ([]byte, error) {
	c.s.buf = dst
	if reset {
		c.w.Reset(&c.s)
	}
	_, err := c.w.Write(p)
	if err == nil {
		err = c.w.Flush()
	}
	out := c.s.buf
	c.s.buf = nil
	if err != nil {
		// The writer's state is lost with the failed write: a connection
		// with context takeover can no longer compress (Conn fails it).
		c.w.Reset(&c.s)
		return dst, err
	}
	if n := len(out); n >= len(dst)+4 && [4]byte(out[n-4:]) == tail {
		out = out[:n-4]
	}
	return out, nil
}

// source reads a message and then inflateTail, for the decompressor: a
// flate.Reader (io.ByteReader too), so that flate does not wrap it in a
// bufio.Reader of its own.
type source struct {
	p []byte
	t int // bytes of inflateTail read
}

func (s *source) Read(b []byte) (int, error) {
	if len(s.p) > 0 {
		n := copy(b, s.p)
		s.p = s.p[n:]
		return n, nil
	}
	if s.t == len(inflateTail) {
		return 0, io.EOF
	}
	n := copy(b, inflateTail[s.t:])
	s.t += n
	return n, nil
}

func (s *source) ReadByte() (byte, error) {
	if len(s.p) > 0 {
		c := s.p[0]
		s.p = s.p[1:]
		return c, nil
	}
	if s.t == len(inflateTail) {
		return 0, io.EOF
	}
	c := inflateTail[s.t]
	s.t++
	return c, nil
}

// decompressor is a flate reader and its source.
type decompressor struct {
	r   io.ReadCloser
	src source
}

func newDecompressor() *decompressor {
	d := &decompressor{}
	d.r = flate.NewReader(&d.src)
	return d
}

// inflate appends the inflated form of the compressed message p to dst,
// growing it from pool, and fails with errMessageTooBig past limit bytes
// (limit < 0: no limit) and errInflate on data that is not DEFLATE. dict is
// the window of earlier messages (context takeover), or nil.
func (d *decompressor) inflate(pool *Pool, dst, p, dict []byte, limit int64) ([]byte, *CloseError) {
	d.src = source{p: p}
	if err := d.r.(flate.Resetter).Reset(&d.src, dict); err != nil {
		return dst, errInflate
	}
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = pool.grow(dst, max(4096, len(dst)-start))
		}
		n, err := d.r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if limit >= 0 && int64(len(dst)-start) > limit {
			d.src = source{}
			return dst, errMessageTooBig
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			d.src = source{}
			return dst, errInflate
		}
	}
	d.src = source{}
	return dst, nil
}

// window is the last bytes of plaintext a connection received, for the
// peer's context takeover: the dictionary its next message is inflated
// with.
type window struct {
	b    []byte
	size int
}

func (w *window) add(p []byte) {
	if len(p) >= w.size {
		w.b = append(w.b[:0], p[len(p)-w.size:]...)
		return
	}
	if len(w.b)+len(p) > w.size {
		drop := len(w.b) + len(p) - w.size
		w.b = w.b[:copy(w.b, w.b[drop:])]
	}
	w.b = append(w.b, p...)
}
