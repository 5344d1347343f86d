package ws_test

import (
	"testing"

	"github.com/percore/percore/runtime/frame/ws"
)

// feed gives in to c in pieces of at most step bytes, as a connection's
// reads would (what Next leaves unconsumed is shown again with the next
// piece), and returns the messages and control frames it returned.
func feed(t *testing.T, c *ws.Conn, in []byte, step int) (events []ws.Event, msgs []string) {
	t.Helper()
	var held []byte
	for off := 0; off < len(in); {
		end := min(off+step, len(in))
		held = append(held, in[off:end]...)
		off = end
		for {
			n, ev, p, err := c.Next(held)
			held = held[n:]
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if ev == ws.NeedMore {
				break
			}
			events = append(events, ev)
			msgs = append(msgs, string(p))
		}
	}
	return events, msgs
}

// TestSideGivenBack: a Conn takes a side state only while a message is
// partly received or returned from a buffer, and gives it back once the
// message is whole and the next call came: between messages it holds none,
// however the input was cut (decision 0074).
func TestSideGivenBack(t *testing.T) {
	msg := jsonMessage(3000)
	ping := raw(0x89, true, []byte("p"))
	frag := append(raw(0x01, true, msg[:1000]), append(ping, raw(0x80, true, msg[1000:])...)...)
	cases := []struct {
		name    string
		deflate bool
		wire    func(c *ws.Conn) []byte // what the client sends
		want    int                     // events
	}{
		{"whole", false, func(c *ws.Conn) []byte { b, _ := c.AppendMessage(nil, ws.OpText, msg); return b }, 1},
		{"fragmented, a ping between", false, func(*ws.Conn) []byte { return frag }, 2},
		{"ping", false, func(*ws.Conn) []byte { return ping }, 1},
		{"compressed", true, func(c *ws.Conn) []byte { b, _ := c.AppendMessage(nil, ws.OpText, msg); return b }, 1},
	}
	for _, tc := range cases {
		for _, step := range []int{1 << 20, 1000, 7, 1} {
			d := ws.Deflate{Enabled: tc.deflate, Threshold: -1}
			s, c := pair(t, ws.Config{Deflate: d}, ws.Config{Deflate: d})
			wire := tc.wire(c)
			for round := range 3 {
				events, msgs := feed(t, s, append([]byte(nil), wire...), step)
				if len(events) != tc.want || (events[len(events)-1] != ws.Ping && msgs[len(msgs)-1] != string(msg)) {
					t.Fatalf("%s, pieces of %d, round %d: events %v", tc.name, step, round, events)
				}
				if _, _, _, err := s.Next(nil); err != nil { // the next call gives the buffer back
					t.Fatal(err)
				}
				if s.HoldsSide() || !s.Between() {
					t.Errorf("%s, pieces of %d, round %d: between messages, holds a side state %v, between %v", tc.name, step, round, s.HoldsSide(), s.Between())
				}
			}
		}
	}
}

// TestSideOnUse: a message whole in one frame and one input is returned
// as a slice of it and takes no side state; a compressed one is inflated
// into a buffer, held in a side state until the next call.
func TestSideOnUse(t *testing.T) {
	for _, deflate := range []bool{false, true} {
		d := ws.Deflate{Enabled: deflate, Threshold: -1}
		s, c := pair(t, ws.Config{Deflate: d}, ws.Config{Deflate: d})
		wire, _ := c.AppendMessage(nil, ws.OpText, jsonMessage(3000))
		if _, ev, _, err := s.Next(wire); err != nil || ev != ws.Text {
			t.Fatal(ev, err)
		}
		if s.HoldsSide() != deflate {
			t.Errorf("deflate=%v: holds a side state: %v", deflate, s.HoldsSide())
		}
		s.Next(nil)
		if s.HoldsSide() {
			t.Errorf("deflate=%v: holds a side state after the next call", deflate)
		}
	}
}

// TestSideKeepsFailure: a Conn that failed keeps failing, with or without
// a side state before the violation.
func TestSideKeepsFailure(t *testing.T) {
	for _, pre := range [][]byte{nil, raw(0x01, true, []byte("part"))} {
		s, _ := pair(t, ws.Config{}, ws.Config{})
		in := append(append([]byte(nil), pre...), 0x82|0x40, 0x80, 0, 0, 0, 0) // RSV2 set
		var err error
		for off := 0; err == nil && off <= len(in); {
			var n int
			var ev ws.Event
			n, ev, _, err = s.Next(in[off:])
			off += n
			if err == nil && ev == ws.NeedMore {
				t.Fatalf("prefix %d bytes: no error", len(pre))
			}
		}
		if _, _, _, again := s.Next(raw(0x82, true, []byte("x"))); again == nil || again.Error() != err.Error() {
			t.Errorf("prefix %d bytes: after %v, Next says %v", len(pre), err, again)
		}
		if s.Between() {
			t.Errorf("prefix %d bytes: a failed Conn is between messages", len(pre))
		}
	}
	// A compressed message that inflates past the limit fails after its
	// frame was whole: the failure must stay with the Conn all the same.
	d := ws.Deflate{Enabled: true, Threshold: -1}
	s, c := pair(t, ws.Config{Deflate: d, Limits: ws.Limits{MaxMessage: 100}}, ws.Config{Deflate: d})
	wire, _ := c.AppendMessage(nil, ws.OpBinary, make([]byte, 1000))
	if len(wire) > 100 {
		t.Fatalf("the compressed frame is %d bytes, over the limit itself", len(wire))
	}
	_, _, _, err := s.Next(wire)
	if err == nil {
		t.Fatal("a message inflating past the limit: no error")
	}
	ok, _ := c.AppendMessage(nil, ws.OpBinary, []byte("x"))
	if _, _, _, again := s.Next(ok); again == nil || again.Error() != err.Error() {
		t.Errorf("inflated past the limit: after %v, Next says %v", err, again)
	}
}

// TestSideCyclesAllocateNothing: once its Pool is warm, a message whose
// frame is cut across reads (the decoder's progress in a side state
// between them) allocates nothing.
func TestSideCyclesAllocateNothing(t *testing.T) {
	s, c := pair(t, ws.Config{}, ws.Config{})
	wire, _ := c.AppendMessage(nil, ws.OpBinary, jsonMessage(3000))
	buf := make([]byte, len(wire))
	run := func() {
		copy(buf, wire)
		n, ev, _, err := s.Next(buf[:1500])
		if err != nil || ev != ws.NeedMore {
			t.Fatal(ev, err)
		}
		if !s.HoldsSide() {
			t.Fatal("mid-frame without a side state")
		}
		if _, ev, _, err := s.Next(buf[n:]); err != nil || ev != ws.Binary {
			t.Fatal(ev, err)
		}
		s.Next(nil)
	}
	run()
	if n := testing.AllocsPerRun(200, run); n != 0 {
		t.Errorf("%v allocations per message cut in two", n)
	}
}
