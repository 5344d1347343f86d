//go:build linux

package main

import (
	"math"

	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/frame/resp/commands"
)

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
	n, ok := resp.ParseInt(args[2])
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
		case resp.EqualFold(a, "NX") && flags&optXX == 0:
			flags |= optNX
		case resp.EqualFold(a, "XX") && flags&optNX == 0:
			flags |= optXX
		case resp.EqualFold(a, "GET"):
			flags |= optGet
		case resp.EqualFold(a, "KEEPTTL") && !expiry:
			flags |= optKeepTTL
		case (resp.EqualFold(a, "EX") || resp.EqualFold(a, "PX") || resp.EqualFold(a, "EXAT") || resp.EqualFold(a, "PXAT")) && !expiry && flags&optKeepTTL == 0 && i+1 < len(args):
			expiry = true
			i++
			n, ok := resp.ParseInt(args[i])
			if !ok {
				return 0, 0, errNotInt
			}
			unit := int64(1)
			if resp.EqualFold(a, "EX") || resp.EqualFold(a, "EXAT") {
				unit = 1000
			}
			if n <= 0 || n > math.MaxInt64/unit {
				return 0, 0, "ERR invalid expire time in 'set' command"
			}
			n *= unit
			if resp.EqualFold(a, "EX") || resp.EqualFold(a, "PX") {
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
		case resp.EqualFold(a, "NX"):
			x.flags |= optNX
		case resp.EqualFold(a, "XX"):
			x.flags |= optXX
		case resp.EqualFold(a, "GT"):
			x.flags |= optGT
		case resp.EqualFold(a, "LT"):
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
	n, ok := resp.ParseInt(args[2])
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
