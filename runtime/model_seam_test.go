package runtime

// What the kernel-free tests of the io_uring driver read of its state of a
// connection, in one place: the receives it holds for a later turn.

// held returns how many receives c holds for a later turn.
func held(c *Conn) int { return len(c.ur.held()) }

// heldCopies returns how many of them were copied out of their provided
// buffers.
func heldCopies(c *Conn) int {
	n := 0
	for _, r := range c.ur.held() {
		if r.copied {
			n++
		}
	}
	return n
}

// listed reports whether c is on the list of connections whose held
// receives the next turn delivers.
func listed(c *Conn) bool { return c.ur.flags&ufListed != 0 }
