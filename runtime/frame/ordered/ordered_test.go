package ordered

import (
	"bytes"
	"testing"
)

// fakeConn records what a queue writes.
type fakeConn struct {
	out    bytes.Buffer
	closed int
}

func (f *fakeConn) Write(p []byte) (int, error) { return f.out.Write(p) }
func (f *fakeConn) Close() error                { f.closed++; return nil }

// TestOrder: replies finished in any order are written in the order of
// their requests; ready ones go out at once only when nothing waits.
func TestOrder(t *testing.T) {
	var c fakeConn
	q := New[int](&c)
	q.Send([]byte("a"))
	if c.out.String() != "a" || !q.Idle() {
		t.Fatalf("a ready reply with nothing waiting: wrote %q", c.out.String())
	}
	r1 := q.Push(1)
	q.Send([]byte("c"))
	r2 := q.Push(2)
	q.Send([]byte("e"))
	if c.out.String() != "a" || q.Waiting() != 4 {
		t.Fatalf("wrote %q with %d waiting; want only a, 4 waiting", c.out.String(), q.Waiting())
	}
	r2.Buf = append(r2.Buf, 'd')
	q.Done(r2)
	q.Done(r2) // r2's two parts in, but r1 still waits
	if c.out.String() != "a" {
		t.Fatalf("wrote %q before the first waiting reply was done", c.out.String())
	}
	r1.Buf = append(r1.Buf, 'b')
	q.Done(r1)
	if c.out.String() != "abcde" || !q.Idle() {
		t.Fatalf("wrote %q, idle %v; want abcde, idle", c.out.String(), q.Idle())
	}
	// Reused replies start empty.
	if r := q.Push(1); len(r.Buf) != 0 {
		t.Fatalf("a reused reply holds %q", r.Buf)
	}
}

// TestAdd: a reply that learns of more parts while it splits waits for
// all of them.
func TestAdd(t *testing.T) {
	var c fakeConn
	q := New[int](&c)
	r := q.Push(1)
	q.Add(r, 2)
	r.Data = 0
	for i := range 3 {
		if c.out.Len() != 0 {
			t.Fatalf("wrote %q after %d of 3 parts", c.out.String(), i)
		}
		r.Data++
		q.Done(r)
	}
	if c.out.Len() != 0 || !q.Idle() || r.Data != 3 {
		t.Fatalf("an empty reply: wrote %q, idle %v, data %d", c.out.String(), q.Idle(), r.Data)
	}
}

// TestCloseWhenDone closes after the waiting replies, once; a gone
// connection gets nothing more.
func TestCloseWhenDone(t *testing.T) {
	var c fakeConn
	q := New[int](&c)
	r := q.Push(1)
	q.CloseWhenDone()
	if c.closed != 0 || !q.Closing() {
		t.Fatal("closed before the waiting reply was written")
	}
	r.Buf = append(r.Buf, "last"...)
	q.Done(r)
	if c.out.String() != "last" || c.closed != 1 {
		t.Fatalf("wrote %q, closed %d times; want last, then one close", c.out.String(), c.closed)
	}
	q.CloseWhenDone()
	q.Send([]byte("more"))
	if c.out.String() != "last" || c.closed != 1 {
		t.Fatalf("after the close: wrote %q, closed %d times", c.out.String(), c.closed)
	}

	var d fakeConn
	q = New[int](&d)
	r = q.Push(1)
	q.Gone()
	r.Buf = append(r.Buf, "lost"...)
	q.Done(r)
	q.Send([]byte("lost too"))
	if d.out.Len() != 0 || !q.Idle() {
		t.Fatalf("a gone connection got %q", d.out.String())
	}
}

// TestNoAllocs: a warm queue allocates nothing per reply.
func TestNoAllocs(t *testing.T) {
	var c fakeConn
	q := New[int](&c)
	c.out.Grow(1 << 20)
	ok := []byte("+OK\r\n")
	run := func() {
		r := q.Push(1)
		q.Send(ok)
		r.Buf = append(r.Buf, "$1\r\nv\r\n"...)
		q.Done(r)
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%v allocations per reply pair", n)
	}
}

// joined is a Data that keeps its buffer across uses (a Resetter).
type joined struct {
	sum   int
	parts [][]byte
}

func (j *joined) Reset() { *j = joined{parts: j.parts[:0]} }

// TestPushResetsData: a reused Reply comes out of Push with no state of its
// last use: Data zeroed, or Reset when it is a Resetter (which keeps its
// room), and Buf empty.
func TestPushResetsData(t *testing.T) {
	t.Run("zeroed", func(t *testing.T) {
		var c fakeConn
		q := New[struct {
			n    int
			fail []byte
		}](&c)
		r := q.Push(1)
		r.Data.n, r.Data.fail = 7, []byte("-ERR x\r\n")
		r.Buf = append(r.Buf, "reply"...)
		q.Done(r)
		r2 := q.Push(1)
		if r2 != r {
			t.Fatal("the reply was not reused")
		}
		if r2.Data.n != 0 || r2.Data.fail != nil || len(r2.Buf) != 0 {
			t.Fatalf("reused reply: Data %+v, Buf %q; want both empty", r2.Data, r2.Buf)
		}
	})
	t.Run("resetter", func(t *testing.T) {
		var c fakeConn
		q := New[joined](&c)
		r := q.Push(1)
		r.Data.sum = 3
		r.Data.parts = append(r.Data.parts, []byte("a"), []byte("b"))
		q.Done(r)
		room := cap(r.Data.parts)
		r2 := q.Push(1)
		if r2.Data.sum != 0 || len(r2.Data.parts) != 0 || cap(r2.Data.parts) != room {
			t.Fatalf("reused reply: Data %+v (room %d); want it reset with its room of %d kept", r2.Data, cap(r2.Data.parts), room)
		}
		q.Done(r2)
		if n := testing.AllocsPerRun(100, func() { q.Done(q.Push(1)) }); n != 0 {
			t.Fatalf("Push and Done of a warm queue allocate %v times", n)
		}
	})
}

// TestLast: Last is true exactly before a reply's last part is counted off.
func TestLast(t *testing.T) {
	var c fakeConn
	q := New[int](&c)
	r := q.Push(1)
	q.Add(r, 2)
	var seen []bool
	for range 3 {
		seen = append(seen, q.Last(r))
		q.Done(r)
	}
	if want := []bool{false, false, true}; seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
		t.Fatalf("Last before each Done: %v, want %v", seen, want)
	}
}
