//go:build linux

package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/pool"
)

// upManager is the pool.Manager of the connections to one upstream server.
// Unlike upstream.Manager (runtime/pool/upstream), whose connections carry
// one request and one reply framed by a split function, these carry an HTTP
// exchange whose bodies stream both ways: each connection is read through
// frame.View (a response head is parsed in place), and tells its exchange
// when its outbound queue drains, for the backpressure of a request body.
type upManager struct {
	addr netip.AddrPort
}

var _ pool.Manager[*upConn] = (*upManager)(nil)

// upConn is one upstream connection. Its fields are touched only on the
// thread of the loop that dialed it.
type upConn struct {
	pc     *percore.Conn
	ex     *exchange // the exchange that holds it, or nil while pooled
	closed bool
	broken bool
	served int // exchanges completed on it
	err    error
}

func (m *upManager) Connect(loop pool.Loop, done func(*upConn, error)) {
	l, ok := loop.(*percore.Loop)
	if !ok {
		done(nil, fmt.Errorf("http_proxy: connect from a %T, not a *percore.Loop", loop))
		return
	}
	uc := &upConn{}
	h := frame.View(&upHandler{uc: uc}, frame.SplitConfig{MaxBuffered: maxHeld})
	err := l.DialAddrPort(m.addr, h, func(pc *percore.Conn, err error) {
		if err != nil {
			done(nil, err)
			return
		}
		// Config.IdleTimeout is the clients': an upstream connection is
		// silent while the proxy sends it a long upload or holds it back
		// for a slow client, and -timeout measures its silence once the
		// request is sent. Idle pooled connections are the pool's to
		// expire (its IdleTimeout).
		pc.SetIdleTimeout(0)
		uc.pc = pc
		done(uc, nil)
	})
	if err != nil {
		done(nil, err)
	}
}

func (m *upManager) Validate(_ pool.Loop, uc *upConn, done func(error)) {
	if uc.closed || uc.broken || uc.pc.Closed() {
		done(errors.New("http_proxy: upstream connection closed or broken"))
		return
	}
	done(nil)
}

// Broken: a connection is lent again only if it is open, in step (its last
// response was read whole, with nothing after it) and free.
func (m *upManager) Broken(uc *upConn) bool {
	return uc.closed || uc.broken || uc.ex != nil || uc.pc.Closed()
}

func (m *upManager) Close(uc *upConn) {
	uc.ex = nil
	uc.pc.Abort()
}

// upHandler receives an upstream connection's events and hands them to its
// exchange.
type upHandler struct{ uc *upConn }

var (
	_ frame.ViewHandler    = (*upHandler)(nil)
	_ frame.ErrorHandler   = (*upHandler)(nil)
	_ percore.CloseHandler = (*upHandler)(nil)
	_ percore.DrainHandler = (*upHandler)(nil)
)

func (h *upHandler) OnView(pc *percore.Conn, in []byte) (int, error) {
	uc := h.uc
	if uc.ex == nil {
		// Bytes nobody asked for: the connection is out of step.
		uc.broken = true
		pc.Abort()
		return len(in), nil
	}
	return uc.ex.upView(in), nil
}

func (h *upHandler) OnFrameError(pc *percore.Conn, err error) {
	h.uc.broken = true
}

func (h *upHandler) OnClose(_ *percore.Conn, err error) {
	uc := h.uc
	uc.closed = true
	if err != nil && !errors.Is(err, net.ErrClosed) {
		uc.err = err
	}
	if ex := uc.ex; ex != nil {
		ex.upClosed(err)
	}
}

func (h *upHandler) OnDrain(*percore.Conn) {
	if ex := h.uc.ex; ex != nil {
		ex.upDrained()
	}
}
