//go:build linux

package main

import (
	"strconv"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/resp"
)

// server is the handler of every connection. The keys live in the loops:
// each key belongs to the loop Loop.Owner names, and only that loop's
// thread touches it. A command for a key of another loop runs there (Loop.Call)
// and its reply comes back to the client's loop, in order.
type server struct {
	shards percore.PerLoop[shard]
	lim    resp.Limits
	// maxRequest bounds a request, and so what a connection buffers.
	maxRequest int
}

// The callbacks frame.View forwards, checked by the compiler.
var (
	_ frame.ViewHandler       = (*server)(nil)
	_ frame.ErrorHandler      = (*server)(nil)
	_ percore.OpenHandler     = (*server)(nil)
	_ percore.CloseHandler    = (*server)(nil)
	_ percore.EOFHandler      = (*server)(nil)
	_ percore.ShutdownHandler = (*server)(nil)
)

// shard is one loop's keys, and the cross-loop calls its clients reuse.
type shard struct {
	keys map[string]*entry
	ops  []*op
}

type entry struct{ v []byte }

// setup is Config.LoopSetup: each loop's shard, made on its thread.
func (s *server) setup(l *percore.Loop) error {
	s.shards.Set(l, shard{keys: make(map[string]*entry)})
	return nil
}

// kind is a command that reads or writes keys.
type kind uint8

const (
	cmdGet kind = iota
	cmdSet
	cmdIncr
	cmdDel    // counted over keys
	cmdExists // counted over keys
)

// exec runs a one-key command on sh and appends its reply to dst.
func (sh *shard) exec(k kind, key, val, dst []byte) []byte {
	switch k {
	case cmdGet:
		if e := sh.keys[string(key)]; e != nil {
			return resp.AppendBulk(dst, e.v)
		}
		return resp.AppendNull(dst)
	case cmdSet:
		sh.set(key, val)
		return append(dst, "+OK\r\n"...)
	case cmdIncr:
		var n int64
		if e := sh.keys[string(key)]; e != nil {
			v, err := strconv.ParseInt(string(e.v), 10, 64)
			if err != nil || strconv.FormatInt(v, 10) != string(e.v) {
				return resp.AppendError(dst, "ERR value is not an integer or out of range")
			}
			if v == 1<<63-1 {
				return resp.AppendError(dst, "ERR increment or decrement would overflow")
			}
			n = v
		}
		n++
		var buf [20]byte
		sh.set(key, strconv.AppendInt(buf[:0], n, 10))
		return resp.AppendInt(dst, n)
	}
	return dst
}

// count runs DEL or EXISTS of one key on sh: 1 if the key was there.
func (sh *shard) count(k kind, key []byte) int64 {
	e := sh.keys[string(key)]
	if e == nil {
		return 0
	}
	if k == cmdDel {
		delete(sh.keys, string(key))
	}
	return 1
}

func (sh *shard) set(key, val []byte) {
	if e := sh.keys[string(key)]; e != nil {
		e.v = append(e.v[:0], val...)
		return
	}
	sh.keys[string(key)] = &entry{v: append([]byte(nil), val...)}
}

// client is one connection: its replies not yet written, in order.
type client struct {
	s    *server
	c    *percore.Conn
	sh   *shard // the client's loop's
	args [][]byte
	tmp  []byte
	// queue[head:] are the replies waiting behind a cross-loop call;
	// free are replies to reuse.
	queue []*reply
	head  int
	free  []*reply
	// closing: close once the queue is written (QUIT, the end of the
	// stream, a shutdown, a protocol error); gone: closed.
	closing, gone bool
}

// reply is one command's reply, waiting for the cross-loop calls it needs.
type reply struct {
	buf   []byte
	left  int   // calls not back yet
	sum   int64 // DEL, EXISTS: keys counted so far
	count bool
	fail  bool
}

func (s *server) OnOpen(c *percore.Conn) {
	frame.SetValue(c, &client{s: s, c: c, sh: s.shards.Get(c.Loop())})
}

// OnView runs every whole command of in and returns the bytes they took.
func (s *server) OnView(c *percore.Conn, in []byte) (int, error) {
	cl := frame.Value(c).(*client)
	done := 0
	for done < len(in) && !cl.closing {
		args, n, err := resp.Parse(cl.args[:0], in[done:], s.lim)
		if err != nil {
			// Redis answers the commands before the bad one, then
			// the error, then closes.
			cl.sendTmp(resp.AppendError(cl.tmp[:0], "ERR "+err.Error()))
			cl.closeWhenDone()
			return len(in), nil
		}
		if n == 0 {
			break
		}
		cl.args = args
		done += n
		if len(args) > 0 {
			cl.command(args)
		}
	}
	if cl.closing {
		return len(in), nil
	}
	return done, nil
}

// OnFrameError answers a request over the buffer limit; frame.View then
// closes the connection.
func (s *server) OnFrameError(c *percore.Conn, err error) {
	c.Write([]byte("-ERR Protocol error: request longer than the server's buffer\r\n"))
}

// OnEOF closes once the replies on their way are written.
func (s *server) OnEOF(c *percore.Conn) { frame.Value(c).(*client).closeWhenDone() }

// OnShutdown does the same for a graceful shutdown.
func (s *server) OnShutdown(c *percore.Conn) { frame.Value(c).(*client).closeWhenDone() }

func (s *server) OnClose(c *percore.Conn, _ error) {
	if cl, ok := frame.Value(c).(*client); ok {
		cl.gone = true
	}
}

var (
	replyOK      = []byte("+OK\r\n")
	replyPong    = []byte("+PONG\r\n")
	replyNull    = []byte("$-1\r\n")
	replyEmpty   = []byte("*0\r\n")
	replyNoProto = []byte("-NOPROTO sorry, this protocol version is not supported\r\n")
	replyHello   = func() []byte {
		b := resp.AppendArray(nil, 14)
		for _, kv := range [][2]string{{"server", "percore-resp"}, {"version", "7.0.0"}} {
			b = resp.AppendBulkString(resp.AppendBulkString(b, kv[0]), kv[1])
		}
		b = resp.AppendInt(resp.AppendBulkString(b, "proto"), 2)
		b = resp.AppendInt(resp.AppendBulkString(b, "id"), 1)
		for _, kv := range [][2]string{{"mode", "standalone"}, {"role", "master"}} {
			b = resp.AppendBulkString(resp.AppendBulkString(b, kv[0]), kv[1])
		}
		return resp.AppendArray(resp.AppendBulkString(b, "modules"), 0)
	}()
)

// command runs one command.
func (cl *client) command(args [][]byte) {
	name := args[0]
	switch {
	case is(name, "GET"):
		if cl.arity(args, 2, 2, "get") {
			cl.keyed(cmdGet, args[1], nil)
		}
	case is(name, "SET"):
		switch {
		case !cl.arity(args, 3, -1, "set"):
		case len(args) > 3:
			cl.sendTmp(resp.AppendError(cl.tmp[:0], "ERR syntax error"))
		default:
			cl.keyed(cmdSet, args[1], args[2])
		}
	case is(name, "INCR"):
		if cl.arity(args, 2, 2, "incr") {
			cl.keyed(cmdIncr, args[1], nil)
		}
	case is(name, "DEL"):
		if cl.arity(args, 2, -1, "del") {
			cl.counted(cmdDel, args[1:])
		}
	case is(name, "EXISTS"):
		if cl.arity(args, 2, -1, "exists") {
			cl.counted(cmdExists, args[1:])
		}
	case is(name, "PING"):
		if cl.arity(args, 1, 2, "ping") {
			if len(args) == 1 {
				cl.send(replyPong)
			} else {
				cl.sendTmp(resp.AppendBulk(cl.tmp[:0], args[1]))
			}
		}
	case is(name, "ECHO"):
		if cl.arity(args, 2, 2, "echo") {
			cl.sendTmp(resp.AppendBulk(cl.tmp[:0], args[1]))
		}
	case is(name, "COMMAND"):
		cl.send(replyEmpty) // no command table: enough for redis-cli
	case is(name, "HELLO"):
		if len(args) == 1 || string(args[1]) == "2" {
			cl.send(replyHello)
		} else {
			cl.send(replyNoProto)
		}
	case is(name, "CLIENT"), is(name, "SELECT") && len(args) == 2 && string(args[1]) == "0":
		cl.send(replyOK)
	case is(name, "CONFIG"):
		cl.config(args)
	case is(name, "QUIT"):
		cl.send(replyOK)
		cl.closeWhenDone()
	default:
		cl.sendTmp(resp.AppendError(cl.tmp[:0], unknown(args)))
	}
}

// config answers CONFIG GET of what redis-benchmark asks (save,
// appendonly) as a server without persistence would.
func (cl *client) config(args [][]byte) {
	if len(args) != 3 || !is(args[1], "GET") {
		cl.send(replyEmpty)
		return
	}
	value := ""
	switch string(args[2]) {
	case "save":
	case "appendonly":
		value = "no"
	default:
		cl.send(replyEmpty)
		return
	}
	b := resp.AppendBulk(resp.AppendArray(cl.tmp[:0], 2), args[2])
	cl.sendTmp(resp.AppendBulkString(b, value))
}

// arity checks the number of arguments (max -1: any), answering Redis's
// error when it is wrong.
func (cl *client) arity(args [][]byte, min, max int, name string) bool {
	if len(args) >= min && (max < 0 || len(args) <= max) {
		return true
	}
	cl.sendTmp(resp.AppendError(cl.tmp[:0], "ERR wrong number of arguments for '"+name+"' command"))
	return false
}

// unknown is Redis's error text for an unknown command.
func unknown(args [][]byte) string {
	msg := "ERR unknown command '" + trunc(args[0], 128) + "', with args beginning with: "
	rest := ""
	for _, a := range args[1:] {
		if len(rest) >= 128 {
			break
		}
		rest += "'" + trunc(a, 128-len(rest)) + "' "
	}
	return msg + rest
}

func trunc(b []byte, n int) string { return string(b[:min(len(b), n)]) }

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

// keyed runs a one-key command: here at once when the key is this loop's,
// else on its owner's loop.
func (cl *client) keyed(k kind, key, val []byte) {
	owner := cl.c.Loop().Owner(key)
	if owner == cl.c.Loop() {
		if cl.head == len(cl.queue) {
			cl.direct(k, key, val)
			return
		}
		r := cl.push()
		r.buf = cl.sh.exec(k, key, val, r.buf[:0])
		return
	}
	r := cl.push()
	r.left = 1
	cl.call(owner, r, k, key, val)
}

// direct writes the reply of a command on a key of this loop straight
// into the connection's outbound queue: nothing waits before it.
func (cl *client) direct(k kind, key, val []byte) {
	if k != cmdGet {
		cl.tmp = cl.sh.exec(k, key, val, cl.tmp[:0])
		cl.c.Write(cl.tmp)
		return
	}
	e := cl.sh.keys[string(key)]
	if e == nil {
		cl.c.Write(replyNull)
		return
	}
	if b := cl.c.Reserve(resp.BulkLen(len(e.v))); b != nil {
		cl.c.Commit(len(resp.AppendBulk(b[:0], e.v)))
	}
}

// counted runs DEL or EXISTS over keys, each on its owner, and replies
// with the sum.
func (cl *client) counted(k kind, keys [][]byte) {
	r := cl.push()
	r.count = true
	for _, key := range keys {
		owner := cl.c.Loop().Owner(key)
		if owner == cl.c.Loop() {
			r.sum += cl.sh.count(k, key)
			continue
		}
		r.left++
		cl.call(owner, r, k, key, nil)
	}
	if r.left == 0 {
		r.buf = resp.AppendInt(r.buf[:0], r.sum)
		cl.flush()
	}
}

// send answers with p, a reply that needs no key: at once, or behind the
// replies that wait.
func (cl *client) send(p []byte) {
	if cl.head == len(cl.queue) {
		cl.c.Write(p)
		return
	}
	r := cl.push()
	r.buf = append(r.buf[:0], p...)
}

// sendTmp is send for a reply built in cl.tmp, which it keeps for the
// next one.
func (cl *client) sendTmp(p []byte) {
	cl.tmp = p
	cl.send(p)
}

// push queues a reply.
func (cl *client) push() *reply {
	var r *reply
	if n := len(cl.free); n > 0 {
		r = cl.free[n-1]
		cl.free = cl.free[:n-1]
	} else {
		r = new(reply)
	}
	r.left, r.sum, r.count, r.fail = 0, 0, false, false
	cl.queue = append(cl.queue, r)
	return r
}

// flush writes the replies that are ready, in order, up to the first that
// waits.
func (cl *client) flush() {
	for cl.head < len(cl.queue) && cl.queue[cl.head].left == 0 {
		r := cl.queue[cl.head]
		cl.queue[cl.head] = nil
		cl.head++
		cl.c.Write(r.buf)
		cl.free = append(cl.free, r)
	}
	if cl.head == len(cl.queue) {
		cl.queue, cl.head = cl.queue[:0], 0
		if cl.closing {
			cl.c.Close()
		}
	}
}

// closeWhenDone closes the connection once the replies on their way are
// written, and takes no more commands.
func (cl *client) closeWhenDone() {
	cl.closing = true
	if cl.head == len(cl.queue) {
		cl.c.Close()
	}
}

// op is one cross-loop call: a command on a key of another loop. It is
// made on the client's loop, runs on the owner's, and comes back, reused.
type op struct {
	cl       *client
	r        *reply
	to       *percore.Loop
	k        kind
	key, val []byte
	out      []byte // the reply, built on the owner
	n        int64  // DEL, EXISTS: counted on the owner
	runFn    func()
	doneFn   func(error)
}

// call sends a command on key to its owner; its reply fills r.
func (cl *client) call(owner *percore.Loop, r *reply, k kind, key, val []byte) {
	var o *op
	if n := len(cl.sh.ops); n > 0 {
		o = cl.sh.ops[n-1]
		cl.sh.ops = cl.sh.ops[:n-1]
	} else {
		o = new(op)
		o.runFn, o.doneFn = o.run, o.done
	}
	o.cl, o.r, o.to, o.k = cl, r, owner, k
	o.key = append(o.key[:0], key...) // the command's bytes are the read's
	o.val = append(o.val[:0], val...)
	cl.c.Loop().Call(owner, o.runFn, o.doneFn)
}

// run runs on the owner's loop.
func (o *op) run() {
	sh := o.cl.s.shards.Get(o.to)
	if o.k == cmdDel || o.k == cmdExists {
		o.n = sh.count(o.k, o.key)
		return
	}
	o.out = sh.exec(o.k, o.key, o.val, o.out[:0])
}

// done runs back on the client's loop.
func (o *op) done(err error) {
	cl, r := o.cl, o.r
	switch {
	case err != nil:
		r.fail = true
		r.buf = resp.AppendError(r.buf[:0], "ERR "+err.Error())
	case r.fail:
	case r.count:
		r.sum += o.n
	default:
		r.buf, o.out = o.out, r.buf[:0] // the owner built it: take it
	}
	if r.left--; r.left == 0 && r.count && !r.fail {
		r.buf = resp.AppendInt(r.buf[:0], r.sum)
	}
	o.cl, o.r, o.to = nil, nil, nil
	cl.sh.ops = append(cl.sh.ops, o)
	if !cl.gone {
		cl.flush()
	}
}
