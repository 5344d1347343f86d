package runtime

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// These tests drive a loop's own logic (timers, accept holds and back-off,
// the queue, the order of callbacks) with a fake driver and a fake clock:
// no kernel, so they run where io_uring cannot.

// fakeDriver records what the loop asks of it and lets a test play the
// kernel's part.
type fakeDriver struct {
	l     *Loop
	calls []string
	// writeErr, when set, fails the next write as the kernel would.
	writeErr error
	// take is how many bytes a write hands to the kernel (-1: all).
	take int
}

func (d *fakeDriver) log(s string) { d.calls = append(d.calls, s) }

func (d *fakeDriver) listen(int, int) error          { return nil }
func (d *fakeDriver) listenPacket(*PacketConn) error { return nil }
func (d *fakeDriver) packetRoom(*PacketConn) int     { return 0 }
func (d *fakeDriver) writeTo(*PacketConn, []byte, *unix.RawSockaddrInet6, uint32, int, int) error {
	return nil
}
func (d *fakeDriver) stopListening()                  { d.log("stopListening") }
func (d *fakeDriver) pauseAccept()                    { d.log("pauseAccept") }
func (d *fakeDriver) resumeAccept()                   { d.log("resumeAccept") }
func (d *fakeDriver) start(*Conn) error               { return nil }
func (d *fakeDriver) pauseRead(*Conn)                 { d.log("pauseRead") }
func (d *fakeDriver) resumeRead(*Conn)                { d.log("resumeRead") }
func (d *fakeDriver) inputHeld(*Conn) (bool, bool)    { return false, false }
func (d *fakeDriver) shutdownWrite(*Conn)             { d.log("shutdownWrite") }
func (d *fakeDriver) release(c *Conn)                 { c.fd = -1; d.l.freeSlot(c) }
func (d *fakeDriver) connect(*Conn, *dialState) error { return nil }
func (d *fakeDriver) descriptor(c *Conn) (int, error) { return int(c.fd), nil }
func (d *fakeDriver) prepare()                        {}
func (d *fakeDriver) enter(time.Duration) error       { return nil }
func (d *fakeDriver) dispatch()                       {}
func (d *fakeDriver) submit()                         {}
func (d *fakeDriver) discardBuffers() bool            { return true }
func (d *fakeDriver) idle() bool                      { return true }
func (d *fakeDriver) wake()                           {}
func (d *fakeDriver) wakeAnyway()                     {}
func (d *fakeDriver) wakeFrom(driver) bool            { return true }
func (d *fakeDriver) syscalls() uint64                { return 0 }
func (d *fakeDriver) waits() uint64                   { return 0 }
func (d *fakeDriver) close() error                    { return nil }
func (d *fakeDriver) fileStart(op *fileOp) error      { d.l.offload(op); return nil }
func (d *fakeDriver) sendFile(c *Conn)                { d.l.fileSent(c, 0, errSendUnsupported) }

func (d *fakeDriver) write(c *Conn, p []byte) {
	if d.writeErr != nil {
		d.l.fail(c, "write", d.writeErr)
		return
	}
	c.outw().add(d.l, p)
	if d.take != 0 {
		d.flush(c)
	}
}

func (d *fakeDriver) committed(c *Conn) {
	if d.take != 0 {
		d.flush(c)
	}
}

func (d *fakeDriver) writev(c *Conn, bufs [][]byte) {
	for _, b := range bufs {
		d.write(c, b)
	}
}

// flush hands the kernel what the driver takes of c's queue.
func (d *fakeDriver) flush(c *Conn) {
	for p := c.out.pending(); len(p) > 0; p = c.out.pending() {
		n := len(p)
		if d.take > 0 {
			n = min(n, d.take)
		}
		if !d.l.sendResult(c, n, nil) {
			return
		}
	}
}

// fakeClock is a loop's clock that moves only when the test says.
type fakeClock struct{ now time.Time }

func (c *fakeClock) advance(d time.Duration) { c.now = c.now.Add(d) }

func newTestLoop(t *testing.T, cfg Config, h Handler) (*Loop, *fakeDriver, *fakeClock) {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg = cfg.withDefaults()
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	l := newLoop(cfg, 0, 0, h, func() time.Time { return clock.now })
	d := &fakeDriver{l: l}
	l.d = d
	l.now = clock.now
	// One stream listener, never used but as "listening" (descriptor 3).
	l.lns = []*loopListener{{info: &Listener{Network: "tcp"}, fd: 3}}
	l.streams = 1
	t.Cleanup(l.bufs.releaseAll)
	return l, d, clock
}

// tick moves the clock and runs a turn's timers.
func tick(l *Loop, c *fakeClock, d time.Duration) {
	c.advance(d)
	l.now = c.now
	l.runTimers()
}

func TestTimersRunInOrderAndInSlices(t *testing.T) {
	l, _, clock := newTestLoop(t, Config{}, nil)
	var ran []int
	for i := range 300 {
		l.AfterFunc(time.Duration(300-i)*time.Millisecond, func() { ran = append(ran, 300-i) })
	}
	stopped := l.AfterFunc(time.Millisecond, func() { t.Error("a stopped timer ran") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop did not report pending, then not pending")
	}
	reset := l.AfterFunc(time.Hour, func() { ran = append(ran, 1000) })
	reset.Reset(time.Second + time.Millisecond)

	tick(l, clock, time.Second)
	if len(ran) != timersPerTurn {
		t.Fatalf("one turn ran %d expired timers, want a slice of %d", len(ran), timersPerTurn)
	}
	l.runTimers() // the next turn runs the rest
	if len(ran) != 300 || !slices.IsSorted(ran) {
		t.Fatalf("ran %d timers, sorted %v", len(ran), slices.IsSorted(ran))
	}
	tick(l, clock, 2*time.Millisecond)
	if ran[len(ran)-1] != 1000 {
		t.Error("a reset timer did not run at its new time")
	}
}

// Timers due at the same time run in the order they were scheduled, also
// when they are scheduled while others run and when some are stopped or
// reset among them (the file operations' results, which arrive as
// AfterFunc(0), depend on it).
func TestTimersWithEqualDeadlinesRunInOrder(t *testing.T) {
	l, _, clock := newTestLoop(t, Config{}, nil)
	var ran []int
	var want []int
	timers := make([]*Timer, 100)
	for i := range 100 {
		timers[i] = l.AfterFunc(0, func() { ran = append(ran, i) })
	}
	for i := 0; i < 100; i += 7 {
		timers[i].Stop()
	}
	for i := 3; i < 100; i += 11 {
		timers[i].Reset(0) // to the back of the line
	}
	for i := range 100 {
		if i%7 != 0 && (i < 3 || (i-3)%11 != 0) {
			want = append(want, i)
		}
	}
	for i := 3; i < 100; i += 11 {
		want = append(want, i) // stopped or not, Reset schedules it
	}
	tick(l, clock, 0)
	if !slices.Equal(ran, want) {
		t.Fatalf("ran %v\nwant %v", ran, want)
	}
}

func TestAcceptBackoffEpisode(t *testing.T) {
	l, d, clock := newTestLoop(t, Config{}, nil)
	waiting := true
	l.accept.waiting = func(int) bool { return waiting }

	// Out of descriptors with a connection waiting: hold accepting for
	// 10 ms, then 20 ms.
	if got := l.acceptResult(-1, unix.EMFILE, 0); got != acceptHeld {
		t.Fatalf("outcome %v, want held", got)
	}
	if !slices.Equal(d.calls, []string{"pauseAccept"}) || l.accepting() {
		t.Fatalf("calls %v, accepting %v", d.calls, l.accepting())
	}
	tick(l, clock, 9*time.Millisecond)
	if l.accepting() {
		t.Fatal("resumed before the 10 ms back-off")
	}
	tick(l, clock, time.Millisecond)
	if !l.accepting() || d.calls[len(d.calls)-1] != "resumeAccept" {
		t.Fatalf("not resumed after the back-off: %v", d.calls)
	}
	l.acceptResult(-1, unix.EMFILE, 0)
	if l.accept.backoff != 20*time.Millisecond || l.cnt[sAcceptErrors] != 2 {
		t.Fatalf("back-off %v, errors %d; want 20ms and 2", l.accept.backoff, l.cnt[sAcceptErrors])
	}

	// With nobody waiting, a full descriptor table is no failure.
	tick(l, clock, 20*time.Millisecond)
	waiting = false
	if got := l.acceptResult(-1, unix.EMFILE, 0); got != acceptIdle || l.cnt[sAcceptErrors] != 2 {
		t.Fatalf("outcome %v, errors %d; want idle and no new error", got, l.cnt[sAcceptErrors])
	}
	// One connection's own error is skipped.
	if got := l.acceptResult(-1, unix.ECONNABORTED, 0); got != acceptNext {
		t.Fatalf("ECONNABORTED: outcome %v", got)
	}

	// A success restarts the back-off; the episode ends after a quiet
	// second.
	if got := l.acceptResult(fakeFd, 0, 0); got != acceptNext || l.accept.backoff != 0 {
		t.Fatalf("success: outcome %v, back-off %v", got, l.accept.backoff)
	}
	tick(l, clock, acceptQuiet)
	if l.accept.errs != 0 {
		t.Errorf("the episode did not end after a quiet %v", acceptQuiet)
	}
}

func TestAcceptHoldsAtTheCap(t *testing.T) {
	l, d, _ := newTestLoop(t, Config{MaxConns: 2}, HandlerFunc(func(*Conn, []byte) {}))
	l.acceptResult(fakeFd, 0, 0)
	if got := l.acceptResult(fakeFd+1, 0, 0); got != acceptHeld {
		t.Fatalf("at the cap: outcome %v, want held", got)
	}
	if !slices.Equal(d.calls, []string{"pauseAccept"}) || l.cnt[sCapHolds] != 1 {
		t.Fatalf("calls %v, cap holds %d", d.calls, l.cnt[sCapHolds])
	}
	l.closeConn(l.conns[0], nil)
	if !l.accepting() || d.calls[len(d.calls)-1] != "resumeAccept" {
		t.Fatalf("below the cap again: calls %v", d.calls)
	}
}

// order is a handler that logs its callbacks.
type order struct {
	log    *[]string
	onData func(c *Conn)
}

func (h order) OnData(c *Conn, _ []byte) {
	*h.log = append(*h.log, "OnData begins")
	h.onData(c)
	*h.log = append(*h.log, "OnData returns")
}
func (h order) OnClose(*Conn, error) { *h.log = append(*h.log, "OnClose") }
func (h order) OnDrain(*Conn)        { *h.log = append(*h.log, "OnDrain") }

// TestCallbacksRunAfterTheirCause: OnClose and OnDrain never run inside the
// callback whose write or close caused them.
func TestCallbacksRunAfterTheirCause(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    Config
		onData func(d *fakeDriver) func(c *Conn)
		want   []string
	}{
		{"close", Config{}, func(*fakeDriver) func(c *Conn) { return func(c *Conn) { c.Close() } },
			[]string{"OnData begins", "OnData returns", "OnClose"}},
		{"failed write", Config{}, func(d *fakeDriver) func(c *Conn) {
			return func(c *Conn) { d.writeErr = unix.EPIPE; c.Write([]byte("x")) }
		}, []string{"OnData begins", "OnData returns", "OnClose"}},
		{"slow consumer", Config{MaxOutbound: 4, OutboundPolicy: CloseSlowConsumer}, func(*fakeDriver) func(c *Conn) {
			return func(c *Conn) { c.Write([]byte("too much")) }
		}, []string{"OnData begins", "OnData returns", "OnClose"}},
		{"drain", Config{MaxOutbound: 4, OutboundLowWater: 1}, func(d *fakeDriver) func(c *Conn) {
			return func(c *Conn) {
				c.Write([]byte("over the cap"))
				d.take = -1
				d.flush(c) // the kernel takes it all before OnData returns
			}
		}, []string{"OnData begins", "OnData returns", "OnDrain"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			l, d, _ := newTestLoop(t, tc.cfg, nil)
			l.h = order{log: &got, onData: tc.onData(d)}
			l.acceptResult(fakeFd, 0, 0)
			l.received(l.conns[0], []byte("request"))
			if !slices.Equal(got, tc.want) {
				t.Errorf("callbacks %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQueueDrainsInOrderWithoutMovingBytes(t *testing.T) {
	l, _, _ := newTestLoop(t, Config{MaxOutbound: -1}, HandlerFunc(func(*Conn, []byte) {}))
	l.acceptResult(fakeFd, 0, 0)
	c := l.conns[0]
	var want []byte
	for i := range 100 {
		p := []byte(strings.Repeat(string(rune('a'+i%26)), 1000+i))
		want = append(want, p...)
		c.Write(p)
	}
	if c.Buffered() != len(want) {
		t.Fatalf("buffered %d, want %d", c.Buffered(), len(want))
	}
	var sent []byte
	for c.Buffered() > 0 {
		p := c.out.pending()
		n := min(len(p), 4096)
		sent = append(sent, p[:n]...)
		l.sendResult(c, n, nil)
		if rest := c.out.pending(); n < len(p) && &rest[0] != &p[n] {
			t.Fatal("the queue moved its bytes after a short send")
		}
	}
	if string(sent) != string(want) {
		t.Fatal("the queue sent its bytes out of order")
	}
}

func TestStatsSnapshotIsConsistent(t *testing.T) {
	l, _, _ := newTestLoop(t, Config{}, HandlerFunc(func(*Conn, []byte) {}))
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if s := l.Stats(); s.Accepts-s.Closes != s.Open {
				done <- errors.New("a snapshot mixed two turns")
				return
			}
		}
	}()
	for range 20000 {
		l.acceptResult(fakeFd, 0, 0)
		l.publish()
		l.closeConn(l.conns[0], nil)
		l.publish()
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// fakeFd is a descriptor number past any limit: a call on it fails with
// EBADF and touches nothing.
const fakeFd = 1 << 24
