//go:build linux

package httpd

// A handler that panics gets 500 (or, once its response began, a close),
// logged and counted, and the loop lives. Handlers called from OnView are
// guarded once per read (guardedView), not once per request: a pipelined
// read of sixteen requests pays for one deferred call. Those called later
// (a held response's answer, runHeld) defer recovered.

// guardedView is view, with a panic of the handler it calls answered:
// the connection then closes (fail), so the whole input is consumed. A
// panic outside a handler's call (cn.active unset: the server's own code)
// is not recovered.
func (cn *conn) guardedView(in []byte) (n int, err error) {
	defer func() {
		if cn.active {
			if p := recover(); p != nil {
				cn.handlerPanicked(p)
				n, err = len(in), nil
			}
		}
	}()
	return cn.view(in)
}

// handled ends a handler's run that returned: what it wrote goes out (it
// flushes) when the response goes on after this callback.
func (cn *conn) handled() {
	if (!cn.ending || cn.held) && cn.w.started && !cn.w.ended && !cn.c.Closed() {
		cn.w.Flush() // the response goes on after this callback
	}
	cn.active = false
}

// recovered ends a handler's run outside OnView: handled, or a panic
// answered. It must be deferred directly.
func (cn *conn) recovered() {
	if p := recover(); p != nil {
		cn.handlerPanicked(p)
		return
	}
	cn.handled()
}

// handlerPanicked answers a handler's panic p: 500 (or a close), logged
// and counted.
func (cn *conn) handlerPanicked(p any) {
	cn.active = false
	cn.s.nPanic.Add(1)
	cn.s.log.Error("httpd: handler panic", "panic", p, "method", string(cn.req.Method()), "target", string(cn.req.Target()))
	cn.panicked = true
	cn.held = false
	cn.fail(500, "the handler panicked")
}
