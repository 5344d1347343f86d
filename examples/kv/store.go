//go:build linux

package main

import (
	percore "github.com/percore/percore/runtime"
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
	commands    int64               // key commands run here (each part of an every-loop command counts)
	remote      int64               // of which for clients of other loops
	parsed      int64               // bytes the request parsers of this loop's clients examined
	ops         *percore.OpPool[op] // the cross-loop calls of this loop's clients, reused
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

// kind is a command on the keys of one slot, or one loop's part of a
// whole-keyspace command.
type kind uint8

const (
	kGet kind = iota
	kSet
	kIncr   // by n
	kDel    // the keys in multi
	kExists // the keys in multi
	kExpire // at n (unix ms), with flags
	kTTL    // flags&ttlMS: in ms
	kMGet   // the keys in multi
	kMSet   // the key, value pairs in multi
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

// cmd is a parsed command for one shard. key and val (one-key commands)
// and multi (the keys of MGET, DEL and EXISTS, MSET's pairs) are the
// client's bytes, or the call's copies; n is INCRBY's delta or an expiry.
type cmd struct {
	k        kind
	flags    uint8
	resp3    bool
	key, val []byte
	multi    [][]byte
	n        int64
	// denyOOM is the command table's denyoom flag: the command is
	// refused once memory is over the limit (after eviction, under
	// allkeys-random).
	denyOOM bool
	// err is an error in the command's arguments, found by the client's
	// loop and answered by the shard after the memory check: Redis checks
	// memory before a command runs, and a command reads its arguments
	// when it runs.
	err string
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

// room is Redis's memory check before a denyoom command runs, over this
// loop's share of the limit: under allkeys-random it evicts random keys
// while used memory is over the limit; it reports whether memory is
// within the limit, so that the command may run (and may take memory past
// it: the next write evicts, or is refused). It runs before the command
// looks any key up, so that no entry it holds can be evicted under it.
func (sh *shard) room() bool {
	if sh.limit <= 0 || sh.used <= sh.limit {
		return true
	}
	if sh.evict {
		for k, e := range sh.keys { // Go starts a map's range at a random key
			sh.remove(k, e)
			sh.evicted++
			if sh.used <= sh.limit {
				break
			}
		}
	}
	return sh.used <= sh.limit
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
	if c.denyOOM && !sh.room() {
		return append(dst, replyOOM...), 0
	}
	if c.err != "" {
		return resp.AppendError(dst, c.err), 0
	}
	switch c.k {
	case kGet:
		if e := sh.live(c.key, now); e != nil {
			return resp.AppendBulk(dst, e.v), 0
		}
		return append(dst, null(c.resp3)...), 0
	case kMGet:
		dst = resp.AppendArray(dst, len(c.multi))
		for _, k := range c.multi {
			if e := sh.live(k, now); e != nil {
				dst = resp.AppendBulk(dst, e.v)
			} else {
				dst = append(dst, null(c.resp3)...)
			}
		}
		return dst, 0
	case kSet:
		return sh.set(c, now, dst), 0
	case kMSet:
		for i := 0; i+1 < len(c.multi); i += 2 {
			k := c.multi[i]
			sh.store(k, c.multi[i+1], sh.live(k, now), 0)
		}
		return append(dst, replyOK...), 0
	case kIncr:
		return sh.incr(c, now, dst), 0
	case kDel, kExists:
		n := int64(0)
		for _, k := range c.multi {
			if e := sh.live(k, now); e != nil {
				n++
				if c.k == kDel {
					sh.remove(string(k), e)
				}
			}
		}
		return resp.AppendInt(dst, n), n
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
	keys, expires, used, evicted, expired, commands, remote, parsed int64
}

func (sh *shard) counts() counts {
	return counts{int64(len(sh.keys)), int64(len(sh.volatile)), sh.used, sh.evicted, sh.expired, sh.commands, sh.remote, sh.parsed}
}

func (c *counts) add(o counts) {
	c.keys += o.keys
	c.expires += o.expires
	c.used += o.used
	c.evicted += o.evicted
	c.expired += o.expired
	c.commands += o.commands
	c.remote += o.remote
	c.parsed += o.parsed
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
