package ws

import (
	"math/bits"

	"github.com/percore/percore/internal/spare"
)

// Config is what the connections of a server (or of a client) share: the
// limits, permessage-deflate, the subprotocols and origins of the opening
// handshake. Its zero value works: no extension, no subprotocol, any
// origin, the default limits. It must not change once in use.
type Config struct {
	// Limits bounds frames and messages received.
	Limits Limits
	// Deflate configures permessage-deflate (off by default).
	Deflate Deflate
	// Protocols are the subprotocols: a server's, in its order of
	// preference (it picks the first that the client also offers), or
	// those a client offers. Nil means none.
	Protocols []string
	// Origins, on a server, are the Origin values it accepts
	// (case-insensitive, e.g. "https://example.com"); a request from
	// another origin is refused with 403. Nil accepts any origin, and
	// requests without one (non-browser clients).
	Origins []string
	// PoolBuffers is how many spare message buffers a Pool keeps per size
	// class (powers of two from 512 bytes to 1 MiB). Zero means 16;
	// negative keeps none.
	PoolBuffers int
}

// Pool is what the connections of one goroutine (one percore loop, or the
// goroutine of a plain net.Conn server) share: their Config, the buffers
// that hold messages while they are partial, and the compressor and
// decompressor of the connections without context takeover. A Conn holds
// none of them between messages. A Pool is not safe for concurrent use:
// keep one per loop (percore.PerLoop).
type Pool struct {
	cfg   Config
	keep  int
	modes [4]Decoder // the Role, Deflate and Limits a Conn decodes with, by its mode's flags
	free  [numClasses][][]byte
	sides []*side // spare side states of Conns (at most maxSpareSides)

	comp    [8]*compressor // by window bits - 8: Deflate.Level at 15, reset per message
	decomp  *decompressor  // shared by every connection
	scratch []byte         // compressed output of Prepare
}

const (
	minClassBits = 9  // 512 B
	maxClassBits = 20 // 1 MiB
	numClasses   = maxClassBits - minClassBits + 1
)

// NewPool returns a Pool for connections configured by cfg.
func NewPool(cfg Config) *Pool {
	p := &Pool{cfg: cfg, keep: cfg.PoolBuffers}
	for i := range p.modes {
		p.modes[i] = Decoder{Role: Role(i & 1), Deflate: i&2 != 0, Limits: cfg.Limits}
	}
	if p.keep == 0 {
		p.keep = 16
	}
	return p
}

// Config returns the pool's configuration.
func (p *Pool) Config() *Config { return &p.cfg }

// class returns the size class whose buffers hold n bytes, or -1 when n
// is larger than the largest.
func class(n int) int {
	if n <= 1<<minClassBits {
		return 0
	}
	c := bits.Len(uint(n-1)) - minClassBits
	if c >= numClasses {
		return -1
	}
	return c
}

// get returns an empty buffer of capacity at least n.
func (p *Pool) get(n int) []byte {
	c := class(n)
	if c < 0 {
		return make([]byte, 0, n)
	}
	if l := p.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		p.free[c] = l[:len(l)-1]
		return b
	}
	return make([]byte, 0, 1<<(c+minClassBits))
}

// put gives a buffer back.
func (p *Pool) put(b []byte) {
	if cap(b) < 1<<minClassBits {
		return
	}
	c := bits.Len(uint(cap(b))) - 1 - minClassBits // the class it fully covers
	if c >= numClasses || len(p.free[c]) >= p.keep {
		return
	}
	p.free[c] = append(p.free[c], b[:0])
}

// grow returns b with room for at least n more bytes, moving it to a
// larger buffer of the pool when needed.
func (p *Pool) grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := p.get(max(len(b)+n, 2*cap(b)))
	nb = append(nb, b...)
	p.put(b)
	return nb
}

// maxSpareSides bounds the side states a Pool keeps for its Conns'
// messages partly received: 64 of 56 bytes. Most messages arrive whole
// and take none; a loop rarely has more than a few dozen connections in
// the middle of one at once, and past that the collector takes them.
const maxSpareSides = 64

// side returns a side state for a Conn whose message is partly received.
func (p *Pool) side() *side {
	if s := spare.Pop(&p.sides); s != nil {
		return s
	}
	return new(side)
}

// putSide takes back a side state that holds nothing.
func (p *Pool) putSide(s *side) {
	if len(p.sides) < maxSpareSides {
		*s = side{}
		p.sides = append(p.sides, s)
	}
}

// Shed lets go of what the pool keeps for the next burst: its spare
// message buffers, its spare side states and Prepare's scratch, so that
// the collector takes them; the pool makes new ones as its Conns need
// them. Buffers and side states that Conns hold stay theirs and come back
// to the pool as usual. The compressors and the decompressor stay (one
// each, shared by every Conn). On a percore loop, register it with
// Loop.OnShedSpares where the loop's Pool is made: the runtime sheds its loops
// when it returns the heap after a storm of connections.
func (p *Pool) Shed() {
	p.free = [numClasses][][]byte{}
	p.sides, p.scratch = nil, nil
}

// Spares returns how many spare message buffers and side states the pool
// keeps for its Conns (for a metric, or a test of Shed).
func (p *Pool) Spares() (buffers, sides int) {
	for _, l := range p.free {
		buffers += len(l)
	}
	return buffers, len(p.sides)
}

// compressor returns the shared compressor of a window of 2^bits bytes
// (8 to 15).
func (p *Pool) compressor(bits uint8) *compressor {
	c := &p.comp[bits-8]
	if *c == nil {
		*c = newCompressor(p.cfg.Deflate.level(), bits)
	}
	return *c
}

func (p *Pool) decompressor() *decompressor {
	if p.decomp == nil {
		p.decomp = newDecompressor()
	}
	return p.decomp
}
