package http1

import (
	"bytes"
	"encoding/binary"
	"strconv"
)

// InlineHeaders is how many header (or trailer) fields a decoder holds
// without allocating. A head with more fields grows a slice once; the
// decoder keeps it for its later messages.
const InlineHeaders = 32

// Header is one field line: its name as received (compare it with
// EqualFold) and its value without the whitespace around it. Both are
// slices of the decoder's input, valid as long as that input is.
type Header struct {
	Name, Value []byte
}

// Headers is a message's field lines, in the order received. Its zero value
// is empty and ready to use; it must not be copied once used (it points into
// itself).
type Headers struct {
	list   []Header
	inline [InlineHeaders]Header
}

// Len returns how many fields there are.
func (h *Headers) Len() int { return len(h.list) }

// At returns field i, in the order received.
func (h *Headers) At(i int) Header { return h.list[i] }

// All returns every field, in the order received: a slice the Headers owns,
// valid until its next message.
func (h *Headers) All() []Header { return h.list }

// Get returns the value of the first field named name (case-insensitive),
// or nil.
func (h *Headers) Get(name string) []byte {
	for i := range h.list {
		if EqualFold(h.list[i].Name, name) {
			return h.list[i].Value
		}
	}
	return nil
}

// Has reports whether a field named name (case-insensitive) is present.
func (h *Headers) Has(name string) bool {
	for i := range h.list {
		if EqualFold(h.list[i].Name, name) {
			return true
		}
	}
	return false
}

func (h *Headers) reset() {
	if h.list == nil {
		h.list = h.inline[:0]
	}
	clear(h.list) // drop references into old input
	h.list = h.list[:0]
}

func (h *Headers) add(name, value []byte) {
	h.list = append(h.list, Header{Name: name, Value: value})
}

// EqualFold reports whether the field name b is s, ASCII case-insensitive
// (field names are ASCII tokens; s is expected in any case).
func EqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || x|0x20 < 'a' || x|0x20 > 'z' {
			return false
		}
	}
	return true
}

// HasToken reports whether the comma-separated list value (a Connection
// field, say) holds token, case-insensitive, with the whitespace around the
// elements ignored.
func HasToken(value []byte, token string) bool {
	for len(value) > 0 {
		var elem []byte
		if i := bytes.IndexByte(value, ','); i >= 0 {
			elem, value = value[:i], value[i+1:]
		} else {
			elem, value = value, nil
		}
		if EqualFold(trimOWS(elem), token) {
			return true
		}
	}
	return false
}

// tchar is RFC 9110's token character set; fieldValue the bytes allowed in
// a field value (VCHAR, obs-text, SP, HTAB); targetChar the bytes allowed in
// a request target (VCHAR and obs-text: no whitespace, no control).
var (
	tchar = table(func(b byte) bool {
		return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
			bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), b) >= 0
	})
	fieldValue = table(func(b byte) bool { return b == ' ' || b == '\t' || (b > 0x20 && b != 0x7f) })
	targetChar = table(func(b byte) bool { return b > 0x20 && b != 0x7f })
	// hostChar: RFC 3986's reg-name and IP-literal characters, and ':'.
	hostChar = table(func(b byte) bool {
		return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
			bytes.IndexByte([]byte("-._~!$&'()*+;=:[]%"), b) >= 0
	})
)

func table(in func(byte) bool) (t [256]bool) {
	for c := range 256 {
		t[c] = in(byte(c))
	}
	return t
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// validValue reports whether every byte of v is a field-value byte: no
// control character but HTAB, no DEL. Eight bytes at a time: a word with no
// byte under 0x20 and none equal to 0x7f is valid as a whole (bytes from
// 0x80, obs-text, are valid and are excluded from the under-0x20 test by
// their high bit); a word that fails is checked byte by byte, for its tabs.
func validValue(v []byte) bool {
	for len(v) >= 8 {
		w := binary.LittleEndian.Uint64(v)
		under := (w - 0x20*lsb) &^ w & msb
		x := w ^ 0x7f*lsb
		del := (x - lsb) &^ x & msb
		if under|del != 0 {
			for _, c := range v[:8] {
				if !fieldValue[c] {
					return false
				}
			}
		}
		v = v[8:]
	}
	for _, c := range v {
		if !fieldValue[c] {
			return false
		}
	}
	return true
}

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !tchar[c] {
			return false
		}
	}
	return true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// line returns the line at the start of data, without its CRLF, and the
// length of the line with it; ok is false while no '\n' is there. A '\n'
// without its '\r' is a bad request. A '\r' elsewhere in the line is left
// to the caller, whose check of every byte of the line (tokens, field
// values, the request target, chunk sizes) rejects it as a control
// character: one scan of the line instead of two.
func line(data []byte) (ln []byte, n int, ok bool, err *Error) {
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		return nil, 0, false, nil
	}
	if i == 0 || data[i-1] != '\r' {
		return nil, 0, false, errBareLF
	}
	return data[:i-1], i + 1, true, nil
}

// parseFields parses field lines from data into h until the empty line that
// ends them, and returns the bytes taken (the empty line included), or
// ok false while that empty line has not arrived. max bounds the fields.
func parseFields(data []byte, h *Headers, max int) (n int, ok bool, err *Error) {
	for {
		ln, k, ok, err := line(data[n:])
		if err != nil || !ok {
			return n, false, err
		}
		n += k
		if len(ln) == 0 {
			return n, true, nil
		}
		name, value, err := fieldLine(ln, h.Len(), max)
		if err != nil {
			return n, false, err
		}
		h.add(name, value)
	}
}

// fieldLine checks a field line (without its CRLF, not empty) that would
// be field number have+1 of at most max, and returns its name and value.
func fieldLine(ln []byte, have, max int) (name, value []byte, err *Error) {
	if ln[0] == ' ' || ln[0] == '\t' {
		return nil, nil, errObsFold
	}
	colon := bytes.IndexByte(ln, ':')
	if colon <= 0 {
		return nil, nil, errNoColon
	}
	name = ln[:colon]
	if !isToken(name) {
		// Whitespace before the colon is RFC 9112's explicit case
		// (section 5.1): rejected, as every invalid name is.
		return nil, nil, errFieldName
	}
	value = trimOWS(ln[colon+1:])
	if !validValue(value) {
		return nil, nil, errFieldValue
	}
	if have >= max {
		return nil, nil, errTooManyFields
	}
	return name, value, nil
}

// parseContentLength parses a Content-Length value: 1*DIGIT, no sign, no
// list, at most 18 digits (so that it fits an int64 with room to add).
func parseContentLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// itoa appends n in decimal.
func itoa(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
