//go:build linux

package httpd

import percore "github.com/percore/percore/runtime"

// A restart's hand-over (percore.Runtime.HandOver, docs/decisions/0054):
// an HTTP/1.1 connection between requests keeps no state, so an idle
// keep-alive connection goes to the new process as it is, and its next
// request is read there. One in the middle of a request waits for the end
// of its response; one that cannot go gets OnShutdown, whose next response
// says Connection: close.

var _ percore.HandoverHandler = (*Server)(nil)

// OnHandover hands over c when no request is under way on it (no head
// begun, no body, no response held or offloaded) and it was not told to
// close; an upgraded connection is its upgrade handler's to decide, and
// declined when that has no OnHandover. (frame.View asks only when it
// holds no partial request.)
func (s *Server) OnHandover(c *percore.Conn) ([]byte, error) {
	cn, ok := c.Value().(*conn)
	switch {
	case !ok:
		return nil, percore.ErrHandoverDeclined
	case cn.up != nil:
		if hh, ok := cn.up.(percore.HandoverHandler); ok {
			return hh.OnHandover(c)
		}
		return nil, percore.ErrHandoverDeclined
	case cn.closeAfter || cn.shutdown || cn.eof:
		return nil, percore.ErrHandoverDeclined
	case cn.inRequest || cn.d.InBody() || cn.job != nil || cn.held || cn.active || cn.inView:
		return nil, percore.ErrHandoverLater
	}
	return nil, nil
}
