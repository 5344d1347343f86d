//go:build linux

package main

import (
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/ordered"
	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// proxy is the handler of client connections, behind frame.View: each
// command goes to the server its key hashes to (twemproxy's fnv1a_64 and
// modula), on a connection this loop leased from that server's pool;
// commands of several clients, and a client's pipeline, share the leased
// connections, and the replies come back in order (an ordered.Queue per
// client, a FIFO per upstream connection).
type proxy struct {
	servers  []string
	pools    []*pool.Pool[*upstream.Conn]
	loops    percore.PerLoop[[]*backend]
	lim      resp.Limits
	maxReq   int
	maxReply int
	depth    int // requests in flight on a link before another is leased
	maxConns int // the pools' MaxSize: links per server per loop
	timeout  time.Duration
	maxWait  int // replies a client may have waiting before its reads pause
}

// The callbacks frame.View forwards, checked by the compiler.
var (
	_ frame.ViewHandler       = (*proxy)(nil)
	_ frame.ErrorHandler      = (*proxy)(nil)
	_ percore.OpenHandler     = (*proxy)(nil)
	_ percore.CloseHandler    = (*proxy)(nil)
	_ percore.EOFHandler      = (*proxy)(nil)
	_ percore.ShutdownHandler = (*proxy)(nil)
)

// setup is Config.LoopSetup: the loop's backends, one per server.
func (p *proxy) setup(l *percore.Loop) error {
	bs := make([]*backend, len(p.servers))
	for i, addr := range p.servers {
		b := &backend{p: p, addr: addr, local: p.pools[i].Local(l)}
		b.gotFn = b.got
		bs[i] = b
	}
	p.loops.Set(l, bs)
	return nil
}

// join is how a client's waiting reply is made from its parts: one
// upstream reply forwarded as it is, or a multi-key command split by
// server and joined.
type join struct {
	mode  joinMode
	sum   int64
	parts [][]byte // MGET: each key's reply
	fail  []byte
}

type joinMode uint8

const (
	joinOne   joinMode = iota // the one part is the reply
	joinSum                   // DEL, EXISTS: an integer
	joinArray                 // MGET: an array of the parts
	joinOK                    // MSET: +OK unless a part failed
)

// client is one client connection.
type client struct {
	p      *proxy
	c      *percore.Conn
	bs     []*backend
	q      *ordered.Queue[join]
	args   [][]byte
	tmp    []byte
	paused bool
}

func (p *proxy) OnOpen(c *percore.Conn) {
	frame.SetValue(c, &client{p: p, c: c, bs: *p.loops.Get(c.Loop()), q: ordered.New[join](c)})
}

// OnView forwards every whole command of in and returns the bytes they
// took; it stops, and pauses the client's reads, while too many of its
// replies wait.
func (p *proxy) OnView(c *percore.Conn, in []byte) (int, error) {
	cl := frame.Value(c).(*client)
	done := 0
	for done < len(in) && !cl.q.Closing() {
		if cl.q.Waiting() >= p.maxWait {
			cl.paused = true
			frame.PauseRead(c)
			break
		}
		args, n, err := resp.Parse(cl.args[:0], in[done:], p.lim)
		if err != nil {
			cl.sendTmp(resp.AppendError(cl.tmp[:0], "ERR "+err.Error()))
			cl.q.CloseWhenDone()
			return len(in), nil
		}
		if n == 0 {
			break
		}
		cl.args = args
		if len(args) > 0 {
			cl.command(args, in[done:done+n])
		}
		done += n
	}
	if cl.q.Closing() {
		return len(in), nil
	}
	return done, nil
}

// OnFrameError answers a request over -max-request; frame.View then
// closes the connection.
func (p *proxy) OnFrameError(c *percore.Conn, err error) {
	c.Write([]byte("-ERR Protocol error: request longer than the proxy's buffer\r\n"))
}

func (p *proxy) OnEOF(c *percore.Conn)      { frame.Value(c).(*client).q.CloseWhenDone() }
func (p *proxy) OnShutdown(c *percore.Conn) { frame.Value(c).(*client).q.CloseWhenDone() }

func (p *proxy) OnClose(c *percore.Conn, _ error) {
	if cl, ok := frame.Value(c).(*client); ok {
		cl.q.Gone() // replies on their way are counted off and dropped
	}
}

var (
	replyOK    = []byte("+OK\r\n")
	replyPong  = []byte("+PONG\r\n")
	replyEmpty = []byte("*0\r\n")
)

// command routes one command; raw is its bytes as the client sent them.
func (cl *client) command(args [][]byte, raw []byte) {
	name := args[0]
	switch {
	case is(name, "PING") && len(args) == 1:
		cl.q.Send(replyPong)
	case is(name, "COMMAND"):
		cl.q.Send(replyEmpty)
	case is(name, "QUIT"):
		cl.q.Send(replyOK)
		cl.q.CloseWhenDone()
	case is(name, "SELECT") && len(args) == 2 && string(args[1]) == "0",
		is(name, "CLIENT") && len(args) >= 2 && is(args[1], "SETNAME"):
		cl.q.Send(replyOK)
	case is(name, "HELLO") && (len(args) == 1 || string(args[1]) == "2"):
		cl.q.Send(helloReply)
	case is(name, "CONFIG") && len(args) == 3 && is(args[1], "GET"):
		cl.q.Send(replyEmpty) // the servers' settings are not the proxy's
	case len(cl.bs) > 1 && len(args) > 2 && (is(name, "MGET") || is(name, "DEL") || is(name, "EXISTS") || is(name, "UNLINK")):
		mode := joinSum
		if is(name, "MGET") {
			mode = joinArray
		}
		cl.split(args, 1, mode)
	case len(cl.bs) > 1 && is(name, "MSET"):
		if len(args) < 3 || len(args)%2 == 0 {
			cl.sendTmp(resp.AppendError(cl.tmp[:0], "ERR wrong number of arguments for 'mset' command"))
			return
		}
		cl.split(args, 2, joinOK)
	case unsupported(name):
		cl.sendTmp(resp.AppendError(cl.tmp[:0], "ERR command '"+trunc(name, 64)+"' is not supported by the proxy"))
	case len(args) < 2:
		cl.sendTmp(resp.AppendError(cl.tmp[:0], "ERR command '"+trunc(name, 64)+"' has no key: not supported by the proxy"))
	default:
		r := cl.q.Push(1)
		r.Data.mode = joinOne
		cl.bs[cl.p.serverOf(args[1])].send(raw, pending{cl: cl, r: r})
	}
}

var helloReply = func() []byte {
	b := resp.AppendArray(nil, 14)
	for _, kv := range [][2]string{{"server", "percore-redis-proxy"}, {"version", "7.0.0"}} {
		b = resp.AppendBulkString(resp.AppendBulkString(b, kv[0]), kv[1])
	}
	b = resp.AppendInt(resp.AppendBulkString(b, "proto"), 2)
	b = resp.AppendInt(resp.AppendBulkString(b, "id"), 1)
	for _, kv := range [][2]string{{"mode", "proxy"}, {"role", "master"}} {
		b = resp.AppendBulkString(resp.AppendBulkString(b, kv[0]), kv[1])
	}
	return resp.AppendArray(resp.AppendBulkString(b, "modules"), 0)
}()

// unsupported are the commands a proxy with shared, pooled upstream
// connections cannot forward: they change or block the connection
// (transactions, subscriptions, blocking pops, other databases,
// authentication), or span every key. twemproxy refuses them too.
func unsupported(name []byte) bool {
	for _, n := range unsupportedNames {
		if is(name, n) {
			return true
		}
	}
	return false
}

var unsupportedNames = []string{"AUTH", "SELECT", "MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH", "SUBSCRIBE",
	"PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "MONITOR", "BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH",
	"BZPOPMIN", "BZPOPMAX", "BLMPOP", "BZMPOP", "XREAD", "XREADGROUP", "WAIT", "CLIENT", "HELLO", "RESET", "SHUTDOWN",
	"KEYS", "SCAN", "FLUSHALL", "FLUSHDB", "DBSIZE", "RANDOMKEY", "SWAPDB", "MOVE", "MIGRATE", "SCRIPT", "CONFIG",
	"DEBUG", "SYNC", "PSYNC", "REPLICAOF", "SLAVEOF", "SAVE", "BGSAVE", "BGREWRITEAOF", "FAILOVER", "CLUSTER"}

// split sends a multi-key command as one command per key (MGET k -> GET
// k, DEL k, EXISTS k, MSET k v -> SET k v), each to its server, and joins
// the replies.
func (cl *client) split(args [][]byte, step int, mode joinMode) {
	keys := args[1:]
	r := cl.q.Push(1) // held until every part is sent
	r.Data.mode, r.Data.sum, r.Data.fail = mode, 0, r.Data.fail[:0]
	if mode == joinArray {
		for len(r.Data.parts) < len(keys) {
			r.Data.parts = append(r.Data.parts, nil)
		}
		r.Data.parts = r.Data.parts[:len(keys)]
	}
	sub := "GET"
	switch {
	case step == 2:
		sub = "SET"
	case is(args[0], "DEL"), is(args[0], "UNLINK"):
		sub = string(upper(args[0]))
	case is(args[0], "EXISTS"):
		sub = "EXISTS"
	}
	for i := 0; i < len(keys); i += step {
		b := resp.AppendArray(cl.tmp[:0], 1+step)
		b = resp.AppendBulkString(b, sub)
		b = resp.AppendBulk(b, keys[i])
		if step == 2 {
			b = resp.AppendBulk(b, keys[i+1])
		}
		cl.tmp = b
		cl.q.Add(r, 1)
		cl.bs[cl.p.serverOf(keys[i])].send(b, pending{cl: cl, r: r, part: i})
	}
	cl.partDone(r)
}

// part takes in part i of r: for a forwarded command, the reply itself.
// reply is valid only during the call.
func (cl *client) part(r *ordered.Reply[join], i int, reply []byte) {
	d := &r.Data
	switch {
	case d.mode == joinOne:
		r.Buf = append(r.Buf[:0], reply...)
	case len(reply) > 0 && reply[0] == '-':
		if len(d.fail) == 0 {
			d.fail = append(d.fail, reply...)
		}
	case d.mode == joinSum:
		if n, ok := intReply(reply); ok {
			d.sum += n
		} else if len(d.fail) == 0 {
			d.fail = append(d.fail, "-ERR unexpected reply from upstream\r\n"...)
		}
	case d.mode == joinArray:
		d.parts[i] = append(d.parts[i][:0], reply...)
	}
	cl.partDone(r)
}

// partDone counts off a part of r, building a joined reply from its parts
// first when it is the last.
func (cl *client) partDone(r *ordered.Reply[join]) {
	if d := &r.Data; d.mode != joinOne && cl.q.Left(r) == 1 {
		switch {
		case len(d.fail) > 0:
			r.Buf = append(r.Buf[:0], d.fail...)
		case d.mode == joinSum:
			r.Buf = resp.AppendInt(r.Buf[:0], d.sum)
		case d.mode == joinArray:
			r.Buf = resp.AppendArray(r.Buf[:0], len(d.parts))
			for _, p := range d.parts {
				r.Buf = append(r.Buf, p...)
			}
		case d.mode == joinOK:
			r.Buf = append(r.Buf[:0], replyOK...)
		}
	}
	cl.q.Done(r)
	if cl.paused && cl.q.Waiting() <= cl.p.maxWait/2 && !cl.c.Closed() {
		cl.paused = false
		frame.ResumeRead(cl.c)
	}
}

// intReply reads an integer reply, ":n\r\n".
func intReply(b []byte) (int64, bool) {
	if len(b) < 4 || b[0] != ':' {
		return 0, false
	}
	var n int64
	neg := false
	s := b[1 : len(b)-2]
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func (cl *client) sendTmp(p []byte) {
	cl.tmp = p
	cl.q.Send(p)
}

// is reports whether b is the upper-case ASCII word upper, in any case.
func is(b []byte, upper string) bool {
	if len(b) != len(upper) {
		return false
	}
	for i := range len(b) {
		if b[i]&^0x20 != upper[i] {
			return false
		}
	}
	return true
}

func upper(b []byte) []byte {
	out := []byte(string(b))
	for i, c := range out {
		if c >= 'a' && c <= 'z' {
			out[i] = c - 'a' + 'A'
		}
	}
	return out
}

func trunc(b []byte, n int) string { return string(b[:min(len(b), n)]) }

// serverOf is the server key belongs to: twemproxy's fnv1a_64 hash (which
// is 32 bits wide: twemproxy truncates the 64-bit FNV constants) and its
// modula distribution with every weight 1.
func (p *proxy) serverOf(key []byte) int {
	if len(p.servers) == 1 {
		return 0
	}
	return int(fnv1a64(key) % uint32(len(p.servers)))
}

// fnv1a64 is twemproxy's hash_fnv1a_64 (src/hashkit/nc_fnv.c). It reads
// the key as C chars, which are signed on x86 and widened to uint32 with
// their sign: a byte >= 0x80 is xored in as 0xffffff80 and up, not 0x80
// (what nutcracker does, and so what a key like "kéy" needs to land where
// nutcracker puts it).
func fnv1a64(key []byte) uint32 {
	h := uint32(0xcbf29ce484222325 & 0xffffffff)
	for _, c := range key {
		h ^= uint32(int32(int8(c)))
		h *= uint32(0x100000001b3 & 0xffffffff)
	}
	return h
}
