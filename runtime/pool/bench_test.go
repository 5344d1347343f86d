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
		name string
		cfg  Config
	}{
		{"defaults", Config{}}, // validate at once, idle timeout and max lifetime on
		{"no test on checkout", Config{SkipTestOnCheckout: true}},
		{"no expiry, no test", Config{SkipTestOnCheckout: true, IdleTimeout: -1, MaxLifetime: -1}},
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
			l := p.Local(loop)
			var got *Lease[*fakeConn]
			done := func(ls *Lease[*fakeConn], err error) { got = ls }
			l.Get(done) // opens the connection
			l.Put(got)
			b.ReportAllocs()
			for b.Loop() {
				got = nil
				l.Get(done)
				if got == nil {
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

// TestGetPutAllocatesNothing pins the fast path's allocation count.
func TestGetPutAllocatesNothing(t *testing.T) {
	m := newFakeManager()
	p, err := New[*fakeConn](m, Config{ReapInterval: -1, Clock: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	loop := newFakeLoop(newFakeClock())
	l := p.Local(loop)
	var got *Lease[*fakeConn]
	done := func(ls *Lease[*fakeConn], err error) { got = ls }
	l.Get(done)
	l.Put(got)
	if n := testing.AllocsPerRun(1000, func() { l.Get(done); l.Put(got) }); n != 0 {
		t.Errorf("get+put allocates %v times", n)
	}
}
