//go:build linux

package runtime

import "time"

// Timer is a function scheduled on a loop. Its methods must be called on
// the loop's thread.
type Timer struct {
	loop  *Loop
	when  time.Time
	seq   uint64 // the order it was scheduled in, among equal deadlines
	f     func()
	index int // in the heap; -1 when not scheduled
	// A connection's timer (connTimer) runs cf(c) instead of f: a
	// function of the package and the connection, where a method value
	// (c.checkWrite) would be a closure allocated at each arming.
	c  *Conn
	cf func(*Conn)
}

// AfterFunc runs f on the loop's thread once d has passed (at the end of the
// loop turn in which it expires). Timers due at the same time run in the
// order they were scheduled (AfterFunc or Reset). A panic in f is recovered, logged and
// counted in Stats.Panics. It must be called on the loop's thread; to
// schedule from elsewhere, Post a function that calls it.
func (l *Loop) AfterFunc(d time.Duration, f func()) *Timer {
	t := &Timer{loop: l, f: f, index: -1}
	t.Reset(d)
	return t
}

// Stop cancels the timer and reports whether it was still pending.
func (t *Timer) Stop() bool {
	if t.index < 0 {
		return false
	}
	t.loop.timers.remove(t)
	return true
}

// Reset (re)schedules the timer to run d from now and reports whether it
// was pending.
func (t *Timer) Reset(d time.Duration) bool {
	pending := t.Stop()
	t.when = t.loop.clock().Add(d)
	t.loop.timers.push(t)
	return pending
}

// runTimers runs the expired timers, at most timersPerTurn of them and for
// at most timersTurnTime: when thousands expire together (idle connections
// that opened together reach their timeout together), each turn closes a
// slice of them and then serves I/O again, so that the active connections
// wait for one slice, not for all of them. The rest run in the turns that
// follow, which do not wait in the kernel while an expired timer is left.
// (The count bounds io_uring, whose closes cost in the next enter; the time
// bounds epoll, whose closes cost in the timer.)
func (l *Loop) runTimers() {
	began := l.now
	for i := range timersPerTurn {
		t := l.timers.next()
		if t == nil || t.when.After(l.now) {
			return
		}
		if i > 0 && i%16 == 0 && l.clock().Sub(began) >= timersTurnTime {
			return
		}
		l.timers.remove(t)
		l.cnt[sTimers]++
		if t.cf != nil {
			l.safelyConn("timer", t.cf, t.c)
		} else {
			l.safely("timer", t.f)
		}
	}
}

// timersPerTurn bounds the timers one loop turn runs. A timer that closes
// a connection costs the kernel some tens of microseconds (docs/performance.md),
// so a slice of 256 keeps a turn within a few milliseconds.
const timersPerTurn = 256

// timersTurnTime bounds the time one turn spends running timers, checked
// every 16 of them.
const timersTurnTime = 2 * time.Millisecond

// timerHeap is a binary min-heap of timers by deadline, and by the order
// they were pushed among equal deadlines (a heap alone is not stable).
type timerHeap struct {
	ts  []*Timer
	seq uint64
}

// before orders the heap: a earlier than b, or pushed before it.
func before(a, b *Timer) bool {
	return a.when.Before(b.when) || a.when.Equal(b.when) && a.seq < b.seq
}

func (h *timerHeap) next() *Timer {
	if len(h.ts) == 0 {
		return nil
	}
	return h.ts[0]
}

func (h *timerHeap) push(t *Timer) {
	h.seq++
	t.seq = h.seq
	t.index = len(h.ts)
	h.ts = append(h.ts, t)
	h.up(t.index)
}

func (h *timerHeap) remove(t *Timer) {
	i := t.index
	last := len(h.ts) - 1
	if i != last {
		h.swap(i, last)
	}
	h.ts[last] = nil
	h.ts = h.ts[:last]
	t.index = -1
	if i != last {
		h.down(i)
		h.up(i)
	}
}

func (h *timerHeap) swap(i, j int) {
	h.ts[i], h.ts[j] = h.ts[j], h.ts[i]
	h.ts[i].index = i
	h.ts[j].index = j
}

func (h *timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !before(h.ts[i], h.ts[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *timerHeap) down(i int) {
	n := len(h.ts)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && before(h.ts[r], h.ts[l]) {
			m = r
		}
		if !before(h.ts[m], h.ts[i]) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// Schedule runs f on the loop's thread once d has passed and returns a
// function that cancels it (reporting whether it was still pending). It is
// AfterFunc for code that must not depend on this package's types, such as
// runtime/pool's scheduler interface. It must be called on the loop's
// thread.
func (l *Loop) Schedule(d time.Duration, f func()) (cancel func() bool) {
	return l.AfterFunc(d, f).Stop
}
