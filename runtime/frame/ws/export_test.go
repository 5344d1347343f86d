package ws

import "unsafe"

// Mask exposes mask to the tests.
func Mask(key [4]byte, phase int, b []byte) int { return mask(key, phase, b) }

// DeflatedFrame exposes the shared compressed frame to the tests.
func (pm *Prepared) DeflatedFrame() []byte { return pm.deflated }

// HoldsSide reports whether c holds a side state (its decoder's progress
// within a message, a failure, or a buffer).
func (c *Conn) HoldsSide() bool { return c.side != nil }

// SideSize is the size of a Conn's side state: what a Conn pays while it
// is mid-message, and what maxSpareSides bounds (decision 0074).
const SideSize = unsafe.Sizeof(side{})

// SpareSides and FreeBuffers count what p keeps for its Conns: spare side
// states and pooled buffers.
func (p *Pool) SpareSides() int { return len(p.sides) }

func (p *Pool) FreeBuffers() (n int) {
	for _, l := range p.free {
		n += len(l)
	}
	return n
}
