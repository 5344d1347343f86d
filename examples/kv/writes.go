//go:build linux

package main

import (
	"math"
	"strconv"

	"github.com/percore/percore/runtime/frame/resp"
)

// set is SET with its options, parsed by the client (c.flags, c.n the
// absolute expiry in unix ms, 0 for none).
func (sh *shard) set(c *cmd, now int64, dst []byte) []byte {
	e := sh.live(c.key, now)
	if c.flags&optNX != 0 && e != nil || c.flags&optXX != 0 && e == nil {
		if c.flags&optGet != 0 && e != nil {
			return resp.AppendBulk(dst, e.v)
		}
		return append(dst, null(c.resp3)...)
	}
	if c.flags&optGet != 0 {
		if e != nil {
			dst = resp.AppendBulk(dst, e.v)
		} else {
			dst = append(dst, null(c.resp3)...)
		}
	} else {
		dst = append(dst, replyOK...)
	}
	exp := c.n
	if c.flags&optKeepTTL != 0 && e != nil {
		exp = e.exp
	}
	sh.store(c.key, c.val, e, exp)
	return dst
}

// incr is INCRBY (INCR, DECR and DECRBY too) by c.n.
func (sh *shard) incr(c *cmd, now int64, dst []byte) []byte {
	e := sh.live(c.key, now)
	var v int64
	if e != nil {
		var ok bool
		if v, ok = resp.ParseInt(e.v); !ok {
			return resp.AppendError(dst, errNotInt)
		}
	}
	if c.n > 0 && v > math.MaxInt64-c.n || c.n < 0 && v < math.MinInt64-c.n {
		return resp.AppendError(dst, "ERR increment or decrement would overflow")
	}
	v += c.n
	var buf [20]byte
	val := strconv.AppendInt(buf[:0], v, 10)
	exp := int64(0)
	if e != nil {
		exp = e.exp
	}
	sh.store(c.key, val, e, exp)
	return resp.AppendInt(dst, v)
}

// expire is EXPIRE and PEXPIRE at c.n (unix ms) with NX, XX, GT, LT.
func (sh *shard) expire(c *cmd, now int64, dst []byte) []byte {
	e := sh.live(c.key, now)
	if e == nil {
		return resp.AppendInt(dst, 0)
	}
	f := c.flags
	switch {
	case f&optNX != 0 && e.exp != 0,
		f&optXX != 0 && e.exp == 0,
		f&optGT != 0 && (e.exp == 0 || c.n <= e.exp),
		f&optLT != 0 && e.exp != 0 && c.n >= e.exp:
		return resp.AppendInt(dst, 0)
	}
	if c.n <= now {
		sh.remove(string(c.key), e)
		return resp.AppendInt(dst, 1)
	}
	if e.exp == 0 {
		sh.volatile[string(c.key)] = struct{}{}
	}
	e.exp = c.n
	return resp.AppendInt(dst, 1)
}
