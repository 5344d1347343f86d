package ws_test

import (
	"testing"

	"github.com/percore/percore/runtime/frame/ws"
)

// TestPoolShed: Pool.Shed lets go of the pool's spare buffers and side
// states, also while a Conn is mid-message; that Conn's message still
// arrives whole, and the pool keeps spares again once its Conns give them
// back.
func TestPoolShed(t *testing.T) {
	msg := jsonMessage(3000)
	wire := append(raw(0x01, true, msg[:1000]), raw(0x80, true, msg[1000:])...)
	ss, _, sp := pairsOnPools(t, 2, ws.Config{}, ws.Config{})
	spares := func(what string, want bool) {
		t.Helper()
		bufs, sides := sp.Spares()
		if some, none := bufs > 0 && sides > 0, bufs == 0 && sides == 0; want && !some || !want && !none {
			t.Fatalf("%s: the pool keeps %d buffers and %d side states; want spares %v", what, bufs, sides, want)
		}
	}
	// A message in pieces takes a side state and a buffer, given back
	// at the call after it.
	whole := func(s *ws.Conn, what string) {
		t.Helper()
		_, msgs := feed(t, s, append([]byte(nil), wire...), 700)
		if len(msgs) != 1 || msgs[0] != string(msg) {
			t.Fatalf("%s: got %d messages; want the one sent", what, len(msgs))
		}
		if _, _, _, err := s.Next(nil); err != nil {
			t.Fatal(err)
		}
	}
	whole(ss[0], "before the shed")
	spares("after a message in pieces", true)
	sp.Shed()
	spares("after Shed", false)

	// Shed while a Conn is mid-message: its side state and buffer are
	// its own, and its message arrives whole.
	half := append([]byte(nil), wire[:1500]...)
	n, ev, _, err := ss[1].Next(half)
	if err != nil || ev != ws.NeedMore {
		t.Fatalf("half a message: %v %v", ev, err)
	}
	sp.Shed()
	rest := append(half[n:], wire[1500:]...)
	_, msgs := feed(t, ss[1], rest, len(rest))
	if len(msgs) != 1 || msgs[0] != string(msg) {
		t.Fatalf("a message across a Shed: got %d messages; want the one sent", len(msgs))
	}
	if _, _, _, err := ss[1].Next(nil); err != nil {
		t.Fatal(err)
	}
	spares("after a message across a Shed", true)
	whole(ss[0], "after the sheds")
	spares("after the sheds and a message in pieces", true)
}
