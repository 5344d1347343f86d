//go:build linux

package httpd

import percore "github.com/percore/percore/runtime"

// An upgraded connection keeps nothing of the server's: once the request
// that upgraded it has ended, its Value becomes the UpgradeHandler itself
// and the server's state for it (a conn of several KiB: the decoder, the
// Request and the Response) is let go, so that a connection upgraded to
// another protocol costs what that protocol keeps. The callbacks below
// forward to it from then on.

// handOff makes c's Value the UpgradeHandler and lets cn go.
func (cn *conn) handOff() UpgradeHandler {
	up := cn.up
	cn.stopHeadTimer()
	cn.stopHold()
	cn.releaseBuf()
	cn.c.SetValue(up)
	return up
}

// upgradedOf returns c's UpgradeHandler once it has been handed off.
func upgradedOf(c *percore.Conn) (UpgradeHandler, bool) {
	up, ok := c.Value().(UpgradeHandler)
	return up, ok
}

// forwardUpgraded runs what an upgraded connection's callback does, and
// reports whether c was one.
func forwardUpgraded(c *percore.Conn, f func(up UpgradeHandler)) bool {
	up, ok := upgradedOf(c)
	if ok {
		f(up)
	}
	return ok
}
