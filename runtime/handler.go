//go:build linux

package runtime

// Handler receives a connection's data. Its methods run on the connection's
// loop thread, one at a time, and must not block: a handler that waits
// stalls every connection on its loop (offload slow work with Loop.Go).
//
// A Handler may also implement OpenHandler, CloseHandler, EOFHandler,
// DrainHandler and ShutdownHandler. The runtime finds them with type
// assertions when a connection opens, so a misspelled method (OnDrian)
// compiles and never runs. Declare the ones a handler means to implement,
// next to its type, and the compiler checks their names and signatures
// (docs/decisions/0018-input-buffering.md):
//
//	var (
//		_ percore.Handler      = (*server)(nil)
//		_ percore.DrainHandler = (*server)(nil)
//		_ percore.CloseHandler = (*server)(nil)
//	)
//
// The adapters of runtime/frame forward the same optional interfaces, and
// frame.ErrorHandler, from the handlers they wrap: declare those the same
// way.
type Handler interface {
	// OnData is called with bytes the peer sent. data is valid only
	// during the call: the buffer goes back to the kernel when OnData
	// returns, so a handler copies what it keeps (Write copies for it).
	OnData(c *Conn, data []byte)
}

// OpenHandler is implemented by handlers that want to know when a
// connection opens (accepted, or dialed and connected), before its first
// OnData.
type OpenHandler interface {
	OnOpen(c *Conn)
}

// CloseHandler is implemented by handlers that want to know when a
// connection closes. err is nil for a close the handler asked for or a
// clean end of stream, and says why otherwise (a reset peer, a failed
// write, the runtime shutting down). OnClose is called exactly once for
// every connection that was opened.
type CloseHandler interface {
	OnClose(c *Conn, err error)
}

// EOFHandler is implemented by handlers that keep a connection open after
// the peer shuts down its write side (a half-close): OnEOF is called
// instead of closing, no more OnData follows, and the handler may still
// write before it calls Close. Without it, the end of the peer's stream
// closes the connection once queued writes are sent.
type EOFHandler interface {
	OnEOF(c *Conn)
}

// DrainHandler is implemented by handlers that want to know when a
// connection whose outbound queue reached Config.MaxOutbound has drained
// below the low-water mark (and, under PauseReading, reads again).
type DrainHandler interface {
	OnDrain(c *Conn)
}

// ShutdownHandler is implemented by handlers that want to know when a
// graceful Shutdown begins, so that a protocol can say goodbye. It is
// called once for every open connection; the connection stays open until
// the handler (or the peer) closes it, or the shutdown deadline passes.
type ShutdownHandler interface {
	OnShutdown(c *Conn)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(c *Conn, data []byte)

// OnData calls f(c, data).
func (f HandlerFunc) OnData(c *Conn, data []byte) { f(c, data) }
