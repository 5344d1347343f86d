//go:build linux

package runtime

import (
	"time"

	"github.com/percore/percore/internal/spare"
)

// A connection's timers: the write timeout, the idle timeout and the
// maximum lifetime.

// SetIdleTimeout closes c with ErrIdleTimeout once it has received
// nothing for d; zero turns the idle timeout off. The clock restarts now.
func (c *Conn) SetIdleTimeout(d time.Duration) {
	if d <= 0 {
		if s := c.side; s != nil {
			if s.idleTimer != nil {
				c.loop.spareTimer(s.idleTimer)
			}
			// An idle connection keeps no timer it does not use.
			s.idleTimeout, s.idleTimer, s.lastRead = 0, nil, 0
			c.trimSide()
		}
		return
	}
	s := c.more()
	s.idleTimeout = d
	s.lastRead = c.loop.stamp()
	if c.state&stClosed != 0 {
		return
	}
	if s.idleTimer == nil {
		s.idleTimer = c.loop.connTimer(d, c, (*Conn).checkIdle)
	} else {
		s.idleTimer.Reset(d)
	}
}

// checkIdle runs when the idle timer fires. Reads only record their time,
// so the timer is re-armed for the rest of the period instead of being
// reset on every read.
func (c *Conn) checkIdle() {
	s := c.side
	if c.state&stClosed != 0 || s == nil || s.idleTimeout <= 0 {
		return
	}
	l := c.loop
	if left := l.at(s.lastRead).Add(s.idleTimeout).Sub(l.now); left > 0 {
		s.idleTimer.Reset(left)
		return
	}
	l.cnt[sIdleTimeouts]++
	l.closeConn(c, c.opError("read", ErrIdleTimeout))
}

// SetMaxLifetime closes c with ErrMaxLifetime once d has passed since it
// opened; zero removes the limit.
func (c *Conn) SetMaxLifetime(d time.Duration) {
	if s := c.side; s != nil && s.lifeTimer != nil {
		s.lifeTimer.Stop()
	}
	if d <= 0 || c.state&stClosed != 0 {
		if s := c.side; s != nil {
			s.lifeTimer = nil
			c.trimSide()
		}
		return
	}
	left := c.loop.at(c.opened).Add(d).Sub(c.loop.now)
	if s := c.more(); s.lifeTimer == nil {
		s.lifeTimer = c.loop.AfterFunc(left, c.expire)
	} else {
		s.lifeTimer.Reset(left)
	}
}

func (c *Conn) expire() {
	if c.state&stClosed == 0 {
		c.loop.cnt[sLifetimeCloses]++
		c.loop.closeConn(c, c.opError("close", ErrMaxLifetime))
	}
}

func (c *Conn) stopTimers() {
	if c.writeTimer != nil {
		c.loop.spareTimer(c.writeTimer)
		c.writeTimer = nil
	}
	s := c.side
	if s == nil {
		return
	}
	if s.idleTimer != nil {
		c.loop.spareTimer(s.idleTimer)
		s.idleTimer = nil
	}
	for _, t := range [...]*Timer{s.lifeTimer, s.lingerTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// watchWrite arms the write timeout for bytes just queued, unless it is
// armed already.
func (c *Conn) watchWrite() {
	d := min(c.loop.cfg.WriteTimeout, writeCheckEvery)
	switch {
	case d <= 0:
	case c.writeTimer == nil:
		c.writeTimer = c.loop.connTimer(d, c, (*Conn).checkWrite)
	case c.writeTimer.index < 0:
		c.writeTimer.Reset(d)
	}
}

// writeCheckEvery is the longest the write timer waits between looks at
// the queue: it fires at least this often while bytes are queued, so
// that a connection whose queue has drained lets its timer go within a
// second instead of a whole WriteTimeout later (an idle WebSocket that
// was pinged every 15 s would otherwise always hold one: about 80 bytes a
// connection; decision 0060). The timeout itself still counts from the
// last progress.
const writeCheckEvery = time.Second

// checkWrite runs when the write timer fires: a queue that the kernel has
// taken nothing of for WriteTimeout closes the connection; a queue that
// moved re-arms the timer for the rest of the period; an empty queue
// leaves it disarmed until the next write queues bytes.
func (c *Conn) checkWrite() {
	if c.state&stClosed != 0 || c.idleOut() {
		// An idle connection keeps no timer; the next write arms one.
		c.loop.spareTimer(c.writeTimer)
		c.writeTimer = nil
		return
	}
	l := c.loop
	if left := l.at(c.progress).Add(l.cfg.WriteTimeout).Sub(l.now); left > 0 {
		c.writeTimer.Reset(min(left, writeCheckEvery))
		return
	}
	l.cnt[sWriteTimeouts]++
	l.closeConn(c, c.opError("write", ErrWriteTimeout))
}

// connTimer returns a timer running f once d has passed, as AfterFunc,
// taken from the loop's spare timers when it has one: a connection's write
// and idle timers come and go with its traffic (every connection that was
// written to arms its write timer, and lets it go a second after its queue
// drains), and reusing them keeps them from being garbage that the heap
// goal, and so the idle process's memory, grows by (decision 0065).
func (l *Loop) connTimer(d time.Duration, c *Conn, f func(*Conn)) *Timer {
	t := l.spare.take()
	if t == nil {
		t = &Timer{loop: l, index: -1}
	}
	t.c, t.cf = c, f
	t.Reset(d)
	return t
}

// spareTimer stops t, a timer connTimer returned that its connection no
// longer refers to, and keeps it for connTimer (burstSpares: a fan-out
// arms a write timer on every subscriber it writes to).
func (l *Loop) spareTimer(t *Timer) {
	t.Stop()
	t.f, t.c, t.cf = nil, nil, nil
	if l.spare.put(t) {
		l.armTrimOnce()
	}
}

// maxSpares bounds a loop's spare side states: 112 KiB at most. (Spare
// timers and outbound queues follow what the loop's bursts need, trimmed:
// burstSpares.)
const maxSpares = 1024

// burstSpares are spare values of a kind a loop takes many of in one turn
// and gives back a turn or a second later: the outbound queues and the
// write timers of a fan-out to every subscriber of the loop. The list
// keeps what a burst gave back, so that the next burst allocates nothing;
// like the buffer pool (buffers.go), each trim drops what no turn took
// during the whole period (the list's low-water mark), down to keepSpares,
// so that memory kept after a burst returns within two trim periods.
type burstSpares[T any] struct {
	free []*T
	low  int // the list's shortest length since the last trim
}

// keepSpares is how many spares of a kind a trim leaves.
const keepSpares = 64

// take returns a spare, or nil when there is none.
func (s *burstSpares[T]) take() *T {
	v := popSpare(&s.free)
	s.low = min(s.low, len(s.free))
	return v
}

// put keeps v and reports whether the list holds more than a trim leaves.
func (s *burstSpares[T]) put(v *T) bool {
	s.free = append(s.free, v)
	return len(s.free) > keepSpares
}

// trim drops the spares below the low-water mark (above keepSpares) and
// reports whether more than keepSpares are left, for a later trim.
func (s *burstSpares[T]) trim() bool {
	if drop := min(s.low, len(s.free)-keepSpares); drop > 0 {
		// The oldest are at the bottom: take pops from the top.
		n := copy(s.free, s.free[drop:])
		clear(s.free[n:])
		s.free = s.free[:n]
	}
	s.low = len(s.free)
	return len(s.free) > keepSpares
}

// shed drops at once what the next two trims would, down to keepSpares,
// and shrinks the list's array (shrunk): for a calm loop (shedSpares).
func (s *burstSpares[T]) shed() {
	s.low = len(s.free)
	s.trim()
	s.free = shrunk(s.free)
}

// shrunk returns s, or a copy of it in a smaller array once its array is
// more than four times what it holds (and more than keepSpares): a list
// that a burst grew to thousands keeps its array otherwise, its pointers
// cleared, for good. Only for a calm loop (shedSpares): a trim between
// two bursts that shrank the arrays would have the next burst grow them
// again, allocating.
func shrunk[T any](s []*T) []*T {
	if cap(s) <= 4*max(len(s), keepSpares) {
		return s
	}
	return append(make([]*T, 0, 2*max(len(s), keepSpares)), s...)
}

// popSpare takes the last of *spares, or returns nil when there is none.
// The loop's spare lists (timers, side states, outbound queues, deferred
// receives) all give back this way (internal/spare, as httpd's and the
// WebSocket Pool's).
func popSpare[T any](spares *[]*T) *T { return spare.Pop(spares) }
