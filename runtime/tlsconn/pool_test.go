package tlsconn_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/runtime/tlsconn"
)

// TestPoolBounds: at most MaxHandshakes run, MaxQueued wait, the rest are
// refused at once; a queued one runs when a place frees; the counters add
// up (every session that began ends exactly once).
func TestPoolBounds(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{MaxHandshakes: 2, MaxQueued: 1, Timeout: time.Hour})
	// Client sessions start at once and wait for a ServerHello that never
	// comes: they hold their places.
	var mu sync.Mutex
	notified := map[int]int{}
	mk := func(i int) *tlsconn.Session {
		return tlsconn.Client(clientConfig(t), tlsconn.Options{Pool: pool, Notify: func() {
			mu.Lock()
			notified[i]++
			mu.Unlock()
		}})
	}
	ss := []*tlsconn.Session{mk(0), mk(1), mk(2), mk(3)}
	defer func() {
		for _, s := range ss {
			s.Close()
		}
	}()
	if st := pool.Stats(); st.Running != 2 || st.Queued != 1 || st.Rejected != 1 {
		t.Fatalf("stats %+v, want 2 running, 1 queued, 1 rejected", st)
	}
	if done, err := ss[3].HandshakeDone(); !done || !errors.Is(err, tlsconn.ErrPoolFull) {
		t.Fatalf("fourth session: done %v, %v; want ErrPoolFull", done, err)
	}
	// Closing a running one lets the queued one run (it writes its
	// ClientHello, so it notifies).
	ss[0].Close()
	waitFor(t, "the queued handshake to run", func() bool {
		st := pool.Stats()
		mu.Lock()
		defer mu.Unlock()
		return st.Queued == 0 && st.Running == 2 && notified[2] > 0
	})
	// Closing a queued one leaves the queue.
	extra := mk(4)
	if st := pool.Stats(); st.Queued != 1 {
		t.Fatalf("stats %+v, want 1 queued", st)
	}
	extra.Close()
	if st := pool.Stats(); st.Queued != 0 {
		t.Fatalf("stats %+v after closing the queued session", st)
	}
	for _, s := range ss {
		s.Close()
	}
	waitFor(t, "every handshake to end", func() bool { return pool.Stats().Running == 0 })
	st := pool.Stats()
	if st.Started != 3 || st.Started != st.Succeeded+st.Failed+st.TimedOut {
		t.Fatalf("stats %+v: started != ended", st)
	}
}

// TestPoolClose: a closed pool fails the queued handshakes, ends the
// running ones, and refuses new ones.
func TestPoolClose(t *testing.T) {
	pool := tlsconn.NewPool(tlsconn.PoolConfig{MaxHandshakes: 1, Timeout: time.Hour})
	a := tlsconn.Client(clientConfig(t), tlsconn.Options{Pool: pool})
	b := tlsconn.Client(clientConfig(t), tlsconn.Options{Pool: pool})
	pool.Close()
	for i, s := range []*tlsconn.Session{a, b} {
		done, err := s.HandshakeDone()
		if !done || err == nil {
			t.Fatalf("session %d: done %v, %v after Close", i, done, err)
		}
	}
	if _, err := b.HandshakeDone(); !errors.Is(err, tlsconn.ErrPoolClosed) {
		t.Fatalf("queued session: %v, want ErrPoolClosed", err)
	}
	c := tlsconn.Client(clientConfig(t), tlsconn.Options{Pool: pool})
	if _, err := c.HandshakeDone(); !errors.Is(err, tlsconn.ErrPoolClosed) {
		t.Fatalf("new session: %v, want ErrPoolClosed", err)
	}
}

// TestHandshakeStorm: many handshakes at once through a small pool, while
// the loop keeps serving an established connection: every handshake
// succeeds and never more than MaxHandshakes run. (How long the loop's
// turns take meanwhile is a measurement, TestStormTurns, not asserted.)
func TestHandshakeStorm(t *testing.T) {
	const max, n = 4, 200
	// The pool's threads keep their priority: the test's 200 clients
	// compute their own halves of the handshakes in this process, at
	// normal priority, and would leave lowered server threads a sliver.
	pool := newPool(t, tlsconn.PoolConfig{MaxHandshakes: max, MaxQueued: n, Sched: tlsconn.SchedNormal})
	l := newEloop(t, serverConfig(t), pool)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	peak := 0
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() { // sample the pool's bound
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if r := pool.Stats().Running; r > peak {
				peak = r
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialTLS(l.addr, clientConfig(t))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			if err := exchange(c, []byte{byte(i)}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if peak > max {
		t.Fatalf("%d handshakes ran at once, bound %d", peak, max)
	}
	if st := pool.Stats(); st.Succeeded != n {
		t.Fatalf("stats %+v", st)
	}
}

// TestStatsCountedBeforeNotify: the Notify that tells the loop a
// handshake ended comes after the pool counted it, so that a loop that
// has seen the end finds it in Stats (TestGarbageInsteadOfClientHello
// once saw Running 1 after the end).
func TestStatsCountedBeforeNotify(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{Timeout: time.Hour})
	stats := make(chan tlsconn.PoolStats, 4)
	srv := tlsconn.Server(serverConfig(t), tlsconn.Options{Pool: pool, Notify: func() { stats <- pool.Stats() }})
	defer srv.Close()
	if _, err := srv.Decrypt(nil, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-stats:
		if st.Running != 0 || st.Failed != 1 {
			t.Fatalf("stats at Notify %+v, want the handshake counted (0 running, 1 failed)", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no Notify")
	}
	if done, err := srv.HandshakeDone(); !done || err == nil {
		t.Fatalf("handshake done %v, %v; want a failure", done, err)
	}
}
