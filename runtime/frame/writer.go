//go:build linux

package frame

import (
	"encoding/binary"
	"math"
	"sync"

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
// Writer.WriteFrame, allocating nothing: on a connection an adapter of
// this package keeps a session for, with the session's Writer; elsewhere
// (a connection under View between messages, or one no adapter serves)
// with a Writer borrowed for the call.
func WriteFrame(c *percore.Conn, payload []byte) (int, error) {
	if s := sessionOf(c); s != nil {
		return s.w.WriteFrame(c, payload)
	}
	w := writers.Get().(*Writer)
	n, err := w.WriteFrame(c, payload)
	writers.Put(w)
	return n, err
}

// WriteLine writes line and a '\n' to c with Writer.WriteLine, allocating
// nothing, with the Writer WriteFrame would use.
func WriteLine(c *percore.Conn, line []byte) (int, error) {
	if s := sessionOf(c); s != nil {
		return s.w.WriteLine(c, line)
	}
	w := writers.Get().(*Writer)
	n, err := w.WriteLine(c, line)
	writers.Put(w)
	return n, err
}

// writers are the Writers WriteFrame and WriteLine borrow for one call on a
// connection without a session of its own (View keeps none for an idle
// connection: decision 0065). A Writer holds nothing between calls, so
// any will do; sync.Pool keeps a cache per P, which is a loop's own while
// it runs.
var writers = sync.Pool{New: func() any { return new(Writer) }}
