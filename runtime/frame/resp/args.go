package resp

import "strconv"

// What a server reads its commands' arguments with, as Redis reads them.

// EqualFold reports whether the argument b is the word upper, which must be
// upper-case ASCII ("NX", "EX", "KEEPTTL"), in any case: as Redis compares
// an option with strcasecmp, ASCII only (no Unicode folding, unlike
// bytes.EqualFold). It does not allocate.
func EqualFold(b []byte, upper string) bool {
	if len(b) != len(upper) {
		return false
	}
	for i := range len(b) {
		if b[i]&^0x20 != upper[i] {
			return false
		}
	}
	return true
}

// ParseInt parses an integer argument as Redis's string2ll does: decimal,
// an optional '-', no '+', no space, no leading zero ("-0", "007" and "+1"
// are not integers), within int64. It does not allocate.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	d := b
	if d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || d[0] < '1' || d[0] > '9' {
		return 0, false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}
