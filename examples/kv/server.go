//go:build linux

package main

import (
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
	nLoop     int // how many loops the runtime has
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

// setup is Config.LoopSetup: each loop's shard, made on its thread, with
// the pool of its clients' cross-loop calls, and its expiry sweep.
func (s *server) setup(l *percore.Loop) error {
	limit := int64(0)
	if s.maxMemory > 0 {
		limit = max(s.maxMemory/int64(s.nLoop), 1)
	}
	sh := s.shards.Set(l, newShard(limit, s.evict))
	sh.ops = percore.NewOpPool(l, s.runOp, opDone)
	l.OnShedSpares(sh.ops.Shed) // what a burst of cross-loop calls made, at the return after a storm
	var tick func()
	tick = func() {
		sh.sweep(l.Now().UnixMilli())
		l.AfterFunc(s.sweep, tick)
	}
	l.AfterFunc(s.sweep, tick)
	return nil
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

// Reset readies a reused reply's join (ordered.Resetter), keeping the
// room of its failure text.
func (j *join) Reset() { *j = join{fail: j.fail[:0]} }

type joinMode uint8

const (
	joinOne joinMode = iota // the one part is the reply
	joinSum                 // DBSIZE, INFO: summed over the loops
	joinOK                  // FLUSHALL: +OK unless a part failed
)

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
	r.Data.mode, r.Data.info, r.Data.resp3 = mode, info, cl.resp3
	l := cl.c.Loop()
	for _, owner := range l.Runtime().Loops() {
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
	if d := &r.Data; d.mode != joinOne && cl.q.Last(r) {
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

// op is one cross-loop call: a command on keys of another loop. It is
// made on the client's loop, runs on the owner's, and comes back; the
// loop's percore.OpPool reuses it.
type op struct {
	cl    *client
	r     *ordered.Reply[join]
	c     cmd
	out   []byte // the reply or part, built on the owner
	n     int64
	stats counts // kStats
	buf   []byte // the copies of the command's bytes
	multi [][]byte
}

// Reset readies a reused op, keeping the room of its buffers.
func (o *op) Reset() { *o = op{out: o.out[:0], buf: o.buf[:0], multi: o.multi[:0]} }

// call sends c to its owner; its reply fills r.
func (cl *client) call(owner *percore.Loop, r *ordered.Reply[join], c *cmd) {
	p := cl.sh.ops.Get()
	o := &p.V
	o.cl, o.r, o.c = cl, r, *c
	// The command's bytes are the read's: copy them, once, into the
	// op's buffer, and point the copy's slices into it.
	o.buf = append(append(o.buf[:0], c.key...), c.val...)
	for _, a := range c.multi {
		o.buf = append(o.buf, a...)
	}
	at := 0
	take := func(b []byte) []byte {
		part := o.buf[at : at+len(b) : at+len(b)]
		at += len(b)
		return part
	}
	o.c.key, o.c.val = take(c.key), take(c.val)
	o.multi = o.multi[:0]
	for _, a := range c.multi {
		o.multi = append(o.multi, take(a))
	}
	o.c.multi = o.multi
	cl.sh.ops.Call(owner, p)
}

// runOp runs an op on the owner's loop.
func (s *server) runOp(on *percore.Loop, o *op) {
	sh := s.shards.Get(on)
	sh.remote++
	if o.c.k == kStats {
		o.stats = sh.counts()
	}
	o.out, o.n = sh.exec(&o.c, on.Now().UnixMilli(), o.out[:0])
}

// opDone runs back on the client's loop; the pool takes the op back once
// it returns.
func opDone(o *op, err error) {
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
	cl.partDone(r)
}
