//go:build linux

package httpd

import (
	"errors"

	percore "github.com/percore/percore/runtime"
)

// A restart's hand-over (percore.Runtime.HandOver, docs/decisions/0054,
// 0059): an HTTP/1.1 connection between requests keeps no state, so an
// idle keep-alive connection goes to the new process as it is, and its
// next request is read there. One in the middle of a request waits for the
// end of its response; one that cannot go gets OnShutdown, whose next
// response says Connection: close. An upgraded connection is its upgrade
// handler's to decide (a percore.HandoverHandler, else declined): what it
// attaches travels behind a tag byte, and the new process's
// Config.AdoptUpgraded makes its UpgradeHandler again from it.

var (
	_ percore.HandoverHandler = (*Server)(nil)
	_ percore.AdoptHandler    = (*Server)(nil)
)

// tagUpgraded is the first byte of an upgraded connection's state; a
// plain HTTP connection's state is empty.
const tagUpgraded = 'U'

// errNoAdopter closes an upgraded connection handed to a server without
// Config.AdoptUpgraded.
var errNoAdopter = errors.New("httpd: an upgraded connection was handed over, and Config.AdoptUpgraded is nil")

// OnHandover hands over c when no request is under way on it (no head
// begun, no body, no response held or offloaded) and it was not told to
// close; an upgraded connection is its upgrade handler's to decide, and
// declined when that has no OnHandover. (frame.View asks only when it
// holds no partial request.)
func (s *Server) OnHandover(c *percore.Conn) ([]byte, error) {
	if up, ok := upgradedOf(c); ok {
		return upgradedState(c, up)
	}
	cn, ok := c.Value().(*conn)
	switch {
	case !ok:
		return nil, percore.ErrHandoverDeclined
	case cn.up != nil && (cn.active || cn.inView || cn.job != nil || cn.held):
		return nil, percore.ErrHandoverLater
	case cn.up != nil:
		// Upgraded, and silent since: the server's state goes now, as
		// it would at the first byte after the upgrade.
		return upgradedState(c, cn.handOff())
	case cn.closeAfter || cn.shutdown || cn.eof:
		return nil, percore.ErrHandoverDeclined
	case cn.inRequest || cn.d.InBody() || cn.job != nil || cn.held || cn.active || cn.inView:
		return nil, percore.ErrHandoverLater
	}
	return nil, nil
}

// upgradedState is the state of an upgraded connection: the tag, then
// what its handler attaches.
func upgradedState(c *percore.Conn, up UpgradeHandler) ([]byte, error) {
	hh, ok := up.(percore.HandoverHandler)
	if !ok {
		return nil, percore.ErrHandoverDeclined
	}
	st, err := hh.OnHandover(c)
	if err != nil {
		return nil, err
	}
	return append([]byte{tagUpgraded}, st...), nil
}

// OnAdopt takes a connection the old process handed over: a plain one
// starts as a new connection (OnOpen), an upgraded one gets the
// UpgradeHandler Config.AdoptUpgraded makes of its state.
func (s *Server) OnAdopt(c *percore.Conn, state []byte) {
	if len(state) == 0 {
		s.OnOpen(c)
		return
	}
	var err error
	switch {
	case state[0] != tagUpgraded:
		err = errors.New("httpd: adopt: a state of another kind")
	case s.cfg.AdoptUpgraded == nil:
		err = errNoAdopter
	default:
		var up UpgradeHandler
		if up, err = s.cfg.AdoptUpgraded(c, state[1:]); err == nil && up == nil {
			err = errors.New("httpd: adopt: AdoptUpgraded returned no handler")
		}
		if err == nil {
			c.SetValue(up)
			return
		}
	}
	if n := s.adoptClosed.Add(1); n == 1 || n%1024 == 0 {
		s.log.Warn("httpd: adopted connection closed", "err", err, "closed_so_far", n)
	}
	c.Close()
}
