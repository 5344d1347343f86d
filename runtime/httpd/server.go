//go:build linux

package httpd

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/http1"
)

// ErrShuttingDown is the cause (context.Cause) of the cancellation of
// off-loop work (Server.Go, Adapt) when a graceful shutdown begins.
var ErrShuttingDown = errors.New("httpd: the server is shutting down")

// The defaults of Config's zero fields.
const (
	// DefaultHeadTimeout is how long a request head may take to arrive
	// whole after its first byte: 408 past it.
	DefaultHeadTimeout = 10 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection that sends
	// nothing between requests for this long (nginx's keepalive_timeout).
	DefaultIdleTimeout = 75 * time.Second
	// DefaultMaxBodyBuffer is the largest body held for a Handler that
	// takes its body whole (Request.Body): 413 past it. A StreamHandler
	// takes any body Limits.MaxBody allows, in pieces.
	DefaultMaxBodyBuffer = 1 << 20
	// DefaultWorkers is how many goroutines run offloaded work
	// (Server.Go, Adapt) at most.
	DefaultWorkers = 256
	// DefaultMaxQueue is how many offloaded jobs may wait for a worker
	// before more are answered 503.
	DefaultMaxQueue = 1024
	// DefaultHandlerTimeout bounds a request answered later (Response.Hold,
	// Server.Go, Adapt): past it the client gets 503 and the connection
	// closes, and the work's context is cancelled.
	DefaultHandlerTimeout = 60 * time.Second
	// DefaultSpareStates is Config.SpareStates' default.
	DefaultSpareStates = 64
)

// Config configures a Server. Its zero value works: every field's zero
// means its default (the Default constants), and a negative timeout or
// limit means none, the rule of the runtime's and frame's configurations.
type Config struct {
	// Limits bound each request's head and body (http1.Limits: zero
	// fields are its defaults). The server sizes the connection's input
	// buffer (frame.View) from them.
	Limits http1.Limits
	// HeadTimeout answers 408 to a head that is not whole this long
	// after its first byte. Zero means DefaultHeadTimeout; negative none.
	HeadTimeout time.Duration
	// IdleTimeout closes a connection that sends nothing for this long
	// while no request is in progress (Conn.SetIdleTimeout). Zero means
	// DefaultIdleTimeout; negative none.
	IdleTimeout time.Duration
	// MaxBodyBuffer is the largest body held for a Handler that takes
	// its body whole: 413 past it. Zero means DefaultMaxBodyBuffer;
	// negative means Limits.MaxBody alone bounds it.
	MaxBodyBuffer int
	// Workers is the most goroutines that run offloaded work at once
	// (Server.Go, Adapt). Zero (or negative: there is no pool without
	// workers) means DefaultWorkers.
	Workers int
	// MaxQueue is how many offloaded jobs may wait for a worker; past
	// it a request is answered 503 (Stats.Rejected). Zero means
	// DefaultMaxQueue; negative means none may wait.
	MaxQueue int
	// HandlerTimeout bounds a request answered later: 503 and a close
	// past it, and its context cancelled. Zero means
	// DefaultHandlerTimeout; negative means no bound.
	HandlerTimeout time.Duration
	// ServerName is the Server field of every response. Empty means
	// "percore"; "-" means no Server field.
	ServerName string
	// Logger logs what the request path cannot answer: a handler's
	// panic. Nil means slog.Default().
	Logger *slog.Logger
	// AdoptUpgraded makes the UpgradeHandler of an upgraded connection
	// that the process this one replaced handed over (a restart,
	// handover.go), from the state its UpgradeHandler's OnHandover
	// attached; it runs on the connection's loop, and an error closes the
	// connection. Nil means upgraded connections are not adopted: each is
	// closed (the old process's upgrade handlers should then decline).
	AdoptUpgraded func(c *percore.Conn, state []byte) (UpgradeHandler, error)
	// SpareStates is how many states of upgraded connections (about
	// 7.7 KB each) a loop keeps for its next new connections, so that a
	// storm of upgrades allocates a few states, not one per connection
	// (upgraded.go). They stay with the loop until it sheds its spares
	// (Loop.OnShedSpares: the runtime's return after a storm,
	// Config.ReturnAfterStorm), which lets go of them and the loop's
	// free buffers. Zero means DefaultSpareStates; negative means none are
	// kept.
	SpareStates int
}

// Stats counts what the server did beyond answering. Read it with
// Server.Stats, from any goroutine.
type Stats struct {
	// Offloaded counts jobs handed to the worker pool.
	Offloaded uint64
	// Rejected counts jobs refused because the pool and its queue were
	// full (each answered 503).
	Rejected uint64
	// TimedOut counts requests answered later that passed
	// HandlerTimeout.
	TimedOut uint64
	// Panics counts handlers that panicked (answered 500).
	Panics uint64
}

// Server is an HTTP/1.1 server for percore loops: Handler returns the
// percore.Handler to pass to runtime.New. Its handler runs inline on the
// loop of each connection; the methods of Server are safe for concurrent
// use, the Request and Response a handler gets belong to its loop.
type Server struct {
	cfg     Config
	h       Handler
	router  Router
	mux     *Mux // h, when it is one: routed without interface calls
	plain   bool // h answers every request inline: no Router, StreamHandler or refuser (quick.go)
	name    []byte
	limit   int // frame.View's MaxBuffered
	maxBody int
	idle    time.Duration
	spares  int // Config.SpareStates, its default applied; 0 for none
	loops   percore.PerLoop[loopState]
	log     *slog.Logger
	// adoptClosed counts the adopted connections closed for a state this
	// process cannot take (handover.go): logged at the first and every
	// 1024th, not once per connection of a restart.
	adoptClosed atomic.Uint64

	pool     workers
	closing  sync.Once
	nOffload atomic.Uint64
	nReject  atomic.Uint64
	nTimeout atomic.Uint64
	nPanic   atomic.Uint64
}

// New returns a server that answers every request with h (a *Mux, say).
func New(cfg Config, h Handler) *Server {
	if h == nil {
		panic("httpd: New with a nil Handler")
	}
	s := &Server{cfg: cfg, h: h, log: cfg.Logger}
	s.router, _ = h.(Router)
	s.mux, _ = h.(*Mux)
	s.plain = isPlain(h)
	switch cfg.ServerName {
	case "":
		s.name = []byte("percore")
	case "-":
	default:
		s.name = []byte(cfg.ServerName)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	lim := cfg.Limits
	if lim.MaxHeaderBytes <= 0 {
		lim.MaxHeaderBytes = http1.DefaultMaxHeaderBytes
	}
	s.cfg.Limits = lim
	// What View may hold between reads: a partial head (the decoder
	// rejects one over MaxHeaderBytes), a partial chunk line or trailer
	// section, or, while a request is answered later, the input behind
	// it: past MaxHeaderBytes reading pauses, so at most that and one
	// more read (a receive buffer, Config.BufferSize: 1 MiB of room
	// covers any sensible one). The bound costs nothing otherwise: View
	// holds only what is left.
	s.limit = 2*lim.MaxHeaderBytes + 1<<20
	s.maxBody = orDefault(cfg.MaxBodyBuffer, DefaultMaxBodyBuffer)
	s.idle = durDefault(cfg.IdleTimeout, DefaultIdleTimeout)
	s.spares = max(orDefault(cfg.SpareStates, DefaultSpareStates), 0)
	s.cfg.HeadTimeout = durDefault(cfg.HeadTimeout, DefaultHeadTimeout)
	s.cfg.HandlerTimeout = durDefault(cfg.HandlerTimeout, DefaultHandlerTimeout)
	workers := cfg.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	s.pool.init(workers, cfg.MaxQueue)
	return s
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func durDefault(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}

// Handler returns the percore.Handler that serves HTTP/1.1 on a runtime's
// connections: pass it to runtime.New (or use it for one listener of
// several).
func (s *Server) Handler() percore.Handler {
	return frame.View(s, frame.SplitConfig{MaxBuffered: s.limit})
}

// Close stops the worker pool and cancels the context of every job in
// flight. Call it after the runtime's Shutdown or Close: jobs still
// running then are answered by nobody. It is idempotent and safe from any
// goroutine.
func (s *Server) Close() {
	s.closing.Do(func() {
		s.pool.close() // it cancels the jobs running and queued
	})
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	return Stats{Offloaded: s.nOffload.Load(), Rejected: s.nReject.Load(),
		TimedOut: s.nTimeout.Load(), Panics: s.nPanic.Load()}
}

// loopState is one loop's: touched only on that loop's thread, but for
// done, which workers push to.
type loopState struct {
	date    http1.Date
	scratch []byte   // a Response's bytes while its reserved room grows
	commits uint64   // Commits of in-place answers (several answers of a read in one)
	views   uint64   // OnView calls that answered something in place
	done    doneBox  // adapted requests whose handlers returned (workers push)
	free    [][]byte // buffers for heads and bodies that span reads
	spare   []*conn  // the states of upgraded connections, for new ones (upgraded.go)
	// head is the status line of a 200 and the fields every response
	// starts with (Server, Date), formatted again when the second changes.
	head    []byte
	headSec int64
	headOK  bool
	sent    sentHead // the last keep-alive head of Send (send_head.go)
}

// status200 is the status line most responses start with: common keeps
// it before the fields, so that such a response starts with one copy.
const status200 = "HTTP/1.1 200 OK\r\n"

// common returns the status line of a 200 and the fields every response
// has, for now: Server and Date, valid until the next call; from
// len(status200) on, the fields alone.
func (ls *loopState) common(s *Server, now time.Time) []byte {
	if sec := now.Unix(); !ls.headOK || sec != ls.headSec {
		h := append(ls.head[:0], status200...)
		if s.name != nil {
			h = append(h, "Server: "...)
			h = append(h, s.name...)
			h = append(h, "\r\n"...)
		}
		h = append(h, "Date: "...)
		h = append(h, ls.date.Get(now)...)
		ls.head = append(h, "\r\n"...)
		ls.headSec, ls.headOK = sec, true
	}
	return ls.head
}

// loopOf returns l's state, made at the loop's first connection; the
// loop sheds its spares when the runtime asks (Loop.OnShedSpares).
func (s *Server) loopOf(l *percore.Loop) *loopState {
	if ls := s.loops.Get(l); ls != nil {
		return ls
	}
	ls := s.loops.Set(l, loopState{})
	l.OnShedSpares(ls.shed)
	return ls
}

// shed lets go of what the loop keeps for the next burst (Loop.OnShedSpares,
// when the runtime returns the heap after a storm): the spare states of
// upgraded connections (up to SpareStates of 7.7 KB), the free buffers
// (up to 64, of up to 1 MiB) and the scratch of a Response's moved room.
// None is held by a connection: each is made again when next needed.
func (ls *loopState) shed() {
	ls.spare, ls.free, ls.scratch = nil, nil, nil
}

// getBuf returns an empty buffer of the loop's, to give back with putBuf.
func (ls *loopState) getBuf() []byte {
	if n := len(ls.free); n > 0 {
		b := ls.free[n-1]
		ls.free[n-1] = nil
		ls.free = ls.free[:n-1]
		return b[:0]
	}
	return make([]byte, 0, 4<<10)
}

// putBuf keeps b for the loop's next getBuf (a few, not too large).
func (ls *loopState) putBuf(b []byte) {
	if b != nil && cap(b) <= 1<<20 && len(ls.free) < 64 {
		ls.free = append(ls.free, b[:0])
	}
}

// The callbacks frame.View forwards, checked by the compiler.
var (
	_ frame.ViewHandler       = (*Server)(nil)
	_ frame.ErrorHandler      = (*Server)(nil)
	_ percore.OpenHandler     = (*Server)(nil)
	_ percore.CloseHandler    = (*Server)(nil)
	_ percore.ShutdownHandler = (*Server)(nil)
	_ percore.EOFHandler      = (*Server)(nil)
	_ percore.DrainHandler    = (*Server)(nil)
)

// OnOpen starts a connection's state. (The percore.Handler's callbacks
// are the Server's so that frame.View can forward them; call none.)
func (s *Server) OnOpen(c *percore.Conn) {
	ls := s.loopOf(c.Loop())
	cn := ls.newConn()
	*cn = conn{s: s, ls: ls, c: c, d: http1.RequestDecoder{Limits: s.cfg.Limits}}
	cn.req.cn, cn.w.cn = cn, cn
	c.SetValue(cn)
	if s.idle > 0 {
		c.SetIdleTimeout(s.idle)
	}
}

// OnClose ends a connection: its timers stop, the work answering it (if
// any) sees its context cancelled.
func (s *Server) OnClose(c *percore.Conn, err error) {
	cn, ok := c.Value().(*conn)
	if !ok {
		forwardUpgraded(c, func(up UpgradeHandler) {
			if ch, ok := up.(percore.CloseHandler); ok {
				ch.OnClose(c, err)
			}
		})
		return
	}
	cn.gone = true
	if cn.headTimer != nil {
		cn.headTimer.Stop()
	}
	cn.stopHold()
	cn.cancelJob()
	if cn.up != nil {
		if ch, ok := cn.up.(percore.CloseHandler); ok {
			ch.OnClose(c, err)
		}
	}
	if cn.aw != nil {
		cn.aw.gone()
	}
	cn.releaseBuf()
}

// OnShutdown marks the connection: the response in flight, if any, says
// Connection: close and the connection closes after it, and the context
// of the off-loop work answering it (Server.Go, Adapt) is cancelled with
// ErrShuttingDown. (Idle connections the runtime closes itself.)
func (s *Server) OnShutdown(c *percore.Conn) {
	if forwardUpgraded(c, func(up UpgradeHandler) {
		if sh, ok := up.(percore.ShutdownHandler); ok {
			sh.OnShutdown(c)
		}
	}) {
		return
	}
	if cn, ok := c.Value().(*conn); ok {
		cn.shutdown = true
		if cn.job != nil {
			// The work answering the request in flight is told, so
			// that it answers now (its answer still goes out).
			cn.job.cancel(ErrShuttingDown)
		}
		if cn.up != nil {
			if sh, ok := cn.up.(percore.ShutdownHandler); ok {
				sh.OnShutdown(c)
			}
		}
	}
}

// OnDrain lets an offloaded response that waits for the outbound queue
// go on.
func (s *Server) OnDrain(c *percore.Conn) {
	if forwardUpgraded(c, func(up UpgradeHandler) {
		if dh, ok := up.(percore.DrainHandler); ok {
			dh.OnDrain(c)
		}
	}) {
		return
	}
	if cn, ok := c.Value().(*conn); ok {
		if cn.aw != nil {
			cn.aw.drained()
		}
		if cn.up != nil {
			if dh, ok := cn.up.(percore.DrainHandler); ok {
				dh.OnDrain(c)
			}
		}
	}
}

// OnEOF is the end of the client's stream: a request in progress is
// answered (its work's context is cancelled: the client went away) and
// the connection closes after it.
func (s *Server) OnEOF(c *percore.Conn) {
	cn, ok := c.Value().(*conn)
	if !ok {
		if up, ok := upgradedOf(c); ok {
			if eh, ok := up.(percore.EOFHandler); ok {
				eh.OnEOF(c)
				return
			}
		}
		c.Close()
		return
	}
	if cn.up != nil {
		if eh, ok := cn.up.(percore.EOFHandler); ok {
			eh.OnEOF(c)
			return
		}
		c.Close()
		return
	}
	cn.eof = true
	if cn.held {
		// The client may only have shut its side (a half close): the
		// work is told, and its answer still goes out before the close.
		if cn.job != nil {
			cn.job.cancel(nil)
		}
		if cn.aw != nil {
			cn.aw.eof()
		}
		return
	}
	c.Close()
}

// OnFrameError answers a request the codec rejected with its status,
// unless its response was begun already (then the connection just
// closes). The close lingers (Conn.CloseLinger): the client may still be
// sending what was refused, and a close with its input unread would reset
// the connection and could cost the client the answer.
func (s *Server) OnFrameError(c *percore.Conn, err error) {
	cn, ok := c.Value().(*conn)
	if !ok {
		return // an upgraded connection: View closes it
	}
	status, reason := 431, "request too large"
	var he *http1.Error
	if errors.As(err, &he) {
		status, reason = he.Status, he.Reason
	}
	cn.fail(status, reason)
}

// fail answers status with Connection: close and closes lingering, or
// just closes when a response was begun.
func (cn *conn) fail(status int, reason string) {
	c := cn.c
	cn.w.drop()
	if cn.begun {
		cn.begun = false
		c.EndRequest() // the connection closes: a shutdown need not wait for it
	}
	// The response committed, if any, is the last request's when none is
	// in progress: the error is answered after it.
	if (!cn.inRequest || !cn.w.committed) && !c.Closed() {
		ls := cn.ls
		ls.scratch = http1.AppendError(ls.scratch[:0], status, reason, ls.date.Get(c.Loop().Now()))
		c.Write(ls.scratch)
	}
	c.CloseLinger()
}
