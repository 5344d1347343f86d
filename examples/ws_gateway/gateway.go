//go:build linux

package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/ws"
	"github.com/percore/percore/runtime/httpd"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// maxTopic is the longest topic, in bytes (examples/bench/gwproto).
const maxTopic = 128

// gateway is the protocol of examples/bench/gwproto on httpd and ws: the
// routes, and each loop's share of the clients (loopState). It is safe
// for concurrent use; what belongs to a loop is reached only on it.
type gateway struct {
	secret       []byte
	pingInterval time.Duration
	wsCfg        ws.Config
	loops        percore.PerLoop[loopState]

	upstream *pool.Pool[*upstream.Conn] // nil without -upstream
	ho       restartState               // a restart's hand-over (handover.go)

	mu       sync.Mutex
	counters map[int]*loopCounters // by loop id: the collector's view
}

// loopState is one loop's clients: its codec pool, its topics, the list
// the heartbeat sweeps and its counters. Only its loop touches it (the
// counters are read by the metrics collector).
type loopState struct {
	g       *gateway
	pool    *ws.Pool
	topics  topicIndex
	clients []*client // the heartbeat's list (clients.go)
	names   names     // their users' names (names.go)
	up      *upLink   // nil without -upstream
	n       loopCounters

	// mac is the secret's HMAC, reset for each upgrade, and sum its
	// output; reply is where answers are built: an upgrade and a command
	// allocate nothing that is not kept (decision 0065).
	mac   hash.Hash
	sum   [sha256.Size]byte
	reply []byte
}

// client is one upgraded connection: it is the httpd.UpgradeHandler that
// gets the connection's input. With its user's name in the loop's names
// it is all a WebSocket connection costs above the runtime's and httpd's
// per-connection state: 64 bytes (decision 0079).
type client struct {
	c     *percore.Conn
	ls    *loopState
	wc    ws.Conn
	topic membership // its first topic; the loop's index keeps the rest (topics.go)
	seat  seat       // its place in ls.clients and its silent sweeps (clients.go)
	user  uint32     // where its authenticated user's name is in ls.names (it crosses a restart with the topics)
}

func newGateway(secret string, pingInterval time.Duration) *gateway {
	return &gateway{secret: []byte(secret), pingInterval: pingInterval, counters: map[int]*loopCounters{}}
}

// setup builds l's state (Config.LoopSetup) and starts its heartbeat. The
// loop's codec pool lets go of its spares when the loop sheds (the
// runtime's return after a storm: settle.go).
func (g *gateway) setup(l *percore.Loop) error {
	ls := g.loops.Set(l, loopState{g: g, pool: ws.NewPool(g.wsCfg), topics: newTopicIndex(),
		mac: hmac.New(sha256.New, g.secret), reply: make([]byte, 0, 9+maxTopic)})
	l.OnShedSpares(ls.pool.Shed)
	if g.upstream != nil {
		ls.up = newUpLink(g.upstream, l)
	}
	g.mu.Lock()
	g.counters[l.ID()] = &ls.n
	g.mu.Unlock()
	if g.pingInterval > 0 {
		var sweep func()
		sweep = func() {
			g.sweep(ls)
			l.AfterFunc(g.pingInterval/2, sweep)
		}
		l.AfterFunc(g.pingInterval/2, sweep)
	}
	return nil
}

// routes are the protocol's: /ws, POST /publish, and 401 for every other
// path.
func (g *gateway) routes() *httpd.Mux {
	m := httpd.NewMux()
	m.HandleFunc("/ws", g.upgrade)
	m.HandleFunc("POST /publish", g.publish)
	m.NotFound = httpd.HandlerFunc(func(w *httpd.Response, r *httpd.Request) { refuse(w, 401, "unauthorized") })
	return m
}

func refuse(w *httpd.Response, code int, reason string) {
	w.WriteHeader(code)
	w.AddHeader("Content-Type", "text/plain")
	w.WriteString(reason + "\n")
}

// authorized reports whether the request carries a user and the hex
// HMAC-SHA256 of it under the secret, compared in constant time.
func (g *gateway) authorized(r *httpd.Request) bool {
	user, _ := r.Query("user")
	token, _ := r.Query("token")
	return g.loops.Get(r.Conn().Loop()).validToken(user, token)
}

// validToken reports whether token is the lowercase hex HMAC-SHA256 of
// user under the secret, with the loop's HMAC (no allocation).
func (ls *loopState) validToken(user, token []byte) bool {
	if len(user) == 0 || len(token) != 2*sha256.Size {
		return false
	}
	var want [sha256.Size]byte
	if _, err := hex.Decode(want[:], token); err != nil || !isLowerHex(token) {
		return false
	}
	ls.mac.Reset()
	ls.mac.Write(user)
	return hmac.Equal(ls.mac.Sum(ls.sum[:0]), want[:])
}

func isLowerHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// upgrade answers /ws: 401 before anything else without a good token,
// the codec's refusal for a bad handshake, else 101 and the connection
// is the client's.
func (g *gateway) upgrade(w *httpd.Response, r *httpd.Request) {
	if !g.authorized(r) {
		refuse(w, 401, "unauthorized")
		return
	}
	hs, herr := ws.Accept(r.Head(), &g.wsCfg)
	if herr != nil {
		if herr.Status == 426 {
			w.AddHeader("Sec-WebSocket-Version", "13")
		}
		w.CloseAfter()
		refuse(w, herr.Status, herr.Reason)
		return
	}
	c := r.Conn()
	ls := g.loops.Get(c.Loop())
	user, _ := r.Query("user")
	cl := &client{c: c, ls: ls}
	if !ls.enter(cl, user) {
		w.CloseAfter()
		refuse(w, 503, "the loop holds all the clients it can")
		return
	}
	cl.wc.Init(ls.pool, ws.Server, &hs)
	w.WriteHeader(101)
	w.AddHeader("Upgrade", "websocket")
	w.AddHeader("Connection", "Upgrade")
	w.AddHeaderBytes("Sec-WebSocket-Accept", hs.Accept[:])
	if !w.Upgrade(cl) {
		// A request with a body, or a client gone: cl gets no OnClose.
		ls.exit(cl)
		w.CloseAfter()
		return
	}
	ls.n.upgrades.Add(1)
	g.ho.clients.Add(1)
	c.SetIdleTimeout(0) // the heartbeat's, from now on
}

// OnView takes the client's frames (httpd.UpgradeHandler).
func (cl *client) OnView(c *percore.Conn, in []byte) (int, error) {
	if c.Closed() || cl.wc.CloseSent() {
		return len(in), nil // what follows our Close is not read
	}
	cl.seat.heard()
	off := 0
	for {
		n, ev, p, err := cl.wc.Next(in[off:])
		off += n
		if err != nil {
			var ce *ws.CloseError
			code := ws.CloseProtocolError
			if errors.As(err, &ce) {
				code = ce.Code
			}
			cl.ls.n.protocolCloses.Add(1)
			cl.closeWith(code, "")
			return len(in), nil
		}
		switch ev {
		case ws.NeedMore:
			return off, nil
		case ws.Text:
			cl.command(p)
		case ws.Binary:
			if up := cl.ls.up; up != nil {
				up.forward(cl, p)
			} else {
				cl.send(ws.OpBinary, p) // echo
			}
		case ws.Ping:
			cl.control(ws.OpPong, p)
		case ws.Close:
			cl.closeWith(cl.wc.CloseCode(), "")
			return len(in), nil
		}
	}
}

// command answers SUB topic and UNSUB topic, and anything else with ERR.
func (cl *client) command(p []byte) {
	var sub bool
	var topic []byte
	switch {
	case len(p) > 4 && string(p[:4]) == "SUB ":
		sub, topic = true, p[4:]
	case len(p) > 6 && string(p[:6]) == "UNSUB ":
		topic = p[6:]
	default:
		cl.send(ws.OpText, []byte("ERR want SUB topic or UNSUB topic"))
		return
	}
	if !validTopic(topic) {
		cl.send(ws.OpText, []byte("ERR a topic is 1 to 128 bytes without spaces"))
		return
	}
	if sub {
		cl.ls.topics.join(cl, topic)
	} else {
		cl.ls.topics.leave(cl, topic)
	}
	b := append(cl.ls.reply[:0], "OK "...)
	if !sub {
		b = append(b, "UN"...)
	}
	b = append(append(b, "SUB "...), topic...)
	cl.send(ws.OpText, b)
	cl.ls.reply = b[:0]
}

func validTopic(t []byte) bool {
	if len(t) == 0 || len(t) > maxTopic {
		return false
	}
	for _, c := range t {
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			return false
		}
	}
	return true
}

// send writes a message in place into the outbound queue. Answers and
// echoes are never dropped: past the outbound cap the runtime pauses
// reading from the client (its own requests wait), and the write timeout
// closes it if it never reads.
func (cl *client) send(op ws.Opcode, p []byte) {
	room := cl.c.Reserve(cl.wc.MaxLen(len(p)))
	if room == nil {
		return
	}
	n, _ := cl.wc.PutMessage(room, op, p)
	cl.c.Commit(n)
}

func (cl *client) control(op ws.Opcode, p []byte) {
	if room := cl.c.Reserve(ws.FrameLen(len(p), false)); room != nil {
		n, _ := cl.wc.PutControl(room, op, p)
		cl.c.Commit(n)
	}
}

// closeWith sends a Close with code (unless one was sent) and closes once
// it is sent, reading and discarding what the client still sends.
func (cl *client) closeWith(code ws.CloseCode, reason string) {
	if !cl.wc.CloseSent() {
		if room := cl.c.Reserve(ws.FrameLen(2+len(reason), false)); room != nil {
			n, _ := cl.wc.PutClose(room, code, reason)
			cl.c.Commit(n)
		}
	}
	cl.c.CloseLinger()
}

// OnClose leaves the client's topics and the heartbeat's list
// (percore.CloseHandler, forwarded by httpd).
func (cl *client) OnClose(c *percore.Conn, err error) {
	if cl.seat.gone() {
		return
	}
	ls := cl.ls
	cl.wc.Release() // a message partly received: its buffer and side state back to the loop's pool
	ls.topics.leaveAll(cl)
	ls.exit(cl)
	ls.n.closes.Add(1)
	if ls.up != nil {
		ls.up.gone(cl)
	}
	ls.g.ho.gone()
}

// OnShutdown says goodbye (percore.ShutdownHandler): with 1001 at a
// shutdown, with 1012 to a client a restart could not hand over
// (handover.go).
func (cl *client) OnShutdown(c *percore.Conn) {
	if cl.ls.up != nil {
		cl.ls.up.stop()
	}
	if cl.ls.g.ho.handingOver.Load() {
		cl.ls.n.restartCloses.Add(1)
		cl.closeWith(ws.CloseServiceRestart, "service restart")
		return
	}
	cl.closeWith(ws.CloseGoingAway, "shutting down")
}

// sweep is the heartbeat, every half ping interval: a client silent for
// a whole interval is pinged, one silent for two is closed. One pass over
// the loop's clients, no timer per connection. It also takes the loop's
// outbound backlog for the metrics.
func (g *gateway) sweep(ls *loopState) {
	backlog := 0
	for i := 0; i < len(ls.clients); i++ {
		cl := ls.clients[i]
		backlog += cl.c.Buffered()
		cl.seat.missed()
		switch s := cl.seat.silent(); {
		case s > 4:
			ls.n.heartbeatCloses.Add(1)
			cl.closeWith(ws.CloseGoingAway, "no pong")
			// closed at once if nothing is queued: OnClose moved
			// another client into slot i.
			if cl.seat.gone() {
				i--
			}
		case s >= 2 && !cl.wc.CloseSent():
			ls.n.pings.Add(1)
			cl.control(ws.OpPing, nil)
		}
	}
	ls.n.backlog.Store(uint64(backlog))
	ls.n.clients.Store(uint64(len(ls.clients)))
}

// publish answers POST /publish?topic=T: the body, encoded once, goes to
// the subscribers of T on every loop, one cross-loop call per loop, and
// the answer is how many took it.
func (g *gateway) publish(w *httpd.Response, r *httpd.Request) {
	topic, _ := r.Query("topic")
	if len(topic) == 0 || len(topic) > maxTopic {
		refuse(w, 400, "want ?topic=T")
		return
	}
	body := r.Body()
	if !utf8.Valid(body) {
		refuse(w, 400, "the body goes out as a text frame: it must be UTF-8")
		return
	}
	if g.divert(w, r, topic, body) {
		return // held until a restart's hand-over ends, or forwarded to the new process
	}
	g.fanout(w, r.Conn().Loop(), string(topic), body)
}

// fanout delivers body to the subscribers of t on every loop from l, and
// answers w with how many took it.
func (g *gateway) fanout(w *httpd.Response, l *percore.Loop, t string, body []byte) {
	pm, err := g.loops.Get(l).pool.Prepare(ws.OpText, body)
	if err != nil {
		refuse(w, 500, err.Error())
		w.End() // a publish that was held or forwarded (handover.go)
		return
	}
	loops := l.Runtime().Loops()
	pending, total := len(loops), 0
	w.Hold()
	g.ho.delivering.Add(1)
	for _, to := range loops {
		var n int
		l.Call(to, func() { n = g.deliver(to, t, pm) }, func(err error) {
			if err == nil {
				total += n
			}
			if pending--; pending == 0 {
				g.ho.delivering.Add(-1)
				w.AddHeader("Content-Type", "text/plain")
				var b [20]byte
				w.Write(strconv.AppendInt(b[:0], int64(total), 10))
				w.End()
			}
		})
	}
}

// deliver hands pm to the subscribers of t on loop l (on l) and returns
// how many took it. A subscriber whose outbound queue cannot take the
// frame is skipped: the runtime refuses the write (Conn.TryReserve) and
// counts it, and the write timeout closes a client that takes nothing.
func (g *gateway) deliver(l *percore.Loop, t string, pm *ws.Prepared) int {
	ls := g.loops.Get(l)
	n := 0
	for _, cl := range ls.topics.members(t) {
		if f := cl.wc.SharedFrame(pm); f != nil {
			// The frame itself, queued without a copy (decision 0060).
			if _, err := cl.c.TryWriteShared(f); err != nil {
				ls.n.dropped.Add(1)
				continue
			}
			n++
			continue
		}
		room, err := cl.c.TryReserve(cl.wc.PreparedLen(pm))
		if err != nil {
			ls.n.dropped.Add(1)
			continue
		}
		k, _ := cl.wc.PutPrepared(room, pm)
		cl.c.Commit(k)
		n++
	}
	ls.n.delivered.Add(uint64(n))
	return n
}
