//go:build linux

package main

import (
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/ordered"
	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/frame/resp/commands"
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
	parsed   percore.PerLoop[int64] // the bytes the loop's request parsers examined
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
		b := &backend{p: p, idx: i, addr: addr, local: p.pools[i].Local(l)}
		b.gotFn = b.got
		bs[i] = b
	}
	p.loops.Set(l, bs)
	p.parsed.Set(l, 0)
	return nil
}

// client is one client connection.
type client struct {
	p      *proxy
	c      *percore.Conn
	bs     []*backend
	q      *ordered.Queue[join]
	rp     resp.Parser // the progress through a partial command
	parsed *int64      // the loop's count of bytes parsed
	args   [][]byte
	keys   []int   // the key positions of the command at hand
	routes []route // per server: where its commands in flight are
	tmp    []byte
	paused bool
}

func (p *proxy) OnOpen(c *percore.Conn) {
	bs := *p.loops.Get(c.Loop())
	c.SetValue(&client{p: p, c: c, bs: bs, routes: make([]route, len(bs)), q: ordered.New[join](c),
		parsed: p.parsed.Get(c.Loop())})
}

// OnView forwards every whole command of in and returns the bytes they
// took; it stops, and pauses the client's reads, while too many of its
// replies wait. The parser keeps its progress through a partial command,
// so that a command that arrives in many reads is read once (issue 23,
// decision 0029).
func (p *proxy) OnView(c *percore.Conn, in []byte) (int, error) {
	cl := c.Value().(*client)
	scanned := cl.rp.Scanned()
	defer func() { *cl.parsed += cl.rp.Scanned() - scanned }()
	done := 0
	for done < len(in) && !cl.q.Closing() {
		if cl.q.Waiting() >= p.maxWait {
			cl.paused = true
			frame.PauseRead(c)
			break
		}
		args, n, err := cl.rp.Parse(cl.args[:0], in[done:], p.lim)
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
	if cap(cl.args) > maxKeptArgs {
		cl.args = nil // a command of many arguments: do not keep its room for the connection's life
	}
	if cl.q.Closing() {
		cl.rp.Reset()
		return len(in), nil
	}
	return done, nil
}

// maxKeptArgs bounds the room for arguments a connection keeps between
// reads.
const maxKeptArgs = 1024

// OnFrameError answers a request over -max-request; frame.View then
// closes the connection.
func (p *proxy) OnFrameError(c *percore.Conn, err error) {
	c.Write([]byte("-ERR Protocol error: request longer than the proxy's buffer\r\n"))
}

func (p *proxy) OnEOF(c *percore.Conn)      { c.Value().(*client).q.CloseWhenDone() }
func (p *proxy) OnShutdown(c *percore.Conn) { c.Value().(*client).q.CloseWhenDone() }

func (p *proxy) OnClose(c *percore.Conn, _ error) {
	if cl, ok := c.Value().(*client); ok {
		cl.q.Gone() // replies on their way are counted off and dropped
	}
}

var (
	replyOK    = []byte("+OK\r\n")
	replyPong  = []byte("+PONG\r\n")
	replyEmpty = []byte("*0\r\n")
)

// command routes one command; raw is its bytes as the client sent them.
// The proxy answers a few connection commands itself; every other command
// is looked up in Redis's command table, refused by its rule (policy.go),
// checked for its arity, and sent to the server its keys belong to (found
// by the table's key specs), split by key when they belong to several and
// the command allows it.
func (cl *client) command(args [][]byte, raw []byte) {
	name := args[0]
	switch {
	case resp.EqualFold(name, "PING") && len(args) == 1:
		cl.q.Send(replyPong)
		return
	case resp.EqualFold(name, "PING") && len(args) == 2, resp.EqualFold(name, "ECHO") && len(args) == 2:
		cl.sendTmp(resp.AppendBulk(cl.tmp[:0], args[1]))
		return
	case resp.EqualFold(name, "COMMAND"):
		cl.q.Send(replyEmpty)
		return
	case resp.EqualFold(name, "QUIT"):
		cl.q.Send(replyOK)
		cl.q.CloseWhenDone()
		return
	case resp.EqualFold(name, "SELECT") && len(args) == 2 && string(args[1]) == "0",
		resp.EqualFold(name, "CLIENT") && len(args) == 3 && resp.EqualFold(args[1], "SETNAME"):
		cl.q.Send(replyOK)
		return
	case resp.EqualFold(name, "HELLO") && (len(args) == 1 || len(args) == 2 && string(args[1]) == "2"):
		cl.q.Send(helloReply)
		return
	case resp.EqualFold(name, "CONFIG") && len(args) == 3 && resp.EqualFold(args[1], "GET"):
		cl.q.Send(replyEmpty) // the servers' settings are not the proxy's
		return
	}
	cmd := commands.Find(args)
	if cmd == nil {
		cl.sendTmp(resp.AppendError(cl.tmp[:0], commands.NotFoundError(args)))
		return
	}
	r := rules()[cmd]
	switch {
	case r.refuse != "":
		cl.sendTmp(resp.AppendError(cl.tmp[:0], refusal(cmd, r.refuse)))
		return
	case !cmd.ArityOK(len(args)):
		cl.sendTmp(resp.AppendError(cl.tmp[:0], commands.ArityError(cmd)))
		return
	}
	keys, ok := cmd.Keys(cl.keys[:0], args)
	cl.keys = keys
	if !ok || len(keys) == 0 {
		cl.sendTmp(resp.AppendError(cl.tmp[:0], refusal(cmd, "no key to route it by")))
		return
	}
	server := cl.p.serverOf(args[keys[0]])
	one := true
	for _, k := range keys[1:] {
		if cl.p.serverOf(args[k]) != server {
			one = false
			break
		}
	}
	switch {
	case one:
		rp := cl.q.Push(1)
		rp.Data.mode = joinOne
		cl.bs[server].send(raw, pending{cl: cl, r: rp})
	case r.split && evenKeys(keys):
		if keys[len(keys)-1]+keys[1]-keys[0] != len(args) {
			// MSET a 1 b: the last key has no value (Redis checks
			// this in the command, after the arity).
			cl.sendTmp(resp.AppendError(cl.tmp[:0], commands.ArityError(cmd)))
			return
		}
		cl.split(args, keys, r.join)
	default:
		cl.sendTmp(resp.AppendError(cl.tmp[:0], "CROSSSLOT Keys in request don't hash to the same server"))
	}
}

// evenKeys reports whether keys start at the first argument and come
// every step-th (MGET a b c, MSET a 1 b 2): what split cuts into one
// command per key, each with the arguments up to the next key.
func evenKeys(keys []int) bool {
	if len(keys) < 2 || keys[0] != 1 {
		return false
	}
	step := keys[1] - keys[0]
	for i, k := range keys {
		if k != 1+i*step {
			return false
		}
	}
	return true
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

func (cl *client) sendTmp(p []byte) {
	cl.tmp = p
	cl.q.Send(p)
}

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
