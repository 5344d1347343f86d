//go:build linux

package frame

import (
	"bufio"
	"sync"

	percore "github.com/percore/percore/runtime"
)

// Handler receives a connection's frames from the percore.Handler that
// Split, Lines or LengthPrefixed returns: each token of the split
// function, a line (without its '\n', and a '\r' before it), or a
// length-prefixed payload (without its header). OnFrame runs on the
// connection's loop thread and must not block; frame is valid only during
// the call.
//
// A Handler may also implement ErrorHandler and the runtime's optional
// interfaces (percore.OpenHandler, percore.CloseHandler,
// percore.EOFHandler, percore.ShutdownHandler, percore.DrainHandler): the
// adapter forwards them.
type Handler interface {
	OnFrame(c *percore.Conn, frame []byte)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(c *percore.Conn, frame []byte)

// OnFrame calls f(c, frame).
func (f HandlerFunc) OnFrame(c *percore.Conn, frame []byte) { f(c, frame) }

// ErrorHandler is implemented by line, frame and token handlers that answer
// a framing error (a *TooLongError, or the split function's own error)
// before the connection closes: what OnFrameError writes is sent, and then
// the adapter closes the connection. Without it the connection is closed
// with nothing written.
type ErrorHandler interface {
	OnFrameError(c *percore.Conn, err error)
}

// The configurations of the adapters follow one rule, as the runtime's
// Config does: a limit's zero value means its default (the Default
// constants), and a negative one means no limit.

// LineConfig configures Lines. The zero value works.
type LineConfig struct {
	// MaxLine is the longest line accepted (LineDecoder.MaxLine). Zero
	// means DefaultMaxLine; negative means no limit.
	MaxLine int
}

// SplitConfig configures Split. The zero value works.
type SplitConfig struct {
	// MaxBuffered is the most bytes of a partial token held for a
	// connection between reads (Splitter.MaxBuffered). Zero means
	// DefaultMaxBuffered; negative means no limit.
	MaxBuffered int
	// Scanner, when set, makes each connection's Scanner, which Split
	// uses instead of its split function (which may then be nil): a
	// Scanner keeps its progress through a partial token, so that a
	// token trickled in many reads is examined once. Nil means the split
	// function, called over the whole partial token at every read.
	Scanner func() Scanner
}

// LengthConfig configures LengthPrefixed. The zero value works.
type LengthConfig struct {
	// MaxFrame is the longest payload accepted
	// (LengthDecoder.MaxFrame). Zero means DefaultMaxFrame; negative
	// means no limit.
	MaxFrame int
}

// Split returns a percore.Handler that splits each connection's stream
// with split (or each connection's cfg.Scanner), as a bufio.Scanner splits
// a reader's, and calls h.OnFrame for each token, in order. A token that lies whole in the bytes of one
// read is handed over without a copy; only the start of a partial token is
// kept, in a per-connection buffer, until the reads that complete it
// arrive, and that buffer goes back to a shared pool as soon as the
// partial token is complete: a connection between tokens holds nothing.
//
// Tokens stop being delivered once h closes the connection. A split
// error, or a partial token that needs more than cfg.MaxBuffered bytes
// (a *TooLongError), calls h's OnFrameError (if h implements ErrorHandler)
// and then closes the connection, which sends what OnFrameError wrote
// first. bufio.ErrFinalToken delivers its token, if any, and closes the
// connection once what is queued is sent.
//
// At the end of the peer's stream split is called with atEOF set over what
// is held, and its last tokens are delivered; then h's OnEOF runs if h
// implements percore.EOFHandler, else the connection is closed (what the
// runtime does for a handler without OnEOF). The returned Handler
// therefore always implements percore.EOFHandler. What is left of a
// partial token at the end is dropped.
//
// PauseRead and ResumeRead of this package hold tokens back (a handler
// that answers one request at a time). The adapter keeps its state in
// Conn.AdapterValue: Conn.Value and SetValue are the handler's.
func Split(split bufio.SplitFunc, h Handler, cfg SplitConfig) percore.Handler {
	if split == nil && cfg.Scanner == nil {
		panic("frame: Split with a nil split function and no Scanner")
	}
	a := &adapter{hooks: hooksOf(h), split: split, scanner: cfg.Scanner,
		limit: limitOf(cfg.MaxBuffered, DefaultMaxBuffered), emit: h.OnFrame}
	a.eof, _ = h.(percore.EOFHandler)
	return &withEOF{a}
}

// Lines returns a percore.Handler that splits each connection's stream into
// lines and calls h.OnFrame for each, in order: Split's machinery, with a
// LineScanner per connection (ScanLines' lines, a partial line searched
// once however it arrives) and the line limit as the buffer limit. Lines stop being
// delivered once h closes the connection. A line over the limit calls h's
// OnFrameError (if h implements ErrorHandler) and then closes the
// connection, which sends what OnFrameError wrote first. A last line
// without its '\n' when the peer's stream ends is not delivered.
//
// The adapter keeps each connection's state and a Writer in
// Conn.AdapterValue: Conn.Value and SetValue are the handler's. Reply with
// WriteLine or WriteFrame without allocating.
func Lines(h Handler, cfg LineConfig) percore.Handler {
	limit := limitOf(cfg.MaxLine, DefaultMaxLine)
	scanner := func() Scanner { return NewLineScanner(limit) }
	return expose(&adapter{hooks: hooksOf(h), scanner: scanner, limit: limit, emit: h.OnFrame}, h)
}

// LengthPrefixed returns a percore.Handler that splits each connection's
// stream into length-prefixed frames with ScanLengthPrefixed and calls
// h.OnFrame with each payload, in order: Split's machinery. Frames stop
// being delivered once h closes the connection. A header declaring more
// than the limit calls h's OnFrameError (if h implements ErrorHandler) and
// then closes the connection, which sends what OnFrameError wrote first;
// none of that frame's payload is buffered. An incomplete frame when the
// peer's stream ends is dropped.
//
// The adapter keeps each connection's state and a Writer in
// Conn.AdapterValue: Conn.Value and SetValue are the handler's. Reply with
// WriteFrame without allocating.
func LengthPrefixed(h Handler, cfg LengthConfig) percore.Handler {
	limit := limitOf(cfg.MaxFrame, DefaultMaxFrame)
	return expose(&adapter{hooks: hooksOf(h), split: ScanLengthPrefixed(limit), limit: HeaderLen + limit, emit: h.OnFrame}, h)
}

// PauseRead stops delivering c's tokens (lines, frames) and reading from c
// (percore.Conn.PauseRead) until ResumeRead: a handler that serves one
// request at a time calls it from the callback that starts the request.
// The rest of the read that was being split is kept, so that the
// connection holds at most one read's bytes beyond its partial token
// while paused. On a connection that no adapter of this package serves it
// is Conn.PauseRead.
func PauseRead(c *percore.Conn) {
	if s := sessionOf(c); s != nil {
		s.paused = true
	}
	c.PauseRead()
}

// ResumeRead undoes PauseRead: the tokens kept while paused are delivered
// at once, before ResumeRead returns (or, when it is called from a token's
// callback, as soon as that callback returns), and reading resumes. On a
// connection that no adapter of this package serves it is
// Conn.ResumeRead.
func ResumeRead(c *percore.Conn) {
	s := sessionOf(c)
	if s == nil {
		c.ResumeRead()
		return
	}
	if !s.paused {
		return
	}
	s.paused = false
	c.ResumeRead()
	s.a.deliver(c, s, nil)
}

// Redeliver shows c's held input (what the handler left, and what
// arrived while paused) to the handler again now, as PauseRead followed
// by ResumeRead would, but without pausing and resuming c's reads (on
// io_uring a receive cancelled and armed again): for a handler that left
// input unconsumed on purpose (a request answered later, the requests
// behind it waiting) and is now ready for it. With nothing held, while
// paused, or on a connection no adapter of this package serves, it does
// nothing. Call it on c's loop.
func Redeliver(c *percore.Conn) {
	s := sessionOf(c)
	if s == nil || s.paused || s.t.held() == 0 && !s.eof {
		return
	}
	s.a.deliver(c, s, nil)
}

// Value is Conn.Value.
//
// Deprecated: the adapters keep their state in Conn.AdapterValue, so
// Conn.Value is the handler's under every adapter: call it.
func Value(c *percore.Conn) any { return c.Value() }

// SetValue is Conn.SetValue.
//
// Deprecated: the adapters keep their state in Conn.AdapterValue, so
// Conn.SetValue is the handler's under every adapter: call it.
func SetValue(c *percore.Conn, v any) { c.SetValue(v) }

// sessionOf returns c's session, or nil on a connection no adapter of
// this package serves.
func sessionOf(c *percore.Conn) *session {
	s, _ := c.AdapterValue().(*session)
	return s
}

// session is a connection's state in an adapter, kept in
// Conn.AdapterValue: the partial token, the Writer and where delivery
// stands.
type session struct {
	a     *adapter
	t     tail
	split bufio.SplitFunc // the adapter's, or the Scan of the connection's Scanner
	w     Writer
	// paused: PauseRead holds tokens back; delivering: deliver is
	// running (a ResumeRead from a token's callback lets it go on); again:
	// a ResumeRead came from OnView; eof: the peer's stream has ended;
	// ended: the end was acted on.
	paused, delivering, again, eof, ended bool
}

// buffers are the partial tokens' buffers, shared by every connection of
// every adapter: a connection takes one only while it holds a partial
// token.
var buffers = sync.Pool{New: func() any { return new(buffer) }}

// adapter splits each connection's stream with split, or with a Scanner
// of its own that scanner makes, and hands the tokens to emit: the
// machinery behind Split, Lines and LengthPrefixed.
type adapter struct {
	hooks
	split   bufio.SplitFunc
	scanner func() Scanner // when set, each session's Scanner; split is unused
	limit   int
	emit    func(c *percore.Conn, token []byte)
	eof     percore.EOFHandler // the handler's, or nil
	// view, set instead of split and emit, shows the input in place
	// (View).
	view func(c *percore.Conn, in []byte) (int, error)
}

func (a *adapter) newSession() *session {
	s := &session{a: a, t: tail{pool: &buffers}, split: a.split}
	if a.scanner != nil {
		sc := a.scanner()
		s.t.scanner, s.split = sc, sc.Scan
	}
	return s
}

// sessionOf returns c's session, starting one if OnOpen did not (a
// connection handed to the adapter after it opened).
func (a *adapter) sessionOf(c *percore.Conn) *session {
	s, ok := c.AdapterValue().(*session)
	if !ok || s.a != a {
		if a.view != nil {
			s = a.newViewSession()
		} else {
			s = a.newSession()
		}
		c.SetAdapterValue(s)
	}
	return s
}

// OnOpen starts c's session, but under View, whose session waits for
// the first bytes it must keep (releaseView).
func (a *adapter) OnOpen(c *percore.Conn) {
	if a.view == nil {
		c.SetAdapterValue(a.newSession())
	} else {
		c.SetAdapterValue(nil)
	}
	a.opened(c)
}

func (a *adapter) OnData(c *percore.Conn, data []byte) { a.deliver(c, a.sessionOf(c), data) }

// onEOF is the end of the peer's stream: the last tokens, then the
// handler's OnEOF or a close.
func (a *adapter) onEOF(c *percore.Conn) {
	s := a.sessionOf(c)
	s.eof = true
	a.deliver(c, s, nil)
}

// deliver splits the held bytes and then data, handing each token to the
// handler until none is left, the handler pauses or closes, or an error.
// While paused, the rest of data is kept.
func (a *adapter) deliver(c *percore.Conn, s *session, data []byte) {
	if a.view != nil {
		a.deliverView(c, s, data)
		return
	}
	if s.delivering {
		return // a ResumeRead from a token's callback: the loop below goes on
	}
	s.delivering = true
	for !s.paused && !c.Closed() {
		if s.t.idle() && len(data) > 0 && !s.eof {
			// The common case, as in tail.feed.
			adv, tok, err := s.split(data, false)
			if err == nil && tok != nil && adv > 0 && adv <= len(data) {
				data = data[adv:]
				s.t.empty = 0
				a.emit(c, tok)
				continue
			}
			if s.t.keep(data, adv, tok, err, a.limit) {
				data = nil
				break
			}
		}
		tok, ok, err := s.t.next(&data, s.split, a.limit, s.eof)
		if ok {
			a.emit(c, tok)
		}
		if err == bufio.ErrFinalToken {
			c.Close()
			break
		}
		if err != nil {
			a.reject(c, err)
			break
		}
		if !ok {
			break
		}
	}
	s.delivering = false
	if len(data) > 0 && !c.Closed() && s.t.err == nil {
		s.t.hold(data, a.limit) // paused: keep the rest of the read
	}
	a.finish(c, s)
}

// finish acts on the end of the peer's stream once the last tokens are
// delivered: the handler's OnEOF, or a close.
func (a *adapter) finish(c *percore.Conn, s *session) {
	if s.eof && !s.paused && !s.ended && !c.Closed() {
		s.ended = true
		s.t.reset()
		if a.eof != nil {
			a.eof.OnEOF(c)
		} else {
			c.Close()
		}
	}
}

// hooks forwards the optional callbacks every adapter passes on.
type hooks struct {
	open  percore.OpenHandler
	close percore.CloseHandler
	shut  percore.ShutdownHandler
	drain percore.DrainHandler
	fail  ErrorHandler
	hand  percore.HandoverHandler // a restart's hand-over (handover.go)
	adopt percore.AdoptHandler
}

func hooksOf(h any) hooks {
	var k hooks
	k.open, _ = h.(percore.OpenHandler)
	k.close, _ = h.(percore.CloseHandler)
	k.shut, _ = h.(percore.ShutdownHandler)
	k.drain, _ = h.(percore.DrainHandler)
	k.fail, _ = h.(ErrorHandler)
	k.hand, _ = h.(percore.HandoverHandler)
	k.adopt, _ = h.(percore.AdoptHandler)
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

// The adapter implements every optional callback but OnEOF, which withEOF
// adds.
var (
	_ percore.OpenHandler     = (*adapter)(nil)
	_ percore.CloseHandler    = (*adapter)(nil)
	_ percore.ShutdownHandler = (*adapter)(nil)
	_ percore.DrainHandler    = (*adapter)(nil)
	_ percore.EOFHandler      = (*withEOF)(nil)
)

// expose returns a, implementing percore.EOFHandler exactly when h does:
// the runtime keeps a half-closed connection open only for handlers that
// implement it, so Lines and LengthPrefixed, whose last partial token is
// dropped anyway, must neither add nor hide it. The other optional
// callbacks change nothing by being implemented, so every adapter
// implements them and forwards them when h has them.
func expose(a *adapter, h any) percore.Handler {
	if eof, ok := h.(percore.EOFHandler); ok {
		a.eof = eof
		return &withEOF{a}
	}
	return a
}

// withEOF is an adapter that implements percore.EOFHandler.
type withEOF struct{ *adapter }

func (a *withEOF) OnEOF(c *percore.Conn) { a.onEOF(c) }
