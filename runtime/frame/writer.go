//go:build linux

package frame

import (
	"encoding/binary"
	"math"

	percore "github.com/percore/percore/runtime"
)

// Writer writes frames to a connection, each with one Conn.Writev and no
// allocation. It holds the frame's header while Writev copies it, so one
// Writer must not be used by two loops at once: keep one per connection
// (the adapters do: see WriteFrame and WriteLine) or one per loop. The zero
// value is ready to use.
type Writer struct {
	hdr  [HeaderLen]byte
	bufs [2][]byte
}

// WriteFrame queues payload behind its 4-byte big-endian length header and
// returns the number of bytes queued (HeaderLen+len(payload)). A payload
// longer than math.MaxUint32 is a *TooLongError.
func (w *Writer) WriteFrame(c *percore.Conn, payload []byte) (int, error) {
	if uint64(len(payload)) > math.MaxUint32 {
		return 0, &TooLongError{Limit: math.MaxUint32, Got: len(payload)}
	}
	binary.BigEndian.PutUint32(w.hdr[:], uint32(len(payload)))
	return w.writev(c, w.hdr[:], payload)
}

// WriteLine queues line followed by '\n' and returns the number of bytes
// queued.
func (w *Writer) WriteLine(c *percore.Conn, line []byte) (int, error) {
	w.hdr[0] = '\n'
	return w.writev(c, line, w.hdr[:1])
}

func (w *Writer) writev(c *percore.Conn, a, b []byte) (int, error) {
	w.bufs = [2][]byte{a, b}
	n, err := c.Writev(w.bufs[:]...)
	w.bufs = [2][]byte{} // keep no reference to the caller's bytes
	return n, err
}

// WriteFrame writes payload as one length-prefixed frame to c with
// Writer.WriteFrame. On a connection served by LengthPrefixed, Lines or Split it
// uses the connection's own Writer and allocates nothing; elsewhere it
// allocates a Writer for the call (keep your own Writer to avoid that).
func WriteFrame(c *percore.Conn, payload []byte) (int, error) {
	return connWriter(c).WriteFrame(c, payload)
}

// WriteLine writes line and a '\n' to c with Writer.WriteLine. On a
// connection served by Lines, LengthPrefixed or Split it uses the connection's own
// Writer and allocates nothing; elsewhere it allocates a Writer for the
// call.
func WriteLine(c *percore.Conn, line []byte) (int, error) {
	return connWriter(c).WriteLine(c, line)
}

func connWriter(c *percore.Conn) *Writer {
	if s := sessionOf(c); s != nil {
		return &s.w
	}
	return new(Writer)
}
