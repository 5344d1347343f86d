package pool

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// newTestPool builds a pool of fake connections for a test.
func newTestPool(t *testing.T, m *fakeManager, cfg Config) *Pool[*fakeConn] {
	t.Helper()
	if cfg.ReapInterval == 0 {
		cfg.ReapInterval = -1
	}
	p, err := New[*fakeConn](m, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// checkConservation checks created == closed + live, against the manager
// too.
func checkConservation(t *testing.T, st State, s Statistics, m *fakeManager) {
	t.Helper()
	if s.Created != s.Closed()+uint64(st.Connections) {
		t.Errorf("conservation: created %d != closed %d + live %d", s.Created, s.Closed(), st.Connections)
	}
	if m != nil {
		created, closed, open := m.counts()
		if uint64(created) != s.Created || uint64(closed) != s.Closed() || open != st.Connections {
			t.Errorf("manager: created %d closed %d open %d; pool: %d, %d, %d",
				created, closed, open, s.Created, s.Closed(), st.Connections)
		}
	}
}

func TestReuse(t *testing.T) {
	tests := []struct {
		name string
		mode fakeMode
		skip bool
	}{
		{"validate at once", answerAtOnce, false},
		{"validate later", answerPosted, false},
		{"no test on checkout", answerAtOnce, true},
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loop := startLoops(t, b, 1)[0]
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				m := newFakeManager()
				m.connectMode, m.validateMode = answerPosted, tt.mode
				p := newTestPool(t, m, Config{SkipTestOnCheckout: tt.skip})
				g := newGetter(t, p, loop)
				g.get(1)
				first := g.lease()
				firstConn := first.Conn()
				g.put(first)
				if first.Conn() != nil || first.Lent() {
					t.Errorf("a Lease put back still gives its connection")
				}
				g.get(1)
				second := g.lease()
				if firstConn != second.Conn() {
					t.Errorf("second get got connection %d, want the idle %d", second.Conn().id, firstConn.id)
				}
				g.put(second)
				st, s := g.state()
				if s.Created != 1 || s.GetsWaited != 1 || s.GetsDirect != 1 || st.Idle != 1 {
					t.Errorf("state %v; statistics %v", st, s)
				}
				checkConservation(t, st, s, m)
			})
		}
	})
}

func TestMaxSizeThenTimeout(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loop := startLoops(t, b, 1)[0]
		m := newFakeManager()
		m.connectMode = answerPosted
		p := newTestPool(t, m, Config{MaxSize: 2, ConnectionTimeout: 50 * time.Millisecond})
		g := newGetter(t, p, loop)
		g.get(3)
		a, c := g.lease(), g.lease()
		r := g.next()
		if r.lease.Lent() || !errors.Is(r.err, ErrTimeout) || !errors.Is(r.err, os.ErrDeadlineExceeded) {
			t.Fatalf("third get: %v, %v; want ErrTimeout", r.lease, r.err)
		}
		st, s := g.state()
		if st.Connections != 2 || st.Waiters != 0 || s.GetsTimedOut != 1 || s.Created != 2 {
			t.Errorf("state %v; statistics %v", st, s)
		}
		g.put(a)
		g.put(c)
		st, s = g.state()
		checkConservation(t, st, s, m)
	})
}

func TestBrokenIsDropped(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loop := startLoops(t, b, 1)[0]
		m := newFakeManager()
		p := newTestPool(t, m, Config{})
		g := newGetter(t, p, loop)
		g.get(1)
		ls := g.lease()
		broken := ls.Conn()
		pctest.OnLoop(t, loop, func() { broken.broken = true })
		g.put(ls)
		st, s := g.state()
		if st.Connections != 0 || s.ClosedBroken != 1 || !broken.closed {
			t.Errorf("after returning a broken connection: state %v; statistics %v", st, s)
		}
		g.get(1)
		if next := g.lease(); next.Conn() == broken {
			t.Error("a broken connection was lent again")
		} else {
			g.put(next)
		}
		// One that breaks while idle is dropped on checkout.
		var idle *fakeConn
		pctest.OnLoop(t, loop, func() { idle = g.local.idle[0].conn; idle.broken = true })
		g.get(1)
		if next := g.lease(); next.Conn() == idle {
			t.Error("a connection that broke while idle was lent")
		} else {
			g.put(next)
		}
		st, s = g.state()
		if s.ClosedBroken != 2 || s.Created != 3 {
			t.Errorf("statistics %v", s)
		}
		checkConservation(t, st, s, m)
	})
}

func TestFailedValidationReplaces(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loop := startLoops(t, b, 1)[0]
		for _, mode := range []fakeMode{answerAtOnce, answerPosted} {
			m := newFakeManager()
			m.validateMode = mode
			p := newTestPool(t, m, Config{MaxSize: 1})
			g := newGetter(t, p, loop)
			g.get(1)
			ls := g.lease()
			old := ls.Conn()
			g.put(ls)
			pctest.OnLoop(t, loop, func() { old.invalid = true })
			g.get(1)
			ls = g.lease()
			if ls.Conn() == old {
				t.Fatalf("mode %d: the connection that failed validation was lent", mode)
			}
			g.put(ls)
			st, s := g.state()
			if s.ClosedInvalid != 1 || s.Created != 2 || st.Connections != 1 {
				t.Errorf("mode %d: state %v; statistics %v", mode, st, s)
			}
			checkConservation(t, st, s, m)
		}
	})
}

func TestConnectErrorFreesSlot(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loop := startLoops(t, b, 1)[0]
		m := newFakeManager()
		m.connectMode, m.failConnects = answerPosted, true
		p := newTestPool(t, m, Config{MaxSize: 1, ConnectionTimeout: time.Minute})
		g := newGetter(t, p, loop)
		g.get(2) // the second waits for the first's slot
		for range 2 {
			if r := g.next(); !errors.Is(r.err, errRefused) {
				t.Fatalf("get: %v, %v; want the connect error at once", r.lease, r.err)
			}
		}
		st, s := g.state()
		if st.Connecting != 0 || st.Connections != 0 || s.ConnectErrors != 2 || s.GetsFailed != 2 {
			t.Errorf("state %v; statistics %v", st, s)
		}
		m.set(func(m *fakeManager) { m.failConnects = false })
		g.get(1)
		g.put(g.lease())
		st, s = g.state()
		checkConservation(t, st, s, m)
	})
}

func TestWarm(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loop := startLoops(t, b, 1)[0]
		m := newFakeManager()
		m.connectMode = answerPosted
		p := newTestPool(t, m, Config{MaxSize: 4, MinIdle: 3})
		g := newGetter(t, p, loop) // a new Local warms
		pctest.WaitFor(t, "3 idle connections", func() bool { st, _ := g.state(); return st.Idle == 3 })
		pctest.OnLoop(t, loop, g.local.Warm) // nothing to do
		st, s := g.state()
		if st.Connections != 3 || st.Connecting != 0 || s.Created != 3 {
			t.Errorf("state %v; statistics %v", st, s)
		}
		// MinIdle above MaxSize is clamped.
		p2 := newTestPool(t, newFakeManager(), Config{MaxSize: 2, MinIdle: 5})
		if got := p2.Config().MinIdle; got != 2 {
			t.Errorf("MinIdle 5 with MaxSize 2 resolved to %d", got)
		}
		g2 := newGetter(t, p2, loop)
		if st, _ := g2.state(); st.Idle != 2 {
			t.Errorf("clamped warm: %v", st)
		}
	})
}

func TestReapAndMaintain(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loop := startLoops(t, b, 1)[0]
		clock := newFakeClock()
		m := newFakeManager()
		p := newTestPool(t, m, Config{MaxSize: 4, MinIdle: 1, IdleTimeout: time.Minute,
			MaxLifetime: 5 * time.Minute, Clock: clock.Now})
		g := newGetter(t, p, loop)
		g.get(3)
		a, c, d := g.lease(), g.lease(), g.lease()
		g.put(a)
		g.put(c)
		clock.Advance(2 * time.Minute)
		pctest.OnLoop(t, loop, g.local.Maintain) // reap both idle, warm one
		st, s := g.state()
		if s.ClosedIdleTimeout != 2 || st.Idle != 1 || st.Connections != 2 {
			t.Errorf("after maintain: state %v; statistics %v", st, s)
		}
		clock.Advance(4 * time.Minute)
		g.put(d) // past max lifetime
		st, s = g.state()
		if s.ClosedMaxLifetime != 1 {
			t.Errorf("after returning an old connection: state %v; statistics %v", st, s)
		}
		checkConservation(t, st, s, m)
	})
}

func TestMaintainTimer(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loop := startLoops(t, b, 1)[0]
		clock := newFakeClock()
		m := newFakeManager()
		p := newTestPool(t, m, Config{MinIdle: 2, IdleTimeout: time.Minute,
			ReapInterval: 5 * time.Millisecond, Clock: clock.Now})
		g := newGetter(t, p, loop)
		if st, _ := g.state(); st.Idle != 2 {
			t.Fatalf("warm: %v", st)
		}
		clock.Advance(2 * time.Minute)
		pctest.WaitFor(t, "the maintenance timer to retire and refill", func() bool {
			st, s := g.state()
			return s.ClosedIdleTimeout == 2 && st.Idle == 2
		})
		st, s := g.state()
		checkConservation(t, st, s, m)
	})
}

func TestClear(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loop := startLoops(t, b, 1)[0]
		m := newFakeManager()
		p := newTestPool(t, m, Config{})
		g := newGetter(t, p, loop)
		g.get(3)
		a, c, d := g.lease(), g.lease(), g.lease()
		g.put(a)
		g.put(c)
		p.Clear()
		pctest.WaitFor(t, "Clear to close the idle connections", func() bool {
			_, s := g.state()
			return s.ClosedCleared == 2
		})
		g.put(d) // lent before the clear: closed on return
		st, s := g.state()
		if s.ClosedCleared != 3 || st.Connections != 0 {
			t.Errorf("state %v; statistics %v", st, s)
		}
		checkConservation(t, st, s, m)
	})
}

func TestCloseOnEveryLoop(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loops := startLoops(t, b, 2)
		m := newFakeManager()
		// A long timeout: the waiter must be woken by Close, not by it.
		p := newTestPool(t, m, Config{MaxSize: 1, ConnectionTimeout: time.Hour})
		g0, g1 := newGetter(t, p, loops[0]), newGetter(t, p, loops[1])
		g0.get(1)
		g0.put(g0.lease()) // idle on loop 0
		g1.get(2)          // loop 1: one lent, one waiting
		held := g1.lease()
		g1.none()

		start := time.Now()
		pctest.OnLoop(t, loops[0], func() { p.Close() }) // closed from another loop
		r := g1.next()
		if !errors.Is(r.err, ErrClosed) || !errors.Is(r.err, net.ErrClosed) {
			t.Fatalf("waiter on the other loop: %v, %v; want ErrClosed", r.lease, r.err)
		}
		t.Logf("waiter woken %v after Close", time.Since(start))

		pctest.WaitFor(t, "loop 0 to close its idle connection", func() bool {
			st, _ := g0.state()
			return st.Idle == 0
		})
		g0.get(1)
		if r := g0.next(); !errors.Is(r.err, ErrClosed) {
			t.Errorf("get after close: %v, %v", r.lease, r.err)
		}
		g1.put(held) // dropped
		pctest.OnLoop(t, loops[1], g1.local.Maintain)
		pctest.OnLoop(t, loops[1], g1.local.Warm)
		var st State
		var s Statistics
		for _, g := range []*getter{g0, g1} {
			gs, gst := g.state()
			st, s = st.Add(gs), s.Add(gst)
		}
		if st.Connections != 0 || s.ClosedOnClose != 2 || s.Created != 2 || s.GetsFailed != 2 {
			t.Errorf("after close: state %v; statistics %v", st, s)
		}
		checkConservation(t, st, s, m)
		if err := p.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

func TestFIFO(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		loop := startLoops(t, b, 1)[0]
		t.Run("three waiters in arrival order", func(t *testing.T) {
			p := newTestPool(t, newFakeManager(), Config{MaxSize: 1, ConnectionTimeout: time.Minute})
			g := newGetter(t, p, loop)
			g.get(1)
			ls := g.lease()
			order := make(chan int, 3)
			var served [3]Lease[*fakeConn]
			pctest.OnLoop(t, loop, func() {
				for i := range 3 {
					g.local.Get(func(l Lease[*fakeConn], err error) {
						if err != nil {
							t.Errorf("waiter %d: %v", i, err)
							return
						}
						served[i] = l
						order <- i
					})
				}
			})
			for want := range 3 {
				g.put(ls)
				got := pctest.Recv(t, order, fmt.Sprintf("service of waiter %d", want))
				if got != want {
					t.Fatalf("waiter %d served before waiter %d", got, want)
				}
				ls = served[got]
			}
			g.put(ls)
		})
		t.Run("no barging", func(t *testing.T) {
			p := newTestPool(t, newFakeManager(), Config{MaxSize: 1, ConnectionTimeout: time.Minute})
			g := newGetter(t, p, loop)
			g.get(2) // the second waits
			ls := g.lease()
			g.none()
			var late bool
			pctest.OnLoop(t, loop, func() {
				g.local.Put(ls) // goes to the waiter...
				g.local.Get(func(l Lease[*fakeConn], err error) { late = true; g.got <- result{l, err} })
			})
			first := g.lease() // ...the waiter's
			if first.e != ls.e {
				t.Fatal("the waiter did not get the returned connection")
			}
			pctest.OnLoop(t, loop, func() {
				if late {
					t.Error("a get that arrived behind a waiter was served first")
				}
			})
			g.put(first)
			g.put(g.lease()) // now the late get's
		})
	})
}

func TestStatisticsAndStop(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := startRuntime(t, b, 2)
		loops := rt.Loops()
		m := newFakeManager()
		p := newTestPool(t, m, Config{MaxSize: 2, ConnectionTimeout: 100 * time.Millisecond})
		for _, l := range loops {
			g := newGetter(t, p, l)
			g.get(3) // two connect, one times out
			a, c := g.lease(), g.lease()
			if r := g.next(); !errors.Is(r.err, ErrTimeout) {
				t.Fatalf("third get: %v", r.err)
			}
			g.put(a)
			g.get(1) // direct
			g.put(g.lease())
			pctest.OnLoop(t, l, func() { c.Conn().broken = true })
			g.put(c)
		}
		// The loops publish at the end of the turn that ran the last put.
		want := Statistics{GetsDirect: 2, GetsWaited: 4, GetsTimedOut: 2, Created: 4, ClosedBroken: 2}
		var st State
		var s Statistics
		pctest.WaitFor(t, "the loops to publish the last put", func() bool {
			st, s = p.Snapshot()
			s.WaitTime = 0
			return s == want
		})
		if st.Loops != 2 || st.Connections != 2 || st.Idle != 2 {
			t.Errorf("summed state %v, want 2 loops, 2 connections, both idle", st)
		}
		checkConservation(t, st, s, m)

		// Stopping the loops removes their Locals; the counters stay.
		rt.Close()
		if n := len(p.reg.Load().locals); n != 0 {
			t.Errorf("%d Locals left in the registry after the loops stopped", n)
		}
		st2, s2 := p.Snapshot()
		if s2.Created != 4 || s2.Closed() != 4 || s2.ClosedOnClose != 2 || st2 != (State{}) {
			t.Errorf("after stop: %v; %+v", st2, s2)
		}
	})
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		want    Config
		wantErr bool
	}{
		{"zero value is bb8's defaults", Config{}, Config{MaxSize: 10, ConnectionTimeout: 30 * time.Second,
			IdleTimeout: 10 * time.Minute, MaxLifetime: 30 * time.Minute, ReapInterval: 30 * time.Second}, false},
		{"never", Config{IdleTimeout: -1, MaxLifetime: -5, ReapInterval: -1, SkipTestOnCheckout: true},
			Config{MaxSize: 10, ConnectionTimeout: 30 * time.Second, IdleTimeout: -1, MaxLifetime: -1,
				ReapInterval: -1, SkipTestOnCheckout: true}, false},
		{"min idle clamped", Config{MaxSize: 3, MinIdle: 7}, Config{MaxSize: 3, MinIdle: 3,
			ConnectionTimeout: 30 * time.Second, IdleTimeout: 10 * time.Minute, MaxLifetime: 30 * time.Minute,
			ReapInterval: 30 * time.Second}, false},
		// The one rule: a negative limit or duration means none.
		{"negative max size is no limit", Config{MaxSize: -1}, Config{MaxSize: -1,
			ConnectionTimeout: 30 * time.Second, IdleTimeout: 10 * time.Minute, MaxLifetime: 30 * time.Minute,
			ReapInterval: 30 * time.Second}, false},
		{"negative min idle is none", Config{MinIdle: -1}, Config{MaxSize: 10,
			ConnectionTimeout: 30 * time.Second, IdleTimeout: 10 * time.Minute, MaxLifetime: 30 * time.Minute,
			ReapInterval: 30 * time.Second}, false},
		{"negative connection timeout is none", Config{ConnectionTimeout: -time.Second}, Config{MaxSize: 10,
			ConnectionTimeout: -1, IdleTimeout: 10 * time.Minute, MaxLifetime: 30 * time.Minute,
			ReapInterval: 30 * time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New[*fakeConn](newFakeManager(), tt.cfg)
			if tt.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := p.Config()
			got.Clock = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
	if _, err := New[*fakeConn](nil, Config{}); err == nil {
		t.Error("nil manager: no error")
	}
}

// TestStalePutIgnored: a Lease put back twice, the second time after its
// connection was lent again, must not return the connection out from under
// its new holder (issue 31: A gets and puts, B gets, A puts again, C gets:
// B and C held one connection).
func TestStalePutIgnored(t *testing.T) {
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprintf("skip test on checkout %v", skip), func(t *testing.T) {
			m := newFakeManager()
			p := newTestPool(t, m, Config{MaxSize: 2, SkipTestOnCheckout: skip})
			loop := newFakeLoop(newFakeClock())
			l := p.Local(loop)
			var got Lease[*fakeConn]
			done := func(ls Lease[*fakeConn], err error) {
				if err != nil {
					t.Fatal(err)
				}
				got = ls
			}
			l.Get(done)
			a := got
			l.Put(a)
			l.Get(done)
			b := got
			l.Put(a) // stale: b holds the connection now
			got = Lease[*fakeConn]{}
			l.Get(done)
			c := got
			if !c.Lent() {
				t.Fatal("the third get was not served")
			}
			if b.Conn() == c.Conn() {
				t.Fatalf("the stale Put gave B's connection %d to C too", b.Conn().id)
			}
			if st := l.State(); st.Connections != 2 || st.Idle != 0 {
				t.Errorf("state %+v, want 2 connections, none idle", st)
			}
			l.Put(b)
			l.Put(c)
			st, s := l.State(), l.Statistics()
			if st.Idle != 2 {
				t.Errorf("state %+v, want both idle", st)
			}
			checkConservation(t, st, s, m)
		})
	}
}
