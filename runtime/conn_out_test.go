//go:build linux

package runtime

import "testing"

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
			if a.out != nil || len(l.spareOut) != 1 {
				t.Fatalf("drained: queue %p, %d spare; want none held and one spare", a.out, len(l.spareOut))
			}
		})
	}

	// The next writer takes the spare; a close with bytes queued gives
	// it back.
	spare := l.spareOut[0]
	d.take = 0
	l.safely("test", func() { b.Write([]byte("stuck")) })
	if b.out != spare || len(l.spareOut) != 0 {
		t.Fatalf("the next write took %p (%d spare); want the spare %p", b.out, len(l.spareOut), spare)
	}
	l.safely("test", func() { b.Abort() })
	if b.out != nil || len(l.spareOut) != 1 {
		t.Fatalf("closed: queue %p, %d spare; want it given back", b.out, len(l.spareOut))
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
