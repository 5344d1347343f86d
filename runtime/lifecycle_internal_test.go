package runtime

import (
	"slices"
	"testing"
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
