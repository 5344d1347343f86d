//go:build linux

package frame

import percore "github.com/percore/percore/runtime"

// LineHandler receives a connection's lines from the Handler that Lines
// returns. OnLine runs on the connection's loop thread and must not block;
// line excludes the '\n' (and a '\r' before it) and is valid only during
// the call.
//
// A LineHandler may also implement ErrorHandler and the runtime's optional
// interfaces (percore.OpenHandler, percore.CloseHandler,
// percore.EOFHandler, percore.ShutdownHandler, OnDrain): the adapter
// forwards them.
type LineHandler interface {
	OnLine(c *percore.Conn, line []byte)
}

// LineHandlerFunc adapts a function to LineHandler.
type LineHandlerFunc func(c *percore.Conn, line []byte)

// OnLine calls f(c, line).
func (f LineHandlerFunc) OnLine(c *percore.Conn, line []byte) { f(c, line) }

// Handler receives a connection's length-prefixed frames from the
// Handler that LengthPrefixed returns. OnFrame runs on the connection's loop
// thread and must not block; payload excludes the header and is valid only
// during the call.
//
// A Handler may also implement ErrorHandler and the runtime's optional
// interfaces, which the adapter forwards.
type Handler interface {
	OnFrame(c *percore.Conn, payload []byte)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(c *percore.Conn, payload []byte)

// OnFrame calls f(c, payload).
func (f HandlerFunc) OnFrame(c *percore.Conn, payload []byte) { f(c, payload) }

// ErrorHandler is implemented by line and frame handlers that answer a
// framing error (a *TooLongError) before the connection closes: what
// OnFrameError writes is sent, and then the adapter closes the connection.
// Without it the connection is closed with nothing written.
type ErrorHandler interface {
	OnFrameError(c *percore.Conn, err error)
}

// LineConfig configures Lines. The zero value works.
type LineConfig struct {
	// MaxLine is the longest line accepted (LineDecoder.MaxLine). Zero
	// means DefaultMaxLine.
	MaxLine int
}

// LengthConfig configures LengthPrefixed. The zero value works.
type LengthConfig struct {
	// MaxFrame is the longest payload accepted
	// (LengthDecoder.MaxFrame). Zero means DefaultMaxFrame.
	MaxFrame int
}

// Lines returns a percore.Handler that splits each connection's stream into
// lines with a LineDecoder and calls h.OnLine for each, in order. Lines
// stop being delivered once h closes the connection. A line over the limit
// calls h's OnFrameError (if h implements ErrorHandler) and then closes the
// connection, which sends what OnFrameError wrote first. A last line
// without its '\n' when the peer's stream ends is not delivered.
//
// The handler keeps each connection's decoder and a Writer in Conn.Value:
// keep your own per-connection value with Value and SetValue, and reply
// with WriteLine or WriteFrame without allocating.
func Lines(h LineHandler, cfg LineConfig) percore.Handler {
	return expose(&lines{hooks: hooksOf(h), h: h, max: cfg.MaxLine}, h)
}

// LengthPrefixed returns a percore.Handler that splits each connection's
// stream into length-prefixed frames with a LengthDecoder and calls
// h.OnFrame with each payload, in order. Frames stop being delivered once h
// closes the connection. A header declaring more than the limit calls h's
// OnFrameError (if h implements ErrorHandler) and then closes the
// connection, which sends what OnFrameError wrote first; none of that
// frame's payload is buffered. An incomplete frame when the peer's stream
// ends is dropped.
//
// The handler keeps each connection's decoder and a Writer in Conn.Value:
// keep your own per-connection value with Value and SetValue, and reply
// with WriteFrame without allocating.
func LengthPrefixed(h Handler, cfg LengthConfig) percore.Handler {
	return expose(&lengthPrefixed{hooks: hooksOf(h), h: h, max: cfg.MaxFrame}, h)
}

// Value returns the value stored with SetValue. On a connection that no
// adapter of this package serves it is Conn.Value.
func Value(c *percore.Conn) any {
	if s, ok := c.Value().(session); ok {
		return *s.value()
	}
	return c.Value()
}

// SetValue stores a per-connection value for the handler, next to the
// adapter's state. On a connection that no adapter of this package serves
// it is Conn.SetValue.
func SetValue(c *percore.Conn, v any) {
	if s, ok := c.Value().(session); ok {
		*s.value() = v
		return
	}
	c.SetValue(v)
}

// session is an adapter's per-connection state, kept in Conn.Value.
type session interface {
	writer() *Writer
	value() *any
}

type lineSession struct {
	dec LineDecoder
	w   Writer
	v   any
}

func (s *lineSession) writer() *Writer { return &s.w }
func (s *lineSession) value() *any     { return &s.v }

type lengthSession struct {
	dec LengthDecoder
	w   Writer
	v   any
}

func (s *lengthSession) writer() *Writer { return &s.w }
func (s *lengthSession) value() *any     { return &s.v }

type lines struct {
	hooks
	h   LineHandler
	max int
}

func (a *lines) OnOpen(c *percore.Conn) {
	c.SetValue(&lineSession{dec: LineDecoder{MaxLine: a.max}})
	a.opened(c)
}

func (a *lines) OnData(c *percore.Conn, data []byte) {
	s, ok := c.Value().(*lineSession)
	if !ok {
		// The handler replaced the session with Conn.SetValue: keep
		// its value and start a new session.
		s = &lineSession{dec: LineDecoder{MaxLine: a.max}, v: c.Value()}
		c.SetValue(s)
	}
	_, err := s.dec.Feed(data, func(line []byte) bool {
		a.h.OnLine(c, line)
		return !c.Closed()
	})
	if err != nil {
		a.reject(c, err)
	}
}

type lengthPrefixed struct {
	hooks
	h   Handler
	max int
}

func (a *lengthPrefixed) OnOpen(c *percore.Conn) {
	c.SetValue(&lengthSession{dec: LengthDecoder{MaxFrame: a.max}})
	a.opened(c)
}

func (a *lengthPrefixed) OnData(c *percore.Conn, data []byte) {
	s, ok := c.Value().(*lengthSession)
	if !ok {
		s = &lengthSession{dec: LengthDecoder{MaxFrame: a.max}, v: c.Value()}
		c.SetValue(s)
	}
	_, err := s.dec.Feed(data, func(payload []byte) bool {
		a.h.OnFrame(c, payload)
		return !c.Closed()
	})
	if err != nil {
		a.reject(c, err)
	}
}

// hooks forwards the optional callbacks every adapter passes on.
type hooks struct {
	open  percore.OpenHandler
	close percore.CloseHandler
	shut  percore.ShutdownHandler
	drain drainHandler
	fail  ErrorHandler
}

// drainHandler is the runtime's optional OnDrain callback (outbound queue
// drained below its low-water mark), matched by its method.
type drainHandler interface {
	OnDrain(c *percore.Conn)
}

func hooksOf(h any) hooks {
	var k hooks
	k.open, _ = h.(percore.OpenHandler)
	k.close, _ = h.(percore.CloseHandler)
	k.shut, _ = h.(percore.ShutdownHandler)
	k.drain, _ = h.(drainHandler)
	k.fail, _ = h.(ErrorHandler)
	return k
}

func (k *hooks) opened(c *percore.Conn) {
	if k.open != nil {
		k.open.OnOpen(c)
	}
}

func (k *hooks) OnClose(c *percore.Conn, err error) {
	if k.close != nil {
		k.close.OnClose(c, err)
	}
}

func (k *hooks) OnShutdown(c *percore.Conn) {
	if k.shut != nil {
		k.shut.OnShutdown(c)
	}
}

func (k *hooks) OnDrain(c *percore.Conn) {
	if k.drain != nil {
		k.drain.OnDrain(c)
	}
}

// reject answers a framing error and closes c once the answer is sent.
func (k *hooks) reject(c *percore.Conn, err error) {
	if k.fail != nil && !c.Closed() {
		k.fail.OnFrameError(c, err)
	}
	c.Close()
}

// expose returns a, implementing percore.EOFHandler exactly when h does:
// the runtime keeps a half-closed connection open only for handlers that
// implement it, so the adapter must neither add nor hide it. The other
// optional callbacks change nothing by being implemented, so every adapter
// implements them and forwards them when h has them.
func expose(a adapter, h any) percore.Handler {
	if eof, ok := h.(percore.EOFHandler); ok {
		return &withEOF{a, eof}
	}
	return a
}

// adapter is what every adapter implements.
type adapter interface {
	percore.Handler
	percore.OpenHandler
	percore.CloseHandler
	percore.ShutdownHandler
	drainHandler
}

type withEOF struct {
	adapter
	eof percore.EOFHandler
}

func (a *withEOF) OnEOF(c *percore.Conn) { a.eof.OnEOF(c) }
