package runtime

import (
	"slices"
	"testing"
	"time"
)

// sweepLog is a handler that logs its connections' OnShutdown and OnClose
// calls, by the order they opened.
type sweepLog struct {
	ids map[*Conn]int
	log *[]string
}

func (h sweepLog) id(c *Conn) int {
	if _, ok := h.ids[c]; !ok {
		h.ids[c] = len(h.ids)
	}
	return h.ids[c]
}

func (h sweepLog) OnData(*Conn, []byte) {}
func (h sweepLog) OnOpen(c *Conn)       { h.id(c) }
func (h sweepLog) OnShutdown(c *Conn)   { *h.log = append(*h.log, "shutdown "+string(rune('0'+h.id(c)))) }
func (h sweepLog) OnClose(c *Conn, _ error) {
	*h.log = append(*h.log, "close "+string(rune('0'+h.id(c))))
}
func (h sweepLog) done(log *[]string) func(*Conn, error) {
	return func(c *Conn, err error) {
		if err == nil {
			*log = append(*log, "dialed "+string(rune('0'+h.id(c))))
		}
	}
}

// A connection that reaches a loop after its graceful shutdown swept the
// open ones (accepted from a completion already on its way, handed over
// by another loop just before, or a dial that was connecting) is swept
// when it opens: OnShutdown, then closed once idle. One that never sends
// is closed after the new connection's grace, instead of holding the
// shutdown until its deadline.
func TestConnectionsOpenedAfterTheShutdownSweepAreSwept(t *testing.T) {
	var log []string
	h := sweepLog{ids: map[*Conn]int{}, log: &log}
	l, _, clock := newTestLoop(t, Config{}, h)
	l.lns[0].fd = fakeFd // closed by the shutdown: a number no test descriptor has
	l.startDial(fakeFd+1, h, &dialState{done: h.done(&log)}, nil)
	dialing := l.conns[0]

	l.beginShutdown()
	if len(log) != 0 {
		t.Fatalf("the sweep found %v, want nothing open", log)
	}
	l.acceptResult(fakeFd+2, 0, 0)      // 0: an accept already on its way
	l.adopt(fakeFd+3, l.lns[0].info, l) // 1: handed over before the shutdown
	l.connected(dialing, nil)           // 2: dialed, idle
	want := []string{"shutdown 0", "shutdown 1", "dialed 2", "shutdown 2", "close 2"}
	if !slices.Equal(log, want) {
		t.Fatalf("callbacks %v, want %v", log, want)
	}
	if l.open != 2 {
		t.Fatalf("%d connections open, want the 2 accepted ones until their first request or the grace", l.open)
	}
	tick(l, clock, newConnGrace)
	want = append(want, "close 0", "close 1")
	if !slices.Equal(log, want) || l.open != 0 {
		t.Fatalf("after the grace: callbacks %v, %d open; want %v, none", log, l.open, want)
	}
}

// A lingering close (Conn.CloseLinger) sends the queue, shuts the write
// side down, reads and discards until the peer ends its stream or a bound
// (time, bytes) is reached, and then closes, with nil. Reading that the
// handler paused resumes, to discard.
func TestCloseLinger(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		end   func(l *Loop, c *Conn, clock *fakeClock) // what ends the lingering
		bytes int                                      // discarded in all
	}{
		{"the peer ends its stream", Config{}, func(l *Loop, c *Conn, _ *fakeClock) {
			l.received(c, make([]byte, 100))
			l.peerEOF(c)
		}, 100},
		{"the time bound", Config{LingerInput: time.Second}, func(l *Loop, c *Conn, clock *fakeClock) {
			l.received(c, make([]byte, 100))
			tick(l, clock, time.Second)
		}, 100},
		{"the byte bound", Config{LingerInputBytes: 1000}, func(l *Loop, c *Conn, _ *fakeClock) {
			l.received(c, make([]byte, 600))
			if c.closed() {
				t.Fatal("closed before its byte bound")
			}
			l.received(c, make([]byte, 600))
		}, 1200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var closeErr []error
			h := &lingerHandler{closed: &closeErr}
			l, d, clock := newTestLoop(t, tc.cfg, h)
			l.acceptResult(fakeFd, 0, 0)
			c := l.conns[0]
			l.safely("test", func() {
				c.PauseRead()
				c.Write([]byte("431 too large"))
				c.CloseLinger()
			})
			if c.closed() || c.Buffered() == 0 || slices.Contains(d.calls, "shutdownWrite") {
				t.Fatalf("before the queue is sent: closed %v, %d queued, driver %v", c.closed(), c.Buffered(), d.calls)
			}
			d.take = -1
			d.flush(c)
			if c.closed() || !slices.Contains(d.calls, "shutdownWrite") || !slices.Contains(d.calls, "resumeRead") || c.readPaused() {
				t.Fatalf("once sent: closed %v, driver %v, paused %v; want open, write side shut, reading", c.closed(), d.calls, c.readPaused())
			}
			if _, err := c.Write([]byte("x")); err == nil {
				t.Fatal("a write after CloseLinger succeeded")
			}
			tc.end(l, c, clock)
			if !c.closed() || len(closeErr) != 1 || closeErr[0] != nil {
				t.Fatalf("closed %v, OnClose %v; want closed once with nil", c.closed(), closeErr)
			}
			if h.data != 0 || l.cnt[sLingerDiscarded] != uint64(tc.bytes) {
				t.Fatalf("OnData saw %d bytes, %d discarded; want none, %d", h.data, l.cnt[sLingerDiscarded], tc.bytes)
			}
		})
	}
}

type lingerHandler struct {
	data   int
	closed *[]error
}

func (h *lingerHandler) OnData(_ *Conn, data []byte) { h.data += len(data) }
func (h *lingerHandler) OnClose(_ *Conn, err error)  { *h.closed = append(*h.closed, err) }
