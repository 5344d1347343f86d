//go:build linux

package main

import (
	"bytes"
	"slices"

	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/ordered"
	"github.com/percore/percore/runtime/frame/resp"
)

// join is how a client's waiting reply is made from its parts: one
// upstream reply forwarded as it is, or a multi-key command split by
// server and joined.
type join struct {
	mode  joinMode
	sum   int64
	parts [][]byte // MGET: each key's reply
	fail  []byte
}

// Reset readies a reused reply's join (ordered.Resetter), keeping the
// room of its parts and its failure text.
func (j *join) Reset() { *j = join{parts: j.parts[:0], fail: j.fail[:0]} }

type joinMode uint8

const (
	joinOne   joinMode = iota // the one part is the reply
	joinSum                   // response_policy:agg_sum (DEL, EXISTS): the parts' integers summed
	joinArray                 // no response policy (MGET): the parts' one-element arrays, as one
	joinOK                    // response_policy:all_succeeded (MSET): +OK unless a part failed
)

// split sends a multi-key command whose keys belong to several servers as
// one command of the same name per key, with the arguments up to the next
// key (MGET a b -> MGET a, MGET b; MSET a 1 b 2 -> MSET a 1, MSET b 2),
// each to its server, and joins the replies as the command's response
// policy says. The same command, not GET for MGET: each part answers as
// the whole would for its key (MGET's nil for a key that holds a list,
// where GET's would be WRONGTYPE).
func (cl *client) split(args [][]byte, keys []int, mode joinMode) {
	step := keys[1] - keys[0]
	r := cl.q.Push(1) // held until every part is sent
	r.Data.mode = mode
	if mode == joinArray {
		// Within the room kept, the parts' own buffers come back too.
		r.Data.parts = slices.Grow(r.Data.parts, len(keys))[:len(keys)]
	}
	for i, k := range keys {
		b := resp.AppendArray(cl.tmp[:0], 1+step)
		b = resp.AppendBulk(b, args[0])
		for _, a := range args[k : k+step] {
			b = resp.AppendBulk(b, a)
		}
		cl.tmp = b
		cl.q.Add(r, 1)
		cl.bs[cl.p.serverOf(args[k])].send(b, pending{cl: cl, r: r, part: i})
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
		// A one-key part's reply is an array of one element.
		elem, ok := bytes.CutPrefix(reply, []byte("*1\r\n"))
		if !ok && len(d.fail) == 0 {
			d.fail = append(d.fail, "-ERR unexpected reply from upstream\r\n"...)
		}
		d.parts[i] = append(d.parts[i][:0], elem...)
	}
	cl.partDone(r)
}

// partDone counts off a part of r, building a joined reply from its parts
// first when it is the last.
func (cl *client) partDone(r *ordered.Reply[join]) {
	if d := &r.Data; d.mode != joinOne && cl.q.Last(r) {
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
