//go:build linux

package httpd

import (
	"github.com/percore/percore/internal/spare"
	percore "github.com/percore/percore/runtime"
)

// An upgraded connection keeps nothing of the server's: once the request
// that upgraded it has ended, its Value becomes the UpgradeHandler itself
// and the server's state for it (a conn of several KiB: the decoder, the
// Request and the Response) is let go, so that a connection upgraded to
// another protocol costs what that protocol keeps. The callbacks below
// forward to it from then on.

// handOff makes c's Value the UpgradeHandler and lets cn go: to the
// loop's spares (at most Config.SpareStates), for the next connection,
// unless work of the server's may still hold it (an offloaded job, the
// adapter). A gateway's storm of upgrades then allocates a few states,
// not one of 7.7 KB per connection, all garbage a moment later. The
// Request and the Response are invalid after their handler returns (the
// package doc): nothing may reach cn.
func (cn *conn) handOff() UpgradeHandler {
	up := cn.up
	cn.stopHeadTimer()
	cn.stopHold()
	cn.releaseBuf()
	cn.c.SetValue(up)
	if ls := cn.ls; cn.job == nil && cn.aw == nil && !cn.held && len(ls.spare) < cn.s.spares {
		*cn = conn{}
		ls.spare = append(ls.spare, cn)
	}
	return up
}

// newConn returns a state for a new connection: a spare, or a new one.
func (ls *loopState) newConn() *conn {
	if cn := spare.Pop(&ls.spare); cn != nil {
		return cn
	}
	return new(conn)
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
