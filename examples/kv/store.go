//go:build linux

package main

import (
	"math"
	"strconv"

	"github.com/percore/percore/runtime/frame/resp"
)

// shard is one loop's keys. Only its loop's thread touches it: commands
// for its keys from other loops arrive as cross-loop calls.
type shard struct {
	keys map[string]*entry
	// volatile holds the keys with an expiry, for the sweep to sample.
	volatile map[string]struct{}
	// used is the memory the keys account for (entryOverhead each, plus
	// key and value); limit is this loop's share of -maxmemory (0: none).
	used, limit int64
	evict       bool // allkeys-random, else noeviction
	evicted     int64
	expired     int64
	commands    int64 // key commands run here (each part of a multi-key or every-loop command counts)
	remote      int64 // of which for clients of other loops
	ops         []*op // cross-loop call records, reused
}

type entry struct {
	v   []byte
	exp int64 // unix ms; 0: none
}

// entryOverhead is what one key costs beyond its bytes: the map slot, the
// entry and its slice header, rounded up.
const entryOverhead = 96

func newShard(limit int64, evict bool) shard {
	return shard{keys: make(map[string]*entry), volatile: make(map[string]struct{}), limit: limit, evict: evict}
}

// kind is a command on one key, or one loop's part of a multi-key or
// whole-keyspace command.
type kind uint8

const (
	kGet kind = iota
	kSet
	kIncr // by n
	kDel
	kExists
	kExpire // at n (unix ms), with flags
	kTTL    // flags&ttlMS: in ms
	kMGet   // one key of an MGET
	kMSet   // one pair of an MSET
	kStats  // this loop's counts (shard.counts), for DBSIZE and INFO
	kFlush  // this loop's part of FLUSHALL
)

// SET and EXPIRE options.
const (
	optNX = 1 << iota
	optXX
	optKeepTTL
	optGet
	optGT
	optLT
	ttlMS
)

// cmd is a parsed command for one shard. key and val are the client's
// bytes (or the call's copies); n is INCRBY's delta or an expiry.
type cmd struct {
	k        kind
	flags    uint8
	resp3    bool
	key, val []byte
	n        int64
}

// The replies a shard gives, by protocol version.
var (
	replyOK   = []byte("+OK\r\n")
	replyNull = []byte("$-1\r\n")
	null3     = []byte("_\r\n")
	replyOOM  = []byte("-OOM command not allowed when used memory > 'maxmemory'.\r\n")
	errNotInt = "ERR value is not an integer or out of range"
)

func null(resp3 bool) []byte {
	if resp3 {
		return null3
	}
	return replyNull
}

// live returns key's entry, deleting it first if it has expired.
func (sh *shard) live(key []byte, now int64) *entry {
	e := sh.keys[string(key)]
	if e != nil && e.exp != 0 && e.exp <= now {
		sh.remove(string(key), e)
		sh.expired++
		return nil
	}
	return e
}

func (sh *shard) remove(key string, e *entry) {
	sh.used -= int64(entryOverhead + len(key) + cap(e.v))
	delete(sh.keys, key)
	if e.exp != 0 {
		delete(sh.volatile, key)
	}
}

// room makes room for a write of grow bytes: under noeviction it reports
// whether memory is below the limit (Redis refuses a write once used >
// maxmemory); under allkeys-random it evicts keys first.
func (sh *shard) room(grow int64) bool {
	if sh.limit <= 0 || sh.used+grow <= sh.limit {
		return true
	}
	if !sh.evict {
		return sh.used <= sh.limit && grow <= 0
	}
	for k, e := range sh.keys { // Go starts a map's range at a random key
		if sh.used+grow <= sh.limit {
			break
		}
		sh.remove(k, e)
		sh.evicted++
	}
	return sh.used+grow <= sh.limit
}

// store sets key to val with expiry exp (unix ms, 0: none), keeping the
// accounting.
func (sh *shard) store(key, val []byte, e *entry, exp int64) {
	if e == nil {
		e = &entry{v: append(make([]byte, 0, len(val)), val...)}
		sh.keys[string(key)] = e
		sh.used += int64(entryOverhead + len(key) + cap(e.v))
	} else {
		old := cap(e.v)
		e.v = append(e.v[:0], val...)
		sh.used += int64(cap(e.v) - old)
	}
	switch {
	case exp != 0 && e.exp == 0:
		sh.volatile[string(key)] = struct{}{}
	case exp == 0 && e.exp != 0:
		delete(sh.volatile, string(key))
	}
	e.exp = exp
}

// exec runs c on sh at time now (unix ms). It appends the reply, or the
// part of a joined reply, to dst; n is a part's count (DEL, EXISTS) or
// for kStats the keys (and dst holds nothing).
func (sh *shard) exec(c *cmd, now int64, dst []byte) ([]byte, int64) {
	sh.commands++
	switch c.k {
	case kGet, kMGet:
		if e := sh.live(c.key, now); e != nil {
			return resp.AppendBulk(dst, e.v), 0
		}
		return append(dst, null(c.resp3)...), 0
	case kSet:
		return sh.set(c, now, dst), 0
	case kMSet:
		e := sh.live(c.key, now)
		if !sh.room(growth(c.key, c.val, e)) {
			return append(dst, replyOOM...), 0
		}
		sh.store(c.key, c.val, e, 0)
		return dst, 0
	case kIncr:
		return sh.incr(c, now, dst), 0
	case kDel, kExists:
		e := sh.live(c.key, now)
		if e == nil {
			return dst, 0
		}
		if c.k == kDel {
			sh.remove(string(c.key), e)
		}
		return dst, 1
	case kExpire:
		return sh.expire(c, now, dst), 0
	case kTTL:
		e := sh.live(c.key, now)
		switch {
		case e == nil:
			return resp.AppendInt(dst, -2), 0
		case e.exp == 0:
			return resp.AppendInt(dst, -1), 0
		case c.flags&ttlMS != 0:
			return resp.AppendInt(dst, e.exp-now), 0
		}
		return resp.AppendInt(dst, (e.exp-now+500)/1000), 0 // Redis rounds
	case kStats:
		return dst, int64(len(sh.keys)) // the rest: shard.counts
	case kFlush:
		clear(sh.keys)
		clear(sh.volatile)
		sh.used = 0
		return dst, 0
	}
	return dst, 0
}

// counts are a shard's figures for INFO, summed over the loops.
type counts struct {
	keys, expires, used, evicted, expired, commands, remote int64
}

func (sh *shard) counts() counts {
	return counts{int64(len(sh.keys)), int64(len(sh.volatile)), sh.used, sh.evicted, sh.expired, sh.commands, sh.remote}
}

func (c *counts) add(o counts) {
	c.keys += o.keys
	c.expires += o.expires
	c.used += o.used
	c.evicted += o.evicted
	c.expired += o.expired
	c.commands += o.commands
	c.remote += o.remote
}

// growth is what storing val at key costs beyond what e holds now.
func growth(key, val []byte, e *entry) int64 {
	if e == nil {
		return int64(entryOverhead + len(key) + len(val))
	}
	return int64(len(val) - cap(e.v))
}

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
	if !sh.room(growth(c.key, c.val, e)) {
		return append(dst, replyOOM...)
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
		var err error
		v, err = strconv.ParseInt(string(e.v), 10, 64)
		if err != nil || len(e.v) > 1 && (e.v[0] == '0' || e.v[0] == '+') || len(e.v) > 20 {
			return resp.AppendError(dst, errNotInt)
		}
	}
	if c.n > 0 && v > math.MaxInt64-c.n || c.n < 0 && v < math.MinInt64-c.n {
		return resp.AppendError(dst, "ERR increment or decrement would overflow")
	}
	v += c.n
	var buf [20]byte
	val := strconv.AppendInt(buf[:0], v, 10)
	if !sh.room(growth(c.key, val, e)) {
		return append(dst, replyOOM...)
	}
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

// Active expiry, as Redis's: every sweepEvery, sample sweepSample keys
// that have an expiry, delete the expired ones, and go on while more than
// a quarter of a sample had expired, at most sweepRounds samples.
const (
	sweepSample = 20
	sweepRounds = 16
)

// sweep deletes expired keys and returns how many.
func (sh *shard) sweep(now int64) int {
	total := 0
	for range sweepRounds {
		seen, gone := 0, 0
		for k := range sh.volatile {
			if seen++; seen > sweepSample {
				break
			}
			if e := sh.keys[k]; e != nil && e.exp <= now {
				sh.remove(k, e)
				gone++
			}
		}
		total += gone
		if gone*4 <= sweepSample {
			break
		}
	}
	sh.expired += int64(total)
	return total
}
