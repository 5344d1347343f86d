//go:build linux

package main

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/http1"
)

// server answers HTTP/1.1 requests. Its per-loop state is a Date cache and
// the buffer the responses of one read are gathered in.
type server struct {
	lim         http1.Limits
	headTimeout time.Duration
	loops       percore.PerLoop[loopState]
}

// loopState is one loop's: touched only on that loop's thread.
type loopState struct {
	date http1.Date
	out  []byte // the responses of the read being answered
}

// The callbacks frame.View forwards, checked by the compiler.
var (
	_ frame.ViewHandler       = (*server)(nil)
	_ frame.ErrorHandler      = (*server)(nil)
	_ percore.OpenHandler     = (*server)(nil)
	_ percore.CloseHandler    = (*server)(nil)
	_ percore.ShutdownHandler = (*server)(nil)
)

func newServer(lim http1.Limits, headTimeout time.Duration) *server {
	if lim.MaxHeaderBytes <= 0 {
		lim.MaxHeaderBytes = http1.DefaultMaxHeaderBytes
	}
	return &server{lim: lim, headTimeout: headTimeout}
}

// setup is Config.LoopSetup: each loop's state.
func (s *server) setup(l *percore.Loop) error {
	s.loops.Set(l, loopState{out: make([]byte, 0, 32<<10)})
	return nil
}

// handler is the server's percore.Handler. What View may hold between reads
// is a partial head (the decoder rejects one over MaxHeaderBytes), a partial
// chunk line or trailer section, or, while a request is paused (/sleep),
// the rest of one read: MaxHeaderBytes plus two reads bounds them all.
func (s *server) handler() percore.Handler {
	return frame.View(s, frame.SplitConfig{MaxBuffered: s.lim.MaxHeaderBytes + 2*percore.DefaultBufferSize})
}

// route is what a request asks for.
type route uint8

const (
	routeNotFound route = iota
	routePlaintext
	routeJSON
	routeEcho
	routeSleep
	routeBadMethod
)

// conn is one connection's state.
type conn struct {
	d          http1.RequestDecoder
	route      route
	allow      string // the methods of a routeBadMethod path
	head       bool   // a HEAD request: no body in the response
	minor      int
	closeAfter bool // Connection: close on this response, then close
	shutdown   bool // a graceful shutdown began
	responded  bool // this request's response head is written
	chunked    bool // the echo is chunked
	begun      bool // BeginRequest was called for this request
	sleepFor   time.Duration
	sleeping   *percore.Timer
	headTimer  *percore.Timer
	headSince  bool // a partial head is waiting, the head timer armed
	c          *percore.Conn
	s          *server
}

func (s *server) OnOpen(c *percore.Conn) {
	c.SetValue(&conn{d: http1.RequestDecoder{Limits: s.lim}, c: c, s: s})
}

func (s *server) OnClose(c *percore.Conn, _ error) {
	if cn, ok := c.Value().(*conn); ok {
		if cn.sleeping != nil {
			cn.sleeping.Stop()
		}
		if cn.headTimer != nil {
			cn.headTimer.Stop()
		}
	}
}

// OnShutdown marks the connection: the response in flight, if any, says
// Connection: close and the connection closes after it. (Idle connections
// the runtime closes itself.)
func (s *server) OnShutdown(c *percore.Conn) {
	if cn, ok := c.Value().(*conn); ok {
		cn.shutdown = true
	}
}

// OnView decodes every request the input holds and answers them, the
// answers of one read gathered into one write.
func (s *server) OnView(c *percore.Conn, in []byte) (int, error) {
	cn := c.Value().(*conn)
	ls := s.loops.Get(c.Loop())
	ls.out = ls.out[:0]
	off := 0
	for {
		n, ev, piece, err := cn.d.Next(in[off:])
		off += n
		if err != nil {
			s.flush(c, ls)
			return off, err // OnFrameError answers it; View closes c
		}
		switch ev {
		case http1.Head:
			cn.stopHeadTimer()
			if !s.begin(cn, ls) {
				s.flush(c, ls)
				c.CloseLinger() // the refused body may be on its way
				return len(in), nil
			}
		case http1.Body:
			if cn.route == routeEcho {
				s.echo(cn, ls, piece)
			}
		case http1.End:
			switch s.end(cn, ls) {
			case endClose:
				s.flush(c, ls)
				c.Close()
				return len(in), nil
			case endPaused:
				s.flush(c, ls)
				return off, nil
			}
		case http1.NeedMore:
			s.flush(c, ls)
			if cn.d.InBody() {
				if !cn.begun {
					cn.begun = true
					c.BeginRequest() // its body spans reads: a shutdown waits for it
				}
			} else if off < len(in) {
				cn.startHeadTimer()
			}
			return off, nil
		}
	}
}

// OnFrameError answers a request the codec rejected with its status, unless
// a response to it was begun already (then the connection just closes).
// The answer's close lingers (Conn.CloseLinger): the client may still be
// sending the head or body that was refused, and a close with its input
// unread would reset the connection and could cost the client the answer.
func (s *server) OnFrameError(c *percore.Conn, err error) {
	cn := c.Value().(*conn)
	if cn.responded {
		return
	}
	defer c.CloseLinger() // before frame.View's Close, which then does nothing
	status, reason := 431, "request too large"
	var he *http1.Error
	if errors.As(err, &he) {
		status, reason = he.Status, he.Reason
	}
	ls := s.loops.Get(c.Loop())
	c.Write(http1.AppendError(ls.out[:0], status, reason, ls.date.Get(c.Loop().Now())))
}

// flush writes the gathered responses.
func (s *server) flush(c *percore.Conn, ls *loopState) {
	if len(ls.out) > 0 {
		c.Write(ls.out)
		ls.out = ls.out[:0]
	}
}

// begin routes a request whose head arrived. It returns false when the
// connection must close now (a refused Expect: 100-continue has been
// answered).
func (s *server) begin(cn *conn, ls *loopState) bool {
	req := cn.d.Request()
	cn.head = string(req.Method) == "HEAD"
	cn.minor = req.Minor
	cn.closeAfter = req.Close || cn.shutdown
	cn.responded, cn.chunked = false, false
	path := pathOf(req.Target)
	cn.route, cn.allow = routeNotFound, ""
	switch string(path) {
	case "/plaintext":
		cn.route = methodRoute(cn, req.Method, routePlaintext, "GET, HEAD")
	case "/json":
		cn.route = methodRoute(cn, req.Method, routeJSON, "GET, HEAD")
	case "/echo":
		cn.route = routeBadMethod
		cn.allow = "POST, PUT"
		if m := string(req.Method); m == "POST" || m == "PUT" {
			cn.route = routeEcho
		}
	case "/sleep":
		cn.route = methodRoute(cn, req.Method, routeSleep, "GET")
		cn.sleepFor = sleepArg(req.Target)
	}
	if req.Expect100 {
		if cn.route != routeEcho {
			// The final status instead of 100 Continue: the body is
			// not wanted, and the connection closes rather than read it.
			cn.closeAfter = true
			s.respondRoute(cn, ls)
			return false
		}
		ls.out = append(ls.out, http1.Continue...)
	}
	if cn.route == routeEcho {
		cn.responded = true
		ls.out = s.appendHead(ls.out, cn, ls, 200, "application/octet-stream")
		if req.Chunked {
			cn.chunked = true
			ls.out = append(ls.out, "Transfer-Encoding: chunked\r\n\r\n"...)
		} else {
			ls.out = http1.AppendContentLength(ls.out, req.ContentLength)
			ls.out = append(ls.out, "\r\n"...)
		}
	}
	return true
}

func methodRoute(cn *conn, method []byte, r route, allow string) route {
	m := string(method)
	if m == "GET" || (m == "HEAD" && allow != "GET") {
		return r
	}
	cn.allow = allow
	return routeBadMethod
}

// echo streams a piece of the request body back.
func (s *server) echo(cn *conn, ls *loopState, piece []byte) {
	if cn.chunked {
		ls.out = strconv.AppendInt(ls.out, int64(len(piece)), 16)
		ls.out = append(ls.out, "\r\n"...)
		cn.c.Writev(ls.out, piece, crlf)
	} else {
		if len(ls.out) > 0 {
			cn.c.Writev(ls.out, piece)
		} else {
			cn.c.Write(piece)
		}
	}
	ls.out = ls.out[:0]
}

var crlf = []byte("\r\n")

// What end asks OnView to do next.
const (
	endNext   = iota // decode the next request
	endClose         // the connection closes after what is written
	endPaused        // the response comes later: reading is paused
)

// end answers a request whose body (if any) has arrived.
func (s *server) end(cn *conn, ls *loopState) int {
	if cn.route == routeSleep {
		frame.PauseRead(cn.c)
		if !cn.begun {
			cn.begun = true
			cn.c.BeginRequest()
		}
		cn.sleeping = cn.c.Loop().AfterFunc(cn.sleepFor, cn.wake)
		return endPaused
	}
	if cn.route == routeEcho {
		if cn.chunked {
			ls.out = http1.AppendLastChunk(ls.out)
		}
	} else {
		s.respondRoute(cn, ls)
	}
	return s.finish(cn)
}

// finish ends a request whose response is written.
func (s *server) finish(cn *conn) int {
	if cn.begun {
		// A shutdown closes the connection once it is idle and its
		// queue sent: the response goes out whole.
		cn.begun = false
		cn.c.EndRequest()
	}
	if cn.closeAfter || cn.shutdown {
		return endClose
	}
	return endNext
}

// wake answers a /sleep request and reads on.
func (cn *conn) wake() {
	cn.sleeping = nil
	c := cn.c
	if c.Closed() {
		return
	}
	ls := cn.s.loops.Get(c.Loop())
	ls.out = ls.out[:0]
	cn.closeAfter = cn.closeAfter || cn.shutdown
	ls.out = cn.s.appendHead(ls.out, cn, ls, 200, "text/plain")
	ls.out = http1.AppendContentLength(ls.out, 6)
	ls.out = append(ls.out, "\r\n"...)
	if !cn.head {
		ls.out = append(ls.out, "slept\n"...)
	}
	cn.s.flush(c, ls)
	if cn.s.finish(cn) == endClose {
		c.Close()
		return
	}
	frame.ResumeRead(c)
}

// respondRoute writes the whole response of a route without a streamed body.
func (s *server) respondRoute(cn *conn, ls *loopState) {
	switch cn.route {
	case routePlaintext:
		s.respond(cn, ls, 200, "text/plain", helloWorld)
	case routeJSON:
		var buf [64]byte
		s.respond(cn, ls, 200, "application/json", appendJSONMessage(buf[:0], "Hello, World!"))
	case routeBadMethod:
		ls.out = s.appendHead(ls.out, cn, ls, 405, "text/plain")
		ls.out = http1.AppendHeader(ls.out, "Allow", []byte(cn.allow))
		ls.out = http1.AppendContentLength(ls.out, int64(len(notAllowed)))
		ls.out = append(ls.out, "\r\n"...)
		if !cn.head {
			ls.out = append(ls.out, notAllowed...)
		}
	case routeEcho:
		// Expect: 100-continue refused cannot happen for echo.
	default:
		s.respond(cn, ls, 404, "text/plain", notFound)
	}
}

var (
	helloWorld = []byte("Hello, World!")
	notFound   = []byte("404 Not Found\n")
	notAllowed = []byte("405 Method Not Allowed\n")
)

// respond appends a complete response with body.
func (s *server) respond(cn *conn, ls *loopState, status int, ctype string, body []byte) {
	ls.out = s.appendHead(ls.out, cn, ls, status, ctype)
	ls.out = http1.AppendContentLength(ls.out, int64(len(body)))
	ls.out = append(ls.out, "\r\n"...)
	if !cn.head {
		ls.out = append(ls.out, body...)
	}
}

// appendHead appends the status line and the fields every response has,
// the connection's included; the caller adds the framing and the empty line.
func (s *server) appendHead(dst []byte, cn *conn, ls *loopState, status int, ctype string) []byte {
	if status == 200 {
		dst = append(dst, "HTTP/1.1 200 OK\r\nServer: percore\r\nDate: "...)
	} else {
		dst = http1.AppendStatusLine(dst, status)
		dst = append(dst, "Server: percore\r\nDate: "...)
	}
	dst = append(dst, ls.date.Get(cn.c.Loop().Now())...)
	dst = append(dst, "\r\nContent-Type: "...)
	dst = append(dst, ctype...)
	dst = append(dst, "\r\n"...)
	switch {
	case cn.closeAfter:
		dst = append(dst, "Connection: close\r\n"...)
	case cn.minor == 0:
		dst = append(dst, "Connection: keep-alive\r\n"...)
	}
	return dst
}

// pathOf returns the path of a request target (origin or absolute form),
// without the query.
func pathOf(target []byte) []byte {
	if len(target) > 0 && target[0] != '/' {
		if i := bytes.Index(target, []byte("://")); i >= 0 {
			rest := target[i+3:]
			j := bytes.IndexByte(rest, '/')
			if j < 0 {
				return []byte("/")
			}
			target = rest[j:]
		}
	}
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	return target
}

// sleepArg reads ms=N from the query, at most 10 s.
func sleepArg(target []byte) time.Duration {
	i := bytes.Index(target, []byte("ms="))
	if i < 0 {
		return 0
	}
	v := target[i+3:]
	if j := bytes.IndexByte(v, '&'); j >= 0 {
		v = v[:j]
	}
	ms, err := strconv.Atoi(string(v))
	if err != nil || ms < 0 {
		return 0
	}
	return min(time.Duration(ms)*time.Millisecond, 10*time.Second)
}

// appendJSONMessage serializes {"message":msg}, the TechEmpower JSON test's
// object, escaping msg as encoding/json would (quotes, backslashes, control
// characters, and <, >, & for HTML safety).
func appendJSONMessage(dst []byte, msg string) []byte {
	dst = append(dst, `{"message":"`...)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, `"}`...)
}

// startHeadTimer arms the head timeout for a partial head.
func (cn *conn) startHeadTimer() {
	if cn.headSince || cn.s.headTimeout <= 0 {
		return
	}
	cn.headSince = true
	if cn.headTimer == nil {
		cn.headTimer = cn.c.Loop().AfterFunc(cn.s.headTimeout, cn.headExpired)
		return
	}
	cn.headTimer.Reset(cn.s.headTimeout)
}

func (cn *conn) stopHeadTimer() {
	if cn.headSince {
		cn.headSince = false
		cn.headTimer.Stop()
	}
}

// headExpired answers 408 to a head that did not arrive in time.
func (cn *conn) headExpired() {
	if !cn.headSince || cn.c.Closed() {
		return
	}
	cn.headSince = false
	ls := cn.s.loops.Get(cn.c.Loop())
	cn.c.Write(http1.AppendError(ls.out[:0], 408, "request head not received in time", ls.date.Get(cn.c.Loop().Now())))
	cn.c.CloseLinger()
}
