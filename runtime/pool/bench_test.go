package pool

import (
	"testing"
	"time"
)

// BenchmarkGetPut measures the fast path: a get served by an idle
// connection, then its return. It runs on a fake loop (the path touches no
// loop method) with the wall clock.
func BenchmarkGetPut(b *testing.B) {
	cases := []struct {
		name      string
		cfg       Config
		loopClock bool
	}{
		{"defaults, time.Now", Config{Clock: time.Now}, false}, // validate at once, idle timeout and max lifetime on
		{"defaults, loop clock", Config{}, true},               // as inside a percore loop
		{"no test on checkout", Config{SkipTestOnCheckout: true, Clock: time.Now}, false},
		{"no expiry, no test", Config{SkipTestOnCheckout: true, IdleTimeout: -1, MaxLifetime: -1}, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			m := newFakeManager()
			c.cfg.ReapInterval = -1
			p, err := New[*fakeConn](m, c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			loop := newFakeLoop(newFakeClock())
			var l *Local[*fakeConn]
			if c.loopClock {
				l = p.Local(turnClockLoop{loop, time.Now()})
			} else {
				l = p.Local(loop)
			}
			var got Lease[*fakeConn]
			done := func(ls Lease[*fakeConn], err error) { got = ls }
			l.Get(done) // opens the connection
			l.Put(got)
			b.ReportAllocs()
			for b.Loop() {
				got = Lease[*fakeConn]{}
				l.Get(done)
				if !got.Lent() {
					b.Fatal("the get was not served at once")
				}
				l.Put(got)
			}
			b.StopTimer()
			if s := l.Statistics(); s.Created != 1 {
				b.Fatalf("created %d connections", s.Created)
			}
			p.Close()
			loop.drain()
		})
	}
}

// turnClockLoop is a fake loop with a Now method, like *percore.Loop's
// clock read once per turn.
type turnClockLoop struct {
	*fakeLoop
	now time.Time
}

func (t turnClockLoop) Now() time.Time { return t.now }

// TestGetPutAllocatesNothing pins the fast path's allocation count.
func TestGetPutAllocatesNothing(t *testing.T) {
	m := newFakeManager()
	p, err := New[*fakeConn](m, Config{ReapInterval: -1, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	loop := newFakeLoop(newFakeClock())
	l := p.Local(loop)
	var got Lease[*fakeConn]
	done := func(ls Lease[*fakeConn], err error) { got = ls }
	l.Get(done)
	l.Put(got)
	if n := testing.AllocsPerRun(1000, func() { l.Get(done); l.Put(got) }); n != 0 {
		t.Errorf("get+put allocates %v times", n)
	}
}

// movingClockLoop is a fake loop whose Now the test moves.
type movingClockLoop struct {
	*fakeLoop
	now *time.Time
}

func (m movingClockLoop) Now() time.Time { return *m.now }

// TestLocalUsesTheLoopClock: without Config.Clock, a Local expires
// connections by its loop's clock when the loop has one.
func TestLocalUsesTheLoopClock(t *testing.T) {
	m := newFakeManager()
	p, err := New[*fakeConn](m, Config{ReapInterval: -1, SkipTestOnCheckout: true, IdleTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	l := p.Local(movingClockLoop{newFakeLoop(newFakeClock()), &now})
	var got Lease[*fakeConn]
	done := func(ls Lease[*fakeConn], err error) { got = ls }
	l.Get(done)
	l.Put(got)
	now = now.Add(2 * time.Minute) // past the idle timeout, by the loop's clock only
	got = Lease[*fakeConn]{}
	l.Get(done)
	if !got.Lent() {
		t.Fatal("get not served")
	}
	if s := l.Statistics(); s.Created != 2 || s.ClosedIdleTimeout != 1 {
		t.Fatalf("created %d, closed for idling %d; want 2 and 1 (the loop clock expired the first)", s.Created, s.ClosedIdleTimeout)
	}
	l.Put(got)
	p.Close()
}

// TestLoopClockChoice: a pool made from another pool's Config (whose Clock
// stays nil) still expires by its loops' clock; a Config.Clock wins over
// the loop's.
func TestLoopClockChoice(t *testing.T) {
	base := Config{ReapInterval: -1, SkipTestOnCheckout: true, IdleTimeout: time.Minute}
	start := time.Unix(1000, 0)
	tests := []struct {
		name                      string
		cfg                       func(t *testing.T) Config
		wantCreated, wantIdleGone uint64
	}{
		{"config of a pool given back", func(t *testing.T) Config {
			p, err := New[*fakeConn](newFakeManager(), base)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			c := p.Config()
			if c.Clock != nil {
				t.Error("Config().Clock is set, want nil (each loop's clock)")
			}
			return c
		}, 2, 1},
		{"config clock over the loop's", func(*testing.T) Config {
			c := base
			c.Clock = func() time.Time { return start }
			return c
		}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New[*fakeConn](newFakeManager(), tt.cfg(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			now := start
			l := p.Local(movingClockLoop{newFakeLoop(newFakeClock()), &now})
			var got Lease[*fakeConn]
			done := func(ls Lease[*fakeConn], err error) { got = ls }
			l.Get(done)
			l.Put(got)
			now = now.Add(2 * time.Minute) // past the idle timeout by the loop's clock
			got = Lease[*fakeConn]{}
			l.Get(done)
			if !got.Lent() {
				t.Fatal("get not served")
			}
			if s := l.Statistics(); s.Created != tt.wantCreated || s.ClosedIdleTimeout != tt.wantIdleGone {
				t.Errorf("created %d, closed for idling %d; want %d and %d", s.Created, s.ClosedIdleTimeout, tt.wantCreated, tt.wantIdleGone)
			}
			l.Put(got)
		})
	}
}

// BenchmarkPublish is what a Local costs its loop per turn (Loop.OnPublish):
// a turn that served gets (two counters changed), and one that changed
// nothing (an idle pool: no store, the sequence untouched).
func BenchmarkPublish(b *testing.B) {
	p, err := New[*fakeConn](newFakeManager(), Config{ReapInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	l := p.Local(newFakeLoop(newFakeClock()))
	b.Run("changed", func(b *testing.B) {
		for b.Loop() {
			l.st.GetsDirect++
			l.st.WaitTime++
			l.publish()
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		for b.Loop() {
			l.publish()
		}
	})
}

// BenchmarkSnapshot is one Pool.Snapshot over four loops' Locals.
func BenchmarkSnapshot(b *testing.B) {
	p, err := New[*fakeConn](newFakeManager(), Config{ReapInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	for range 4 {
		p.Local(newFakeLoop(newFakeClock())).publish()
	}
	b.ReportAllocs()
	for b.Loop() {
		if st, _ := p.Snapshot(); st.Loops != 4 {
			b.Fatalf("%d loops", st.Loops)
		}
	}
}
