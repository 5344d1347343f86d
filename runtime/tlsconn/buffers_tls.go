package tlsconn

import (
	"bytes"
	"crypto/tls"
	"reflect"
	"sync"
	"unsafe"
)

// A tls.Conn keeps its input buffers for its whole life: Conn.rawInput (a
// bytes.Buffer of ciphertext, grown to the largest record read plus 512
// bytes) and Conn.hand (a bytes.Buffer of handshake messages, grown to the
// largest flight), and Conn.input (a bytes.Reader over rawInput's memory).
// bytes.Buffer never shrinks. After a handshake they hold about 3.5 KB of a
// server session's 7 KB of heap, and after one full-size record rawInput
// alone holds 17 KB, per connection, for as long as it stays open.
//
// crypto/tls has no way to give them back, and it cannot be forked any more
// (it imports crypto/internal/fips140/..., which no package outside the
// standard library may import; docs/decisions/0033-tls-engine.md). So the
// session lends the tls.Conn a pooled rawInput for each Decrypt and takes
// it back afterwards, and drops hand when it is empty: it writes those three
// unexported fields through their offsets, found by name and checked by type
// with reflect when the package starts. The fields are touched only when the
// tls.Conn is not inside a method (it is the loop's, between calls) and only
// when empty, so no byte crypto/tls still needs is ever dropped. If a Go
// release renames or retypes them, bufferAccess is off, the session keeps
// crypto/tls's own buffers (correct, only bigger), and TestBufferAccess
// fails so the upgrade is noticed.
var bufferAccess = func() (a struct {
	ok             bool
	rawInput, hand uintptr
	input          uintptr
}) {
	t := reflect.TypeFor[tls.Conn]()
	field := func(name string, typ reflect.Type) (uintptr, bool) {
		f, ok := t.FieldByName(name)
		return f.Offset, ok && f.Type == typ && len(f.Index) == 1
	}
	var ok1, ok2, ok3 bool
	a.rawInput, ok1 = field("rawInput", reflect.TypeFor[bytes.Buffer]())
	a.hand, ok2 = field("hand", reflect.TypeFor[bytes.Buffer]())
	a.input, ok3 = field("input", reflect.TypeFor[bytes.Reader]())
	a.ok = ok1 && ok2 && ok3
	return a
}()

// BufferAccess reports whether sessions manage the tls.Conn's input
// buffers (see docs/decisions/0033-tls-engine.md): true on the Go releases
// this package knows; false means each idle session keeps crypto/tls's own
// buffers, a few KB more.
func BufferAccess() bool { return bufferAccess.ok }

func rawInputOf(tc *tls.Conn) *bytes.Buffer {
	return (*bytes.Buffer)(unsafe.Add(unsafe.Pointer(tc), bufferAccess.rawInput))
}

func handOf(tc *tls.Conn) *bytes.Buffer {
	return (*bytes.Buffer)(unsafe.Add(unsafe.Pointer(tc), bufferAccess.hand))
}

func inputOf(tc *tls.Conn) *bytes.Reader {
	return (*bytes.Reader)(unsafe.Add(unsafe.Pointer(tc), bufferAccess.input))
}

// rawInputSize is the lent buffer's capacity: crypto/tls grows rawInput to
// a record's length plus bytes.MinRead, and a record is at most MaxRecord.
const rawInputSize = MaxRecord + 512

var rawInputPool = sync.Pool{New: func() any { b := make([]byte, 0, rawInputSize); return &b }}

// lend gives the tls.Conn a pooled rawInput for the records it is about to
// read. It returns the box to give back.
func lend(tc *tls.Conn) *[]byte {
	if !bufferAccess.ok {
		return nil
	}
	ri := rawInputOf(tc)
	if ri.Len() > 0 {
		return nil // never happens: every Decrypt leaves it empty
	}
	box := rawInputPool.Get().(*[]byte)
	*ri = *bytes.NewBuffer((*box)[:0])
	return box
}

// reclaim takes back what lend gave, once crypto/tls has consumed it all,
// and drops the tls.Conn's other buffers if they are empty.
func reclaim(tc *tls.Conn, box *[]byte) {
	if !bufferAccess.ok {
		return
	}
	ri := rawInputOf(tc)
	in := inputOf(tc)
	if ri.Len() > 0 || in.Len() > 0 {
		return // keep it: crypto/tls still needs those bytes
	}
	*ri = bytes.Buffer{}
	*in = bytes.Reader{}
	if box != nil {
		rawInputPool.Put(box)
	}
	if h := handOf(tc); h.Len() == 0 && h.Cap() > 0 {
		*h = bytes.Buffer{}
	}
}
