//go:build linux

package httpd

import (
	percore "github.com/percore/percore/runtime"
)

// Handler answers requests inline, on the connection's loop: ServeHTTP is
// called once the request's body (if any) has arrived whole (Request.Body),
// and the response ends when it returns, unless it called Response.Hold.
// It must not block: work that waits goes through Server.Go.
type Handler interface {
	ServeHTTP(w *Response, r *Request)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(w *Response, r *Request)

// ServeHTTP calls f(w, r).
func (f HandlerFunc) ServeHTTP(w *Response, r *Request) { f(w, r) }

// StreamHandler is a Handler that takes the body as it arrives, never
// held whole: ServeHTTP is called when the head has arrived, OnBody with
// each piece of the body (valid during the call), and OnEnd once it is
// complete; the response ends when OnEnd returns (unless it is held).
// What each call writes is sent when it returns: an echo streams.
type StreamHandler interface {
	Handler
	OnBody(w *Response, r *Request, piece []byte)
	OnEnd(w *Response, r *Request)
}

// Router is a Handler that picks the handler of a request from its head,
// before its body arrives, so that a StreamHandler among its routes gets
// the body in pieces and a request no route wants is refused before its
// body is read (an Expect: 100-continue answered with the final status).
// *Mux is one.
type Router interface {
	Handler
	Route(r *Request) Handler
}

// UpgradeHandler takes a connection over after Response.Upgrade: it is
// shown the connection's input (as a frame.ViewHandler is) from the first
// byte after the request's head. It may implement percore.CloseHandler,
// EOFHandler, DrainHandler and ShutdownHandler, which the server
// forwards.
type UpgradeHandler interface {
	OnView(c *percore.Conn, in []byte) (consumed int, err error)
}

// Upgrade hands the connection to h once the head written so far (say a
// 101 Switching Protocols with its Upgrade and Connection fields) is sent:
// no body follows, and the server reads no more requests from the
// connection. The request must have no body: one with a body is
// answered 400 instead, whatever head was written, and the connection
// closes. It reports whether the connection is h's: false when the
// response had ended, h is nil, the request has a body, or the client has
// gone (then h gets no callbacks, not even OnClose, and the caller undoes
// what it set up for h).
func (w *Response) Upgrade(h UpgradeHandler) bool {
	cn := w.cn
	if w.ended || h == nil {
		return false
	}
	if cn.req.hr.HasBody() {
		cn.fail(400, "an upgrade request with a body") // not a 101 the connection does not switch after
		return false
	}
	if !w.startHead() {
		return false
	}
	w.frame()
	w.ended = true
	w.send()
	cn.up = h
	cn.stopHeadTimer()
	return true
}

// refuser marks the handlers that refuse a request (404, 405, a
// redirect): one with Expect: 100-continue gets the final status, not
// 100 Continue, and its body is not read.
type refuser interface{ refuses() }
