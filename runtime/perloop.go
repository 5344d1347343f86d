//go:build linux

package runtime

import (
	"sync"
	"sync/atomic"
)

// PerLoop keeps one value of type T per loop: a loop's shard of a
// shared-nothing server, its caches, its own scratch buffers. Set it up in
// Config.LoopSetup, which runs on each loop's thread before the loop serves,
// and reach it with Get from that loop's handlers, timers and posted
// functions. The zero value is ready to use.
//
//	var shards percore.PerLoop[shard]
//	cfg.LoopSetup = func(l *percore.Loop) error { shards.Set(l, newShard()); return nil }
//	...
//	s := shards.Get(c.Loop()) // in a handler
//
// Set and Get must be called on the loop's own thread; the value of one
// loop is never touched by another. A PerLoop serves the loops of one
// Runtime: Set on a loop of another runtime panics, and Get there returns
// nil (loop ids repeat across runtimes).
type PerLoop[T any] struct {
	mu   sync.Mutex // serialises Set's growth
	rt   atomic.Pointer[Runtime]
	vals atomic.Pointer[[]*T] // by loop id; grown by copy, never moved
}

// Set stores v as l's value and returns a pointer to it, which stays valid
// for as long as the PerLoop does.
func (p *PerLoop[T]) Set(l *Loop, v T) *T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.rt.CompareAndSwap(nil, l.rt) && p.rt.Load() != l.rt {
		panic("percore: a PerLoop serves the loops of one Runtime")
	}
	var cur []*T
	if old := p.vals.Load(); old != nil {
		cur = *old
	}
	if l.id >= len(cur) {
		grown := make([]*T, l.id+1)
		copy(grown, cur)
		cur = grown
	} else {
		cur = append([]*T(nil), cur...)
	}
	cur[l.id] = &v
	p.vals.Store(&cur)
	return &v
}

// Get returns a pointer to l's value, or nil if Set has not stored one.
func (p *PerLoop[T]) Get(l *Loop) *T {
	vals := p.vals.Load()
	if vals == nil || l.id >= len(*vals) || p.rt.Load() != l.rt {
		return nil
	}
	return (*vals)[l.id]
}
