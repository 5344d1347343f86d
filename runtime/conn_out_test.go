//go:build linux

package runtime

import (
	"testing"
	"time"
)

// TestOutQueueGivenBack checks that a connection holds an outbound queue
// only while something is queued (decision 0072): taken by the first
// write, given back by the send that drains it, by a reservation
// committed with nothing, and by a close with bytes still queued; the
// next connection that writes takes the one given back.
func TestOutQueueGivenBack(t *testing.T) {
	l, d, _ := newTestLoop(t, Config{}, &lingerHandler{closed: new([]error)})
	l.acceptResult(fakeFd, 0, 0)
	l.acceptResult(fakeFd+1, 0, 0)
	a, b := l.conns[0], l.conns[1]
	if a.out != nil {
		t.Fatal("a connection that wrote nothing holds an outbound queue")
	}

	tests := []struct {
		name  string
		write func(c *Conn)
		drain bool // the kernel takes the bytes
	}{
		{"write", func(c *Conn) { c.Write([]byte("hello")) }, true},
		{"writev", func(c *Conn) { c.Writev([]byte("he"), []byte("llo")) }, true},
		{"reserve and commit", func(c *Conn) { copy(c.Reserve(5), "hello"); c.Commit(5) }, true},
		{"reserve, commit nothing", func(c *Conn) { c.Reserve(5); c.Commit(0) }, false},
		{"shared", func(c *Conn) { c.WriteShared([]byte("hello")) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.take = 0
			l.safely("test", func() { tt.write(a) })
			if tt.drain {
				if a.out == nil || a.Buffered() != 5 {
					t.Fatalf("queue %p with %d bytes; want one holding 5", a.out, a.Buffered())
				}
				d.take = -1
				d.flush(a)
			}
			if a.out != nil || len(l.spareOut.free) != 1 {
				t.Fatalf("drained: queue %p, %d spare; want none held and one spare", a.out, len(l.spareOut.free))
			}
		})
	}

	// The next writer takes the spare; a close with bytes queued gives
	// it back.
	spare := l.spareOut.free[0]
	d.take = 0
	l.safely("test", func() { b.Write([]byte("stuck")) })
	if b.out != spare || len(l.spareOut.free) != 0 {
		t.Fatalf("the next write took %p (%d spare); want the spare %p", b.out, len(l.spareOut.free), spare)
	}
	l.safely("test", func() { b.Abort() })
	if b.out != nil || len(l.spareOut.free) != 1 {
		t.Fatalf("closed: queue %p, %d spare; want it given back", b.out, len(l.spareOut.free))
	}
}

// TestOutQueueCyclesAllocateNothing checks that a write the kernel takes
// at once allocates nothing once warm: the queue and its buffer come from
// the loop's spares and go back to them.
func TestOutQueueCyclesAllocateNothing(t *testing.T) {
	l, d, _ := newTestLoop(t, Config{}, &lingerHandler{closed: new([]error)})
	l.acceptResult(fakeFd, 0, 0)
	c := l.conns[0]
	msg := []byte("hello")
	cycle := func() {
		d.take = 0
		c.Write(msg)
		d.take = -1
		d.flush(c)
	}
	cycle()
	if n := testing.AllocsPerRun(100, cycle); n != 0 {
		t.Fatalf("%v allocations a write and drain; want 0", n)
	}
	if c.out != nil {
		t.Fatal("the queue is held after the last drain")
	}
}

// TestOutQueueSparesFollowBursts checks the spare queues against a
// fan-out (the review of decision 0072): a publish to more connections
// than any fixed bound on the spares takes a queue each, and the next
// publish takes them all from the spares, allocating none; two trim
// periods without such a burst give them back down to keepSpares.
func TestOutQueueSparesFollowBursts(t *testing.T) {
	const subscribers = 3000
	l, d, _ := newTestLoop(t, Config{}, &lingerHandler{closed: new([]error)})
	for i := range subscribers {
		l.acceptResult(fakeFd+i, 0, 0)
	}
	msg := []byte("event")
	publish := func() {
		d.take = 0
		for _, c := range l.conns {
			if c != nil {
				c.WriteShared(msg)
			}
		}
		d.take = -1
		for _, c := range l.conns {
			if c != nil {
				d.flush(c)
			}
		}
	}
	publish()
	if n := len(l.spareOut.free); n != subscribers {
		t.Fatalf("%d spare queues after a publish to %d; want one each", n, subscribers)
	}
	if n := testing.AllocsPerRun(3, publish); n != 0 {
		t.Fatalf("%v allocations a publish to %d once warm; want 0", n, subscribers)
	}
	if l.trimTimer == nil || l.trimTimer.index < 0 {
		t.Fatal("the trim timer is not armed with spare queues over keepSpares")
	}
	for range 2 {
		l.trimBufs() // what the trim timer runs, each trimEvery
	}
	if n := len(l.spareOut.free); n != keepSpares {
		t.Fatalf("%d spare queues two trims after the last publish; want %d", n, keepSpares)
	}
}

// TestWriteTimerSparesFollowBursts: a fan-out with a write timeout arms a
// write timer on every subscriber it writes to, and each lets its timer go
// once it finds the queue drained; the next fan-out takes them all from
// the spares, allocating none, and two trims give them back down to
// keepSpares.
func TestWriteTimerSparesFollowBursts(t *testing.T) {
	const subscribers = 3000
	l, d, clock := newTestLoop(t, Config{WriteTimeout: 5 * time.Second}, &lingerHandler{closed: new([]error)})
	for i := range subscribers {
		l.acceptResult(fakeFd+i, 0, 0)
	}
	msg := []byte("event")
	publish := func() {
		d.take = 0
		for _, c := range l.conns {
			if c != nil {
				c.WriteShared(msg)
			}
		}
		d.take = -1
		for _, c := range l.conns {
			if c != nil {
				d.flush(c)
			}
		}
	}
	// settle runs the write timers, which find the queues drained and
	// let go.
	settle := func() {
		tick(l, clock, writeCheckEvery)
		for range subscribers/timersPerTurn + 1 {
			l.runTimers()
		}
	}
	publish()
	settle()
	if n := len(l.spare.free); n != subscribers {
		t.Fatalf("%d spare timers after a publish to %d with a write timeout; want one each", n, subscribers)
	}
	if n := testing.AllocsPerRun(3, func() { publish(); settle() }); n != 0 {
		t.Fatalf("%v allocations a publish to %d once warm; want 0", n, subscribers)
	}
	for range 2 {
		l.trimBufs()
	}
	if n := len(l.spare.free); n != keepSpares {
		t.Fatalf("%d spare timers two trims after the last publish; want %d", n, keepSpares)
	}
}

// TestShedSpares checks what a loop gives up when the return after a
// storm asks (Loop.shedSpares): the write timers of drained queues before
// their next check, the spare timers and queues above keepSpares, every
// pooled buffer, and the arrays the storm grew; a connection with bytes
// still queued keeps its timer.
func TestShedSpares(t *testing.T) {
	const conns = 3000
	l, d, _ := newTestLoop(t, Config{WriteTimeout: 5 * time.Second}, &lingerHandler{closed: new([]error)})
	for i := range conns {
		l.acceptResult(fakeFd+i, 0, 0)
	}
	d.take = 0
	for _, c := range l.conns {
		if c != nil {
			c.WriteShared([]byte("event"))
		}
	}
	d.take = -1
	var held *Conn
	for _, c := range l.conns {
		if c == nil {
			continue
		}
		if held == nil {
			held = c // its queue is not sent: it keeps its timer
			continue
		}
		d.flush(c)
	}
	timers := 0
	for _, c := range l.conns {
		if c != nil && c.writeTimer != nil {
			timers++
		}
	}
	if timers != conns {
		t.Fatalf("%d write timers armed after a publish to %d; want one each", timers, conns)
	}
	peak := cap(l.timers.ts)
	l.shedSpares()
	for _, c := range l.conns {
		if c != nil && c != held && c.writeTimer != nil {
			t.Fatalf("a drained connection kept its write timer after shedSpares")
		}
	}
	if held.writeTimer == nil || held.writeTimer.index < 0 {
		t.Fatalf("a connection with bytes queued lost its write timer to shedSpares")
	}
	if n := len(l.spare.free); n != keepSpares {
		t.Fatalf("%d spare timers after shedSpares; want %d", n, keepSpares)
	}
	if n := len(l.spareOut.free); n > keepSpares {
		t.Fatalf("%d spare queues after shedSpares; want at most %d", n, keepSpares)
	}
	if c := cap(l.spare.free); c > 4*keepSpares {
		t.Fatalf("the spare timers' array holds %d after shedSpares; want it shrunk", c)
	}
	if c := cap(l.timers.ts); c >= peak || c > 4*max(len(l.timers.ts), keepSpares) {
		t.Fatalf("the timer heap's array holds %d (%d at the storm's peak, %d timers)", c, peak, len(l.timers.ts))
	}
	if l.bufs.pooledBytes != 0 {
		t.Fatalf("%d bytes of buffers pooled after shedSpares; want none", l.bufs.pooledBytes)
	}
	// The timer left keeps its place in the shrunk heap.
	if l.timers.ts[held.writeTimer.index] != held.writeTimer {
		t.Fatalf("the timer heap lost its order in the shrink")
	}
}
