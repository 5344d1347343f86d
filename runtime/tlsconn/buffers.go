package tlsconn

import "sync"

// The buffers a session holds only while it has input it cannot hand over
// yet (a partial record, or records beyond a caller's budget) come from
// these pools and go back as soon as the input is consumed, so an idle
// session holds none. The classes cover a ClientHello (a few hundred bytes
// to 2 KB), a full record (MaxRecord) and a receive buffer's worth of
// records held back by a budget; a larger need is allocated and dropped.
var bufClasses = [...]int{1 << 10, 4 << 10, 20 << 10, 64 << 10}

var bufPools [len(bufClasses)]sync.Pool

// getBuf returns a box holding an empty slice with room for at least n
// bytes. The box travels with the slice so that putting it back does not
// allocate.
func getBuf(n int) *[]byte {
	for i, size := range bufClasses {
		if n <= size {
			if p, ok := bufPools[i].Get().(*[]byte); ok {
				*p = (*p)[:0]
				return p
			}
			b := make([]byte, 0, size)
			return &b
		}
	}
	b := make([]byte, 0, n)
	return &b
}

// putBuf gives a box back to its class; buffers of no class are dropped.
func putBuf(p *[]byte) {
	if p == nil {
		return
	}
	for i, size := range bufClasses {
		if cap(*p) == size {
			*p = (*p)[:0]
			bufPools[i].Put(p)
			return
		}
	}
}
