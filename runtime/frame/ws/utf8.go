package ws

import "encoding/binary"

// utf8State is the state of a streamed UTF-8 validation: how a text
// message's bytes so far end. Zero is "on a code point boundary"; the other
// states say how many continuation bytes are still due and, for the lead
// bytes whose second byte is restricted (E0, ED, F0, F4: no overlong forms,
// no surrogates, nothing above U+10FFFF), which range the next byte must
// fall in. It fails at the first byte that cannot belong to valid UTF-8
// (RFC 3629), so a message is rejected as soon as it goes wrong, not at its
// end: what the Autobahn testsuite's section 6.4 checks.
type utf8State uint8

const (
	utf8Accept  utf8State = iota
	utf8Need1             // 80-BF, then accept
	utf8Need2             // 80-BF, then utf8Need1
	utf8Need3             // 80-BF, then utf8Need2
	utf8AfterE0           // A0-BF, then utf8Need1
	utf8AfterED           // 80-9F, then utf8Need1
	utf8AfterF0           // 90-BF, then utf8Need2
	utf8AfterF4           // 80-8F, then utf8Need2
	utf8Reject
)

// utf8Lead is the state after a byte read on a boundary.
var utf8Lead = func() (t [256]utf8State) {
	for c := range 256 {
		switch {
		case c < 0x80:
			t[c] = utf8Accept
		case c >= 0xC2 && c <= 0xDF:
			t[c] = utf8Need1
		case c == 0xE0:
			t[c] = utf8AfterE0
		case c == 0xED:
			t[c] = utf8AfterED
		case c >= 0xE1 && c <= 0xEF:
			t[c] = utf8Need2
		case c == 0xF0:
			t[c] = utf8AfterF0
		case c >= 0xF1 && c <= 0xF3:
			t[c] = utf8Need3
		case c == 0xF4:
			t[c] = utf8AfterF4
		default: // 80-C1 (continuation, overlong 2-byte leads), F5-FF
			t[c] = utf8Reject
		}
	}
	return t
}()

// utf8Cont holds, for each state expecting a continuation byte, its range
// and the state after it.
var utf8Cont = [...]struct {
	lo, hi byte
	next   utf8State
}{
	utf8Need1:   {0x80, 0xBF, utf8Accept},
	utf8Need2:   {0x80, 0xBF, utf8Need1},
	utf8Need3:   {0x80, 0xBF, utf8Need2},
	utf8AfterE0: {0xA0, 0xBF, utf8Need1},
	utf8AfterED: {0x80, 0x9F, utf8Need1},
	utf8AfterF0: {0x90, 0xBF, utf8Need2},
	utf8AfterF4: {0x80, 0x8F, utf8Need2},
}

// feed validates p as the continuation of the bytes seen so far and
// returns the new state, utf8Reject at the first invalid byte. On a
// boundary it skips ASCII eight bytes at a time.
func (s utf8State) feed(p []byte) utf8State {
	i := 0
	for i < len(p) {
		if s == utf8Accept {
			for len(p)-i >= 8 && binary.LittleEndian.Uint64(p[i:])&0x8080808080808080 == 0 {
				i += 8
			}
			if i == len(p) {
				break
			}
			s = utf8Lead[p[i]]
			if s == utf8Reject {
				return s
			}
			i++
			continue
		}
		c := utf8Cont[s]
		if b := p[i]; b < c.lo || b > c.hi {
			return utf8Reject
		}
		s = c.next
		i++
	}
	return s
}

// validUTF8 reports whether p is whole, valid UTF-8.
func validUTF8(p []byte) bool { return utf8Accept.feed(p) == utf8Accept }
