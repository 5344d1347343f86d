//go:build linux

package httpd

import "github.com/percore/percore/runtime/frame/http1"

// The quick path: a request without a body whose handler is a plain
// Handler (the common one of a keep-alive or pipelined client: a GET of
// one path again and again) goes from its parsed head to its finished
// answer in one call, without the states the full path keeps for bodies,
// 100-continue and StreamHandlers (begin, then the decoder's End, then
// end): the decoder's End is taken at once, the route is the connection's
// kept one matched against the whole target (no split of the query, no
// Mux call), and the handler's answer ends as end would end it. What a
// handler does that leaves the common case (Hold, Go, Conn, a close, an
// upgrade, a panic) is met by the same code as on the full path (settle,
// finish, guardedView), so that the quick path changes no behaviour, only
// the work before the handler's call.

// quick answers the request whose head hr arrived, when it takes the
// quick path; it reports false, having changed nothing, when it does not
// (a body, Expect, another route, a StreamHandler): begin then starts it.
func (cn *conn) quick(hr *http1.Request) bool {
	if hr.HasBody() || hr.Expect100 {
		return false
	}
	s := cn.s
	var h Handler
	switch {
	case s.mux != nil:
		// The kept route is a static one (no parameters) whose path
		// the whole target equals: the target has no query, and the Mux
		// would route it to the same handler (routeCache).
		rc := &cn.route
		if rc.mh == nil || rc.mh.sh != nil || !rc.hit(hr.Target, hr.Method) {
			return false
		}
		h = rc.mh.h
		cn.req.startAt(hr, hr.Target, nil)
	case s.plain:
		h = s.h
		cn.req.start(hr)
	default:
		return false
	}
	// The request's End: no body to wait for (cannot fail, the decoder
	// is between this Head and its End).
	if _, ev, _, err := cn.d.Next(nil); ev != http1.End || err != nil {
		panic("httpd: a request without a body did not end at its head") // cannot happen
	}
	cn.inRequest, cn.ending = true, true
	cn.closeAfter = hr.Close || cn.shutdown
	if cn.copied || cn.piece != nil {
		cn.copied, cn.piece = false, nil
	}
	cn.w.start(hr)
	cn.h, cn.sh = h, nil
	cn.req.trailer = &hr.Trailer
	cn.serve(h)
	cn.settle()
	return true
}

// isPlain reports whether h answers every request itself, inline, and
// takes no body in pieces: a Server with it alone may take the quick path
// for every request without a body.
func isPlain(h Handler) bool {
	if _, ok := h.(Router); ok {
		return false
	}
	if _, ok := h.(StreamHandler); ok {
		return false
	}
	_, refuses := h.(refuser)
	return !refuses
}
