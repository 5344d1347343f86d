//go:build linux

package main

import (
	"math"
	"strconv"
	"sync"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/ordered"
	"github.com/percore/percore/runtime/frame/resp"
)

// server is the handler of every connection. The keys live in the loops:
// each key belongs to the loop Loop.Owner names, and only that loop's
// thread touches it. A command for a key of another loop runs there
// (Loop.Call) and its reply comes back to the client's loop, where an
// ordered.Queue puts it back in order among the connection's others.
type server struct {
	shards percore.PerLoop[shard]
	lim    resp.Limits
	// maxRequest bounds a request, and so what a connection buffers.
	maxRequest int
	// maxMemory is -maxmemory (0: none), shared equally by the loops;
	// evict is the policy allkeys-random (else noeviction).
	maxMemory int64
	evict     bool
	sweep     time.Duration
	started   time.Time

	mu    sync.Mutex
	loops []*percore.Loop // every loop, for DBSIZE, FLUSHALL, INFO
	nLoop int             // how many loops the runtime has
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

// setup is Config.LoopSetup: each loop's shard, made on its thread, and
// its expiry sweep.
func (s *server) setup(l *percore.Loop) error {
	limit := int64(0)
	if s.maxMemory > 0 {
		limit = max(s.maxMemory/int64(s.nLoop), 1)
	}
	sh := s.shards.Set(l, newShard(limit, s.evict))
	s.mu.Lock()
	s.loops = append(s.loops, l)
	s.mu.Unlock()
	var tick func()
	tick = func() {
		sh.sweep(l.Now().UnixMilli())
		l.AfterFunc(s.sweep, tick)
	}
	l.AfterFunc(s.sweep, tick)
	return nil
}

// allLoops returns every loop of the runtime (all have run setup once a
// client is served).
func (s *server) allLoops() []*percore.Loop {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loops
}

// join is how a waiting reply is made from its parts.
type join struct {
	mode  joinMode
	sum   int64
	parts [][]byte // MGET: each key's reply, in order
	fail  []byte   // the first part's error, if any
	info  bool     // kStats for INFO, not DBSIZE
	stats counts   // kStats: summed over the loops
	resp3 bool
}

type joinMode uint8

const (
	joinOne   joinMode = iota // the one part is the reply
	joinSum                   // DEL, EXISTS, DBSIZE: an integer
	joinArray                 // MGET: an array of the parts
	joinOK                    // MSET, FLUSHALL: +OK unless a part failed
)

// client is one connection.
type client struct {
	s     *server
	c     *percore.Conn
	sh    *shard // the client's loop's
	q     *ordered.Queue[join]
	args  [][]byte
	tmp   []byte
	resp3 bool
}

func (s *server) OnOpen(c *percore.Conn) {
	frame.SetValue(c, &client{s: s, c: c, sh: s.shards.Get(c.Loop()), q: ordered.New[join](c)})
}

// OnView runs every whole command of in and returns the bytes they took.
func (s *server) OnView(c *percore.Conn, in []byte) (int, error) {
	cl := frame.Value(c).(*client)
	done := 0
	for done < len(in) && !cl.q.Closing() {
		args, n, err := resp.Parse(cl.args[:0], in[done:], s.lim)
		if err != nil {
			// Redis answers the commands before the bad one, then
			// the error, then closes.
			cl.sendTmp(resp.AppendError(cl.tmp[:0], "ERR "+err.Error()))
			cl.q.CloseWhenDone()
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
	if cl.q.Closing() {
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
func (s *server) OnEOF(c *percore.Conn) { frame.Value(c).(*client).q.CloseWhenDone() }

// OnShutdown does the same for a graceful shutdown.
func (s *server) OnShutdown(c *percore.Conn) { frame.Value(c).(*client).q.CloseWhenDone() }

func (s *server) OnClose(c *percore.Conn, _ error) {
	if cl, ok := frame.Value(c).(*client); ok {
		cl.q.Gone()
	}
}

var (
	replyPong    = []byte("+PONG\r\n")
	replyEmpty   = []byte("*0\r\n")
	replyNoProto = []byte("-NOPROTO unsupported protocol version\r\n")
	replySyntax  = "ERR syntax error"
)

// hello is HELLO's reply, in RESP2 (an array) or RESP3 (a map).
func hello(resp3 bool) []byte {
	var b []byte
	if resp3 {
		b = append(b, "%7\r\n"...)
	} else {
		b = resp.AppendArray(b, 14)
	}
	for _, kv := range [][2]string{{"server", "percore-kv"}, {"version", "7.0.15"}} {
		b = resp.AppendBulkString(resp.AppendBulkString(b, kv[0]), kv[1])
	}
	proto := int64(2)
	if resp3 {
		proto = 3
	}
	b = resp.AppendInt(resp.AppendBulkString(b, "proto"), proto)
	b = resp.AppendInt(resp.AppendBulkString(b, "id"), 1)
	for _, kv := range [][2]string{{"mode", "standalone"}, {"role", "master"}} {
		b = resp.AppendBulkString(resp.AppendBulkString(b, kv[0]), kv[1])
	}
	return resp.AppendArray(resp.AppendBulkString(b, "modules"), 0)
}

var hello2, hello3 = hello(false), hello(true)

// command runs one command.
func (cl *client) command(args [][]byte) {
	name := args[0]
	switch {
	case is(name, "GET"):
		if cl.arity(args, 2, 2, "get") {
			cl.keyed(cmd{k: kGet, key: args[1]})
		}
	case is(name, "SET"):
		if cl.arity(args, 3, -1, "set") {
			cl.set(args)
		}
	case is(name, "INCR"), is(name, "DECR"):
		if cl.arity(args, 2, 2, lower(name)) {
			n := int64(1)
			if is(name, "DECR") {
				n = -1
			}
			cl.keyed(cmd{k: kIncr, key: args[1], n: n})
		}
	case is(name, "INCRBY"), is(name, "DECRBY"):
		if cl.arity(args, 3, 3, lower(name)) {
			n, ok := parseInt(args[2])
			switch {
			case !ok:
				cl.sendErr(errNotInt)
			case is(name, "DECRBY") && n == math.MinInt64:
				cl.sendErr("ERR decrement would overflow")
			default:
				if is(name, "DECRBY") {
					n = -n
				}
				cl.keyed(cmd{k: kIncr, key: args[1], n: n})
			}
		}
	case is(name, "DEL"), is(name, "EXISTS"):
		if cl.arity(args, 2, -1, lower(name)) {
			k := kDel
			if is(name, "EXISTS") {
				k = kExists
			}
			cl.multi(k, joinSum, args[1:], 1)
		}
	case is(name, "MGET"):
		if cl.arity(args, 2, -1, "mget") {
			cl.multi(kMGet, joinArray, args[1:], 1)
		}
	case is(name, "MSET"):
		if len(args) < 3 || len(args)%2 == 0 {
			cl.sendErr("ERR wrong number of arguments for 'mset' command")
		} else {
			cl.multi(kMSet, joinOK, args[1:], 2)
		}
	case is(name, "EXPIRE"), is(name, "PEXPIRE"):
		if cl.arity(args, 3, -1, lower(name)) {
			cl.expire(args, is(name, "PEXPIRE"))
		}
	case is(name, "TTL"), is(name, "PTTL"):
		if cl.arity(args, 2, 2, lower(name)) {
			c := cmd{k: kTTL, key: args[1]}
			if is(name, "PTTL") {
				c.flags = ttlMS
			}
			cl.keyed(c)
		}
	case is(name, "PING"):
		if cl.arity(args, 1, 2, "ping") {
			if len(args) == 1 {
				cl.q.Send(replyPong)
			} else {
				cl.sendTmp(resp.AppendBulk(cl.tmp[:0], args[1]))
			}
		}
	case is(name, "ECHO"):
		if cl.arity(args, 2, 2, "echo") {
			cl.sendTmp(resp.AppendBulk(cl.tmp[:0], args[1]))
		}
	case is(name, "DBSIZE"):
		if cl.arity(args, 1, 1, "dbsize") {
			cl.everyLoop(kStats, joinSum, false)
		}
	case is(name, "FLUSHALL"), is(name, "FLUSHDB"):
		if len(args) > 2 || len(args) == 2 && !is(args[1], "SYNC") && !is(args[1], "ASYNC") {
			cl.sendErr(replySyntax)
		} else {
			cl.everyLoop(kFlush, joinOK, false)
		}
	case is(name, "INFO"):
		cl.everyLoop(kStats, joinSum, true)
	case is(name, "COMMAND"):
		cl.commandCmd(args)
	case is(name, "HELLO"):
		cl.hello(args)
	case is(name, "CLIENT"):
		cl.clientCmd(args)
	case is(name, "SELECT"):
		if cl.arity(args, 2, 2, "select") {
			if string(args[1]) == "0" {
				cl.q.Send(replyOK)
			} else {
				cl.sendErr("ERR DB index is out of range")
			}
		}
	case is(name, "CONFIG"):
		cl.config(args)
	case is(name, "QUIT"):
		cl.q.Send(replyOK)
		cl.q.CloseWhenDone()
	default:
		cl.sendErr(unknown(args))
	}
}

// set parses SET's options as Redis 7 does.
func (cl *client) set(args [][]byte) {
	c := cmd{k: kSet, key: args[1], val: args[2], resp3: cl.resp3}
	now := cl.c.Loop().Now().UnixMilli()
	expiry := false
	for i := 3; i < len(args); i++ {
		a := args[i]
		switch {
		case is(a, "NX") && c.flags&optXX == 0:
			c.flags |= optNX
		case is(a, "XX") && c.flags&optNX == 0:
			c.flags |= optXX
		case is(a, "GET"):
			c.flags |= optGet
		case is(a, "KEEPTTL") && !expiry:
			c.flags |= optKeepTTL
		case (is(a, "EX") || is(a, "PX") || is(a, "EXAT") || is(a, "PXAT")) && !expiry && c.flags&optKeepTTL == 0 && i+1 < len(args):
			expiry = true
			i++
			n, ok := parseInt(args[i])
			if !ok {
				cl.sendErr(errNotInt)
				return
			}
			unit := int64(1)
			if is(a, "EX") || is(a, "EXAT") {
				unit = 1000
			}
			if n <= 0 || n > math.MaxInt64/unit {
				cl.sendErr("ERR invalid expire time in 'set' command")
				return
			}
			n *= unit
			if is(a, "EX") || is(a, "PX") {
				if n > math.MaxInt64-now {
					cl.sendErr("ERR invalid expire time in 'set' command")
					return
				}
				n += now
			}
			c.n = n
		default:
			cl.sendErr(replySyntax)
			return
		}
	}
	cl.keyed(c)
}

// expire parses EXPIRE's and PEXPIRE's options.
func (cl *client) expire(args [][]byte, ms bool) {
	n, ok := parseInt(args[2])
	if !ok {
		cl.sendErr(errNotInt)
		return
	}
	name := "expire"
	unit := int64(1000)
	if ms {
		name, unit = "pexpire", 1
	}
	now := cl.c.Loop().Now().UnixMilli()
	if n > math.MaxInt64/unit || n < math.MinInt64/unit || n*unit > math.MaxInt64-now {
		cl.sendErr("ERR invalid expire time in '" + name + "' command")
		return
	}
	c := cmd{k: kExpire, key: args[1], n: n*unit + now}
	for _, a := range args[3:] {
		switch {
		case is(a, "NX"):
			c.flags |= optNX
		case is(a, "XX"):
			c.flags |= optXX
		case is(a, "GT"):
			c.flags |= optGT
		case is(a, "LT"):
			c.flags |= optLT
		default:
			cl.sendErr("ERR Unsupported option " + string(a))
			return
		}
	}
	f := c.flags
	switch {
	case f&optNX != 0 && f&(optXX|optGT|optLT) != 0:
		cl.sendErr("ERR NX and XX, GT or LT options at the same time are not compatible")
		return
	case f&optGT != 0 && f&optLT != 0:
		cl.sendErr("ERR GT and LT options at the same time are not compatible")
		return
	}
	cl.keyed(c)
}

// hello answers HELLO [protover [AUTH user pass] [SETNAME name]]: RESP2
// or RESP3, from then on.
func (cl *client) hello(args [][]byte) {
	if len(args) >= 2 {
		switch string(args[1]) {
		case "2":
			cl.resp3 = false
		case "3":
			cl.resp3 = true
		default:
			if _, ok := parseInt(args[1]); !ok {
				cl.sendErr("ERR Protocol version is not an integer or out of range")
			} else {
				cl.q.Send(replyNoProto)
			}
			return
		}
	}
	if cl.resp3 {
		cl.q.Send(hello3)
	} else {
		cl.q.Send(hello2)
	}
}

// clientCmd accepts CLIENT SETNAME and the like: the server keeps no
// client names, but clients that set one must start.
func (cl *client) clientCmd(args [][]byte) {
	switch {
	case len(args) >= 2 && is(args[1], "GETNAME"):
		cl.q.Send(null(cl.resp3))
	case len(args) >= 2 && is(args[1], "ID"):
		cl.sendTmp(resp.AppendInt(cl.tmp[:0], int64(cl.c.Fd())))
	default:
		cl.q.Send(replyOK)
	}
}

// commandCmd answers COMMAND, COMMAND COUNT and COMMAND DOCS with what
// redis-cli and redis-benchmark need to start: no command table.
func (cl *client) commandCmd(args [][]byte) {
	if len(args) >= 2 && is(args[1], "COUNT") {
		cl.sendTmp(resp.AppendInt(cl.tmp[:0], int64(len(commandNames))))
		return
	}
	cl.q.Send(replyEmpty)
}

// commandNames are the commands the server knows, for COMMAND COUNT.
var commandNames = []string{"get", "set", "incr", "incrby", "decr", "decrby", "del", "exists", "mget", "mset",
	"expire", "pexpire", "ttl", "pttl", "ping", "echo", "dbsize", "flushall", "flushdb", "info", "command",
	"hello", "client", "select", "config", "quit"}

// config answers CONFIG GET of what redis-benchmark asks (save,
// appendonly) as a server without persistence would, and maxmemory.
func (cl *client) config(args [][]byte) {
	if len(args) != 3 || !is(args[1], "GET") {
		cl.q.Send(replyEmpty)
		return
	}
	value := ""
	switch string(args[2]) {
	case "save":
	case "appendonly":
		value = "no"
	case "maxmemory":
		value = strconv.FormatInt(cl.s.maxMemory, 10)
	default:
		cl.q.Send(replyEmpty)
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
	cl.sendErr("ERR wrong number of arguments for '" + name + "' command")
	return false
}

func (cl *client) sendErr(msg string) { cl.sendTmp(resp.AppendError(cl.tmp[:0], msg)) }

// sendTmp is Send for a reply built in cl.tmp, which it keeps for the
// next one.
func (cl *client) sendTmp(p []byte) {
	cl.tmp = p
	cl.q.Send(p)
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

func lower(b []byte) string {
	out := []byte(string(b))
	for i, c := range out {
		if c >= 'A' && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return string(out)
}

// parseInt parses a Redis integer argument: decimal, no leading '+' or
// zero, within int64.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 || len(b) > 1 && b[0] == '0' || b[0] == '+' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil && !(len(b) > 1 && b[0] == '-' && b[1] == '0')
}

// keyed runs a one-key command: here at once when the key is this loop's,
// else on its owner's loop.
func (cl *client) keyed(c cmd) {
	c.resp3 = cl.resp3
	l := cl.c.Loop()
	owner := l.Owner(c.key)
	now := l.Now().UnixMilli()
	if owner == l {
		if cl.q.Idle() {
			cl.direct(&c, now)
			return
		}
		r := cl.q.Push(1)
		r.Data.mode = joinOne
		r.Buf, _ = cl.sh.exec(&c, now, r.Buf)
		cl.q.Done(r)
		return
	}
	r := cl.q.Push(1)
	r.Data.mode = joinOne
	cl.call(owner, r, &c, 0)
}

// direct writes the reply of a command on a key of this loop straight
// into the connection's outbound queue: nothing waits before it. A GET's
// value is copied once, from the entry into the queue.
func (cl *client) direct(c *cmd, now int64) {
	if c.k != kGet {
		cl.tmp, _ = cl.sh.exec(c, now, cl.tmp[:0])
		cl.c.Write(cl.tmp)
		return
	}
	cl.sh.commands++
	e := cl.sh.live(c.key, now)
	if e == nil {
		cl.c.Write(null(c.resp3))
		return
	}
	if b := cl.c.Reserve(resp.BulkLen(len(e.v))); b != nil {
		cl.c.Commit(len(resp.AppendBulk(b[:0], e.v)))
	}
}

// multi runs a multi-key command (DEL, EXISTS, MGET, MSET), each key (or
// key and value, step 2) on its owner, and joins the parts.
func (cl *client) multi(k kind, mode joinMode, keys [][]byte, step int) {
	l := cl.c.Loop()
	now := l.Now().UnixMilli()
	r := cl.q.Push(1) // held until every part is sent
	r.Data.mode, r.Data.sum, r.Data.fail, r.Data.resp3 = mode, 0, r.Data.fail[:0], cl.resp3
	if mode == joinArray {
		r.Data.parts = grow(r.Data.parts, len(keys))
	}
	for i := 0; i < len(keys); i += step {
		c := cmd{k: k, key: keys[i], resp3: cl.resp3}
		if step == 2 {
			c.val = keys[i+1]
		}
		owner := l.Owner(c.key)
		if owner == l {
			var part []byte
			var n int64
			if mode == joinArray {
				part = r.Data.parts[i][:0]
			}
			part, n = cl.sh.exec(&c, now, part)
			cl.addPart(r, i, part, n)
			continue
		}
		cl.q.Add(r, 1)
		cl.call(owner, r, &c, i)
	}
	cl.partDone(r)
}

// everyLoop runs k on every loop (DBSIZE, FLUSHALL, INFO) and joins.
func (cl *client) everyLoop(k kind, mode joinMode, info bool) {
	r := cl.q.Push(1)
	r.Data.mode, r.Data.sum, r.Data.fail, r.Data.info, r.Data.resp3 = mode, 0, r.Data.fail[:0], info, cl.resp3
	r.Data.stats = counts{}
	l := cl.c.Loop()
	for _, owner := range cl.s.allLoops() {
		c := cmd{k: k}
		if owner == l {
			if k == kStats {
				r.Data.stats.add(cl.sh.counts())
			}
			part, n := cl.sh.exec(&c, l.Now().UnixMilli(), nil)
			cl.addPart(r, 0, part, n)
			continue
		}
		cl.q.Add(r, 1)
		cl.call(owner, r, &c, 0)
	}
	cl.partDone(r)
}

func grow(parts [][]byte, n int) [][]byte {
	for len(parts) < n {
		parts = append(parts, nil)
	}
	return parts[:n]
}

// addPart takes in one part of a joined reply: part i's bytes and count.
func (cl *client) addPart(r *ordered.Reply[join], i int, part []byte, n int64) {
	d := &r.Data
	if len(part) > 0 && part[0] == '-' && len(d.fail) == 0 {
		d.fail = append(d.fail, part...)
	}
	switch d.mode {
	case joinOne:
		r.Buf = append(r.Buf[:0], part...)
	case joinSum:
		d.sum += n
	case joinArray:
		d.parts[i] = part
	}
}

// partDone counts off a part of r, building the reply from its parts
// first when it is the last.
func (cl *client) partDone(r *ordered.Reply[join]) {
	if d := &r.Data; d.mode != joinOne && cl.q.Left(r) == 1 {
		switch {
		case len(d.fail) > 0:
			r.Buf = append(r.Buf[:0], d.fail...)
		case d.mode == joinSum && d.info:
			r.Buf = cl.s.info(r.Buf[:0], d.stats)
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
}

// info is INFO's reply: a few fields of Redis's sections.
func (s *server) info(dst []byte, st counts) []byte {
	policy := "noeviction"
	if s.evict {
		policy = "allkeys-random"
	}
	body := "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nprocess_id:" + strconv.Itoa(osPid) +
		"\r\nuptime_in_seconds:" + strconv.FormatInt(int64(time.Since(s.started)/time.Second), 10) +
		"\r\nio_threads_active:0\r\npercore_loops:" + strconv.Itoa(s.nLoop) +
		"\r\n\r\n# Memory\r\nused_memory:" + strconv.FormatInt(st.used, 10) +
		"\r\nmaxmemory:" + strconv.FormatInt(s.maxMemory, 10) +
		"\r\nmaxmemory_policy:" + policy +
		"\r\n\r\n# Stats\r\npercore_key_commands:" + strconv.FormatInt(st.commands, 10) +
		"\r\npercore_cross_loop_commands:" + strconv.FormatInt(st.remote, 10) +
		"\r\nexpired_keys:" + strconv.FormatInt(st.expired, 10) +
		"\r\nevicted_keys:" + strconv.FormatInt(st.evicted, 10) +
		"\r\n\r\n# Keyspace\r\n"
	if st.keys > 0 {
		body += "db0:keys=" + strconv.FormatInt(st.keys, 10) + ",expires=" + strconv.FormatInt(st.expires, 10) + ",avg_ttl=0\r\n"
	}
	return resp.AppendBulkString(dst, body)
}

// op is one cross-loop call: a command on a key of another loop. It is
// made on the client's loop, runs on the owner's, and comes back, reused.
type op struct {
	cl     *client
	r      *ordered.Reply[join]
	to     *percore.Loop
	c      cmd
	i      int    // the part's index
	out    []byte // the reply or part, built on the owner
	n      int64
	stats  counts // kStats
	runFn  func()
	doneFn func(error)
}

// call sends c to its owner; its reply (part i) fills r.
func (cl *client) call(owner *percore.Loop, r *ordered.Reply[join], c *cmd, i int) {
	var o *op
	if n := len(cl.sh.ops); n > 0 {
		o = cl.sh.ops[n-1]
		cl.sh.ops = cl.sh.ops[:n-1]
	} else {
		o = new(op)
		o.runFn, o.doneFn = o.run, o.done
	}
	key, val := o.c.key, o.c.val
	o.cl, o.r, o.to, o.c, o.i = cl, r, owner, *c, i
	o.c.key = append(key[:0], c.key...) // the command's bytes are the read's
	o.c.val = append(val[:0], c.val...)
	cl.c.Loop().Call(owner, o.runFn, o.doneFn)
}

// run runs on the owner's loop.
func (o *op) run() {
	sh := o.cl.s.shards.Get(o.to)
	sh.remote++
	if o.c.k == kStats {
		o.stats = sh.counts()
	}
	o.out, o.n = sh.exec(&o.c, o.to.Now().UnixMilli(), o.out[:0])
}

// done runs back on the client's loop.
func (o *op) done(err error) {
	cl, r := o.cl, o.r
	if err != nil {
		o.out = resp.AppendError(o.out[:0], "ERR "+err.Error())
	} else if o.c.k == kStats {
		r.Data.stats.add(o.stats)
	}
	if r.Data.mode == joinArray {
		// The part's bytes move into the reply; the op takes the
		// part's old buffer.
		r.Data.parts[o.i], o.out = o.out, r.Data.parts[o.i][:0]
		cl.addPart(r, o.i, r.Data.parts[o.i], o.n)
	} else if r.Data.mode == joinOne && err == nil {
		r.Buf, o.out = o.out, r.Buf[:0] // the owner built it: take it
	} else {
		cl.addPart(r, o.i, o.out, o.n)
	}
	o.cl, o.r, o.to = nil, nil, nil
	cl.sh.ops = append(cl.sh.ops, o)
	cl.partDone(r)
}
