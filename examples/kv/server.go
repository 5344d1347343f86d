//go:build linux

package main

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/ordered"
	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/frame/resp/commands"
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

	nCommands int // how many commands it runs, for COMMAND COUNT

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
	fail  []byte // the first part's error, if any
	info  bool   // kStats for INFO, not DBSIZE
	stats counts // kStats: summed over the loops
	resp3 bool
}

type joinMode uint8

const (
	joinOne joinMode = iota // the one part is the reply
	joinSum                 // DBSIZE, INFO: summed over the loops
	joinOK                  // FLUSHALL: +OK unless a part failed
)

// client is one connection.
type client struct {
	s     *server
	c     *percore.Conn
	sh    *shard // the client's loop's
	q     *ordered.Queue[join]
	p     resp.Parser // the progress through a partial command
	args  [][]byte
	pos   []int    // a command's key positions
	multi [][]byte // a command's keys
	tmp   []byte
	resp3 bool
}

func (s *server) OnOpen(c *percore.Conn) {
	frame.SetValue(c, &client{s: s, c: c, sh: s.shards.Get(c.Loop()), q: ordered.New[join](c)})
}

// OnView runs every whole command of in and returns the bytes they took.
// The parser keeps its progress through a partial command, so that a
// command that arrives in many reads is read once (issue 23).
func (s *server) OnView(c *percore.Conn, in []byte) (int, error) {
	cl := frame.Value(c).(*client)
	scanned := cl.p.Scanned()
	defer func() { cl.sh.parsed += cl.p.Scanned() - scanned }()
	done := 0
	for done < len(in) && !cl.q.Closing() {
		args, n, err := cl.p.Parse(cl.args[:0], in[done:], s.lim)
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
	if cap(cl.args) > maxKeptArgs {
		cl.args = nil // a command of many arguments: do not keep its room for the connection's life
	}
	if cl.q.Closing() {
		cl.p.Reset()
		return len(in), nil
	}
	return done, nil
}

// maxKeptArgs bounds the room for arguments a connection keeps between
// reads.
const maxKeptArgs = 1024

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

// handler runs a command the table found (c: the command or its
// subcommand), its arity checked.
type handler func(cl *client, c *commands.Command, args [][]byte)

// known is a command this server runs: its entry in Redis's command
// table and its handler.
type known struct {
	cmd *commands.Command
	run handler
}

// supported are the commands this server runs, by lower-case name. Their
// arity, flags and key positions come from Redis's command table
// (runtime/frame/resp/commands, generated from redis-server's COMMAND
// INFO); only what each does is written here.
var supported = func() map[string]known {
	m := map[string]known{}
	for name, h := range map[string]handler{
		"get": (*client).get, "set": (*client).set, "incr": (*client).incr, "decr": (*client).incr,
		"incrby": (*client).incrBy, "decrby": (*client).incrBy, "del": (*client).keys, "exists": (*client).keys,
		"mget": (*client).keys, "mset": (*client).mset, "expire": (*client).expire, "pexpire": (*client).expire,
		"ttl": (*client).ttl, "pttl": (*client).ttl, "ping": (*client).ping, "echo": (*client).echo,
		"dbsize": (*client).dbsize, "flushall": (*client).flushall, "flushdb": (*client).flushall,
		"info": (*client).info, "command": (*client).commandCmd, "hello": (*client).hello,
		"client": (*client).clientCmd, "select": (*client).selectCmd, "config": (*client).config,
		"quit": (*client).quit,
	} {
		c := commands.LookupString(name)
		if c == nil {
			panic("kv: " + name + " is not in Redis's command table")
		}
		m[name] = known{c, h}
	}
	return m
}()

// maxName bounds the command names looked up (Redis's longest is 20
// bytes).
const maxName = 32

// lookup finds a command this server runs by its name, in any case,
// without allocating.
func lookup(name []byte) (known, bool) {
	if len(name) > maxName {
		return known{}, false
	}
	var buf [maxName]byte
	for i, b := range name {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		buf[i] = b
	}
	k, ok := supported[string(buf[:len(name)])]
	return k, ok
}

// command runs one command, checked against Redis's command table as
// redis-server checks it before running one: unknown command, unknown
// subcommand of a container, arity.
func (cl *client) command(args [][]byte) {
	k, ok := lookup(args[0])
	if !ok {
		cl.sendErr(unknown(args))
		return
	}
	c := k.cmd
	if c.Container() && len(args) > 1 {
		if c = c.Sub(args[1]); c == nil {
			cl.sendErr("ERR unknown subcommand '" + trunc(args[1], 128) + "'. Try " + strings.ToUpper(string(args[0])) + " HELP.")
			return
		}
	}
	if !c.ArityOK(len(args)) {
		cl.sendErr("ERR wrong number of arguments for '" + c.Name + "' command")
		return
	}
	k.run(cl, c, args)
}

func (cl *client) get(c *commands.Command, args [][]byte) {
	cl.run(c, args, cmd{k: kGet, key: args[1]})
}

func (cl *client) incr(c *commands.Command, args [][]byte) {
	n := int64(1)
	if c.Name == "decr" {
		n = -1
	}
	cl.run(c, args, cmd{k: kIncr, key: args[1], n: n})
}

func (cl *client) incrBy(c *commands.Command, args [][]byte) {
	x := cmd{k: kIncr, key: args[1]}
	n, ok := parseInt(args[2])
	switch {
	case !ok:
		x.err = errNotInt
	case c.Name == "decrby" && n == math.MinInt64:
		x.err = "ERR decrement would overflow"
	case c.Name == "decrby":
		x.n = -n
	default:
		x.n = n
	}
	cl.run(c, args, x)
}

// keys runs DEL, EXISTS and MGET: their keys, as the table places them.
func (cl *client) keys(c *commands.Command, args [][]byte) {
	x := cmd{k: kDel}
	switch c.Name {
	case "exists":
		x.k = kExists
	case "mget":
		x.k = kMGet
	}
	cl.run(c, args, x)
}

func (cl *client) mset(c *commands.Command, args [][]byte) {
	x := cmd{k: kMSet, multi: args[1:]}
	if len(args)%2 == 0 {
		x.err = "ERR wrong number of arguments for 'mset' command"
	}
	cl.run(c, args, x)
}

func (cl *client) ttl(c *commands.Command, args [][]byte) {
	x := cmd{k: kTTL, key: args[1]}
	if c.Name == "pttl" {
		x.flags = ttlMS
	}
	cl.run(c, args, x)
}

func (cl *client) ping(_ *commands.Command, args [][]byte) {
	switch len(args) {
	case 1:
		cl.q.Send(replyPong)
	case 2:
		cl.sendTmp(resp.AppendBulk(cl.tmp[:0], args[1]))
	default:
		cl.sendErr("ERR wrong number of arguments for 'ping' command")
	}
}

func (cl *client) echo(_ *commands.Command, args [][]byte) {
	cl.sendTmp(resp.AppendBulk(cl.tmp[:0], args[1]))
}

func (cl *client) dbsize(*commands.Command, [][]byte) { cl.everyLoop(kStats, joinSum, false) }

func (cl *client) flushall(_ *commands.Command, args [][]byte) {
	if len(args) > 2 || len(args) == 2 && !is(args[1], "SYNC") && !is(args[1], "ASYNC") {
		cl.sendErr(replySyntax)
		return
	}
	cl.everyLoop(kFlush, joinOK, false)
}

func (cl *client) info(*commands.Command, [][]byte) { cl.everyLoop(kStats, joinSum, true) }

func (cl *client) selectCmd(_ *commands.Command, args [][]byte) {
	if string(args[1]) == "0" {
		cl.q.Send(replyOK)
	} else {
		cl.sendErr("ERR DB index is out of range")
	}
}

func (cl *client) quit(*commands.Command, [][]byte) {
	cl.q.Send(replyOK)
	cl.q.CloseWhenDone()
}

// set parses SET's options as Redis 7 does; an error in them is answered
// where the command runs, after the memory check.
func (cl *client) set(c *commands.Command, args [][]byte) {
	x := cmd{k: kSet, key: args[1], val: args[2]}
	x.flags, x.n, x.err = setOptions(args, cl.c.Loop().Now().UnixMilli())
	cl.run(c, args, x)
}

// setOptions reads SET's options: the flags, the absolute expiry in unix
// ms (0: none), or Redis's error.
func setOptions(args [][]byte, now int64) (flags uint8, at int64, err string) {
	expiry := false
	for i := 3; i < len(args); i++ {
		a := args[i]
		switch {
		case is(a, "NX") && flags&optXX == 0:
			flags |= optNX
		case is(a, "XX") && flags&optNX == 0:
			flags |= optXX
		case is(a, "GET"):
			flags |= optGet
		case is(a, "KEEPTTL") && !expiry:
			flags |= optKeepTTL
		case (is(a, "EX") || is(a, "PX") || is(a, "EXAT") || is(a, "PXAT")) && !expiry && flags&optKeepTTL == 0 && i+1 < len(args):
			expiry = true
			i++
			n, ok := parseInt(args[i])
			if !ok {
				return 0, 0, errNotInt
			}
			unit := int64(1)
			if is(a, "EX") || is(a, "EXAT") {
				unit = 1000
			}
			if n <= 0 || n > math.MaxInt64/unit {
				return 0, 0, "ERR invalid expire time in 'set' command"
			}
			n *= unit
			if is(a, "EX") || is(a, "PX") {
				if n > math.MaxInt64-now {
					return 0, 0, "ERR invalid expire time in 'set' command"
				}
				n += now
			}
			at = n
		default:
			return 0, 0, replySyntax
		}
	}
	return flags, at, ""
}

// expire parses EXPIRE's and PEXPIRE's options, then the time, in
// Redis's order: an unknown or conflicting option is reported before a
// time that is not an integer.
func (cl *client) expire(c *commands.Command, args [][]byte) {
	x := cmd{k: kExpire, key: args[1]}
	for _, a := range args[3:] {
		switch {
		case is(a, "NX"):
			x.flags |= optNX
		case is(a, "XX"):
			x.flags |= optXX
		case is(a, "GT"):
			x.flags |= optGT
		case is(a, "LT"):
			x.flags |= optLT
		default:
			cl.sendErr("ERR Unsupported option " + string(a))
			return
		}
	}
	switch f := x.flags; {
	case f&optNX != 0 && f&(optXX|optGT|optLT) != 0:
		cl.sendErr("ERR NX and XX, GT or LT options at the same time are not compatible")
		return
	case f&optGT != 0 && f&optLT != 0:
		cl.sendErr("ERR GT and LT options at the same time are not compatible")
		return
	}
	n, ok := parseInt(args[2])
	if !ok {
		cl.sendErr(errNotInt)
		return
	}
	unit := int64(1000)
	if c.Name == "pexpire" {
		unit = 1
	}
	now := cl.c.Loop().Now().UnixMilli()
	if n > math.MaxInt64/unit || n < math.MinInt64/unit || n*unit > math.MaxInt64-now {
		cl.sendErr("ERR invalid expire time in '" + c.Name + "' command")
		return
	}
	x.n = n*unit + now
	cl.run(c, args, x)
}

// hello answers HELLO [protover [AUTH user pass] [SETNAME name]]: RESP2
// or RESP3, from then on. The server has no users and keeps no names:
// AUTH and SETNAME are read, as Redis reads them, and accepted.
func (cl *client) hello(_ *commands.Command, args [][]byte) {
	resp3 := cl.resp3
	if len(args) >= 2 {
		v, ok := parseInt(args[1])
		switch {
		case !ok:
			cl.sendErr("ERR Protocol version is not an integer or out of range")
			return
		case v != 2 && v != 3:
			cl.q.Send(replyNoProto)
			return
		}
		resp3 = v == 3
	}
	for j := 2; j < len(args); j++ {
		more := len(args) - 1 - j
		switch {
		case is(args[j], "AUTH") && more >= 2:
			j += 2
		case is(args[j], "SETNAME") && more >= 1:
			j++
		default:
			cl.sendErr("ERR Syntax error in HELLO option '" + string(args[j]) + "'")
			return
		}
	}
	cl.resp3 = resp3
	if cl.resp3 {
		cl.q.Send(hello3)
	} else {
		cl.q.Send(hello2)
	}
}

// clientCmd accepts CLIENT SETNAME and the like: the server keeps no
// client names, but clients that set one must start.
func (cl *client) clientCmd(c *commands.Command, _ [][]byte) {
	switch c.Name {
	case "client|getname":
		cl.q.Send(null(cl.resp3))
	case "client|id":
		cl.sendTmp(resp.AppendInt(cl.tmp[:0], int64(cl.c.Fd())))
	default:
		cl.q.Send(replyOK)
	}
}

// commandCmd answers COMMAND COUNT with the number of commands the server
// runs, and COMMAND, COMMAND DOCS and the rest with what redis-cli and
// redis-benchmark need to start: an empty array.
func (cl *client) commandCmd(c *commands.Command, _ [][]byte) {
	if c.Name == "command|count" {
		cl.sendTmp(resp.AppendInt(cl.tmp[:0], int64(cl.s.nCommands)))
		return
	}
	cl.q.Send(replyEmpty)
}

// config answers CONFIG GET of what redis-benchmark asks (save,
// appendonly) as a server without persistence would, and maxmemory; the
// other subcommands are not this server's.
func (cl *client) config(c *commands.Command, args [][]byte) {
	if c.Name != "config|get" {
		cl.sendErr("ERR unknown subcommand '" + trunc(args[1], 128) + "'. Try CONFIG HELP.")
		return
	}
	if len(args) != 3 {
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

// parseInt parses a Redis integer as Redis's string2ll does: decimal, an
// optional '-', no '+', no leading zero ("-0" and "-05" are not
// integers), within int64.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	d := b
	if d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || d[0] < '1' || d[0] > '9' {
		return 0, false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// run runs x, a command on the keys Redis's command table places in args,
// on the loop that owns their hash slot: here at once when that is this
// loop, else there, its reply coming back in order. Keys of more than one
// slot are refused with Redis Cluster's CROSSSLOT error.
func (cl *client) run(c *commands.Command, args [][]byte, x cmd) {
	pos, ok := c.Keys(cl.pos[:0], args)
	cl.pos = pos
	if !ok || len(pos) == 0 {
		cl.sendErr("ERR no key in '" + c.Name + "'") // not for the commands this server runs
		return
	}
	slot := slotOf(args[pos[0]])
	for _, p := range pos[1:] {
		if slotOf(args[p]) != slot {
			cl.q.Send(replyCrossSlot)
			return
		}
	}
	if x.k == kDel || x.k == kExists || x.k == kMGet {
		cl.multi = cl.multi[:0]
		for _, p := range pos {
			cl.multi = append(cl.multi, args[p])
		}
		x.multi = cl.multi
	}
	x.denyOOM = c.Flags.Has(commands.DenyOOM)
	if x.err != "" && !x.denyOOM {
		cl.sendErr(x.err) // no memory check comes first
		return
	}
	x.resp3 = cl.resp3
	l := cl.c.Loop()
	sk := [2]byte{byte(slot >> 8), byte(slot)}
	owner := l.Owner(sk[:])
	if owner == l {
		now := l.Now().UnixMilli()
		if cl.q.Idle() {
			cl.direct(&x, now)
			return
		}
		r := cl.q.Push(1)
		r.Data.mode = joinOne
		r.Buf, _ = cl.sh.exec(&x, now, r.Buf[:0])
		cl.q.Done(r)
		return
	}
	r := cl.q.Push(1)
	r.Data.mode = joinOne
	cl.call(owner, r, &x)
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
			cl.addPart(r, part, n)
			continue
		}
		cl.q.Add(r, 1)
		cl.call(owner, r, &c)
	}
	cl.partDone(r)
}

// addPart takes in one part of a joined reply: its bytes and count.
func (cl *client) addPart(r *ordered.Reply[join], part []byte, n int64) {
	d := &r.Data
	if len(part) > 0 && part[0] == '-' && len(d.fail) == 0 {
		d.fail = append(d.fail, part...)
	}
	switch d.mode {
	case joinOne:
		r.Buf = append(r.Buf[:0], part...)
	case joinSum:
		d.sum += n
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
		"\r\npercore_parsed_bytes:" + strconv.FormatInt(st.parsed, 10) +
		"\r\nexpired_keys:" + strconv.FormatInt(st.expired, 10) +
		"\r\nevicted_keys:" + strconv.FormatInt(st.evicted, 10) +
		"\r\n\r\n# Keyspace\r\n"
	if st.keys > 0 {
		body += "db0:keys=" + strconv.FormatInt(st.keys, 10) + ",expires=" + strconv.FormatInt(st.expires, 10) + ",avg_ttl=0\r\n"
	}
	return resp.AppendBulkString(dst, body)
}

// op is one cross-loop call: a command on keys of another loop. It is
// made on the client's loop, runs on the owner's, and comes back, reused.
type op struct {
	cl     *client
	r      *ordered.Reply[join]
	to     *percore.Loop
	c      cmd
	out    []byte // the reply or part, built on the owner
	n      int64
	stats  counts // kStats
	buf    []byte // the copies of the command's bytes
	multi  [][]byte
	runFn  func()
	doneFn func(error)
}

// call sends c to its owner; its reply fills r.
func (cl *client) call(owner *percore.Loop, r *ordered.Reply[join], c *cmd) {
	var o *op
	if n := len(cl.sh.ops); n > 0 {
		o = cl.sh.ops[n-1]
		cl.sh.ops = cl.sh.ops[:n-1]
	} else {
		o = new(op)
		o.runFn, o.doneFn = o.run, o.done
	}
	o.cl, o.r, o.to, o.c = cl, r, owner, *c
	// The command's bytes are the read's: copy them, once, into the
	// op's buffer, and point the copy's slices into it.
	o.buf = append(append(o.buf[:0], c.key...), c.val...)
	for _, a := range c.multi {
		o.buf = append(o.buf, a...)
	}
	at := 0
	take := func(b []byte) []byte {
		p := o.buf[at : at+len(b) : at+len(b)]
		at += len(b)
		return p
	}
	o.c.key, o.c.val = take(c.key), take(c.val)
	o.multi = o.multi[:0]
	for _, a := range c.multi {
		o.multi = append(o.multi, take(a))
	}
	o.c.multi = o.multi
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
	if r.Data.mode == joinOne && err == nil {
		r.Buf, o.out = o.out, r.Buf[:0] // the owner built it: take it
	} else {
		cl.addPart(r, o.out, o.n)
	}
	o.cl, o.r, o.to = nil, nil, nil
	cl.sh.ops = append(cl.sh.ops, o)
	cl.partDone(r)
}
