//go:build linux

package runtime

import "github.com/percore/percore/poller"

// The drivers' side of a hand-over (handoff.go): whether a connection
// whose reading is paused still has input that is not in the kernel's
// socket buffer.

// inputHeld: the multishot receive is armed until its last completion
// arrives (a cancel is on its way), and what it delivered meanwhile waits
// in c's deferred receives.
func (d *uringDriver) inputHeld(c *Conn) (armed, waiting bool) {
	return c.ur.flags&ufRecvArmed != 0, c.ur.hasWaiting()
}

// inputHeld: epoll reads only on the loop's thread, so a paused
// connection's input is all in the kernel once it has left the epoll set
// for input (its update is deferred while a flush runs).
func (d *epollDriver) inputHeld(c *Conn) (armed, waiting bool) {
	return c.ep.events&(poller.In|poller.RDHup) != 0, false
}
