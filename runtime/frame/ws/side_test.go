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

// TestReleaseMidMessage: a Conn gone mid-message (a fragmented message
// partly received, a frame cut in its payload) holds a side state and a
// buffer of its Pool, one failed by a protocol error its side state (the
// buffer went back at the failure); Release gives them back, so that the
// next Conn of the Pool takes them instead of allocating, and the
// released Conn decodes nothing more. A Conn between messages releases
// nothing, and releasing twice gives nothing back twice.
func TestReleaseMidMessage(t *testing.T) {
	msg := jsonMessage(3000)
	cases := []struct {
		name string
		wire []byte
		fail bool
	}{
		{"fragmented, first part in", raw(0x01, true, msg[:1500]), false},
		{"a frame cut in its payload", raw(0x81, true, msg)[:2000], false},
		{"failed: a reserved bit", append(raw(0x01, true, msg[:1500]), raw(0xc0, true, msg[1500:])...), true},
	}
	for _, tc := range cases {
		ss, _, sp := pairsOnPools(t, 3, ws.Config{}, ws.Config{})
		sides, bufs := sp.SpareSides(), sp.FreeBuffers()
		_, _, _, err := ss[0].Next(tc.wire)
		if (err != nil) != tc.fail {
			t.Fatalf("%s: Next: %v", tc.name, err)
		}
		if !ss[0].HoldsSide() {
			t.Fatalf("%s: holds no side state mid-message", tc.name)
		}
		if tc.fail && sp.FreeBuffers() != bufs+1 {
			t.Fatalf("%s: the failure kept the message's buffer", tc.name)
		}
		ss[0].Release()
		ss[0].Release()
		if ss[0].HoldsSide() {
			t.Fatalf("%s: holds a side state after Release", tc.name)
		}
		wantBufs := bufs + 1 // the message's buffer, given back by Release or by the failure
		if sp.SpareSides() != sides+1 || sp.FreeBuffers() != wantBufs {
			t.Fatalf("%s: after Release, %d spare sides (from %d), %d free buffers (from %d); want one side back and %d buffers",
				tc.name, sp.SpareSides(), sides, sp.FreeBuffers(), bufs, wantBufs)
		}
		// The released Conn reads nothing more: a whole message is not
		// decoded (it would be parsed from the middle of the last frame).
		whole := raw(0x81, true, []byte("hi"))
		if n, ev, _, err := ss[0].Next(whole); n != len(whole) || ev != ws.NeedMore || err != nil {
			t.Fatalf("%s: Next after Release: %d, %v, %v; want the input discarded", tc.name, n, ev, err)
		}
		// The next Conn of the Pool takes the side state, and decodes
		// correctly.
		first, rest := raw(0x01, true, msg[:1000]), raw(0x80, true, msg[1000:])
		if n, ev, _, err := ss[1].Next(first); n != len(first) || ev != ws.NeedMore || err != nil {
			t.Fatalf("%s: the next Conn's first fragment: %d, %v, %v", tc.name, n, ev, err)
		}
		if sp.SpareSides() != sides {
			t.Fatalf("%s: the next Conn did not take the side state given back (%d spare, %d before)", tc.name, sp.SpareSides(), sides)
		}
		if events, msgs := feed(t, ss[1], rest, 700); len(events) != 1 || msgs[0] != string(msg) {
			t.Fatalf("%s: the next Conn got %v", tc.name, events)
		}
		// Between messages a Conn holds nothing: Release gives nothing.
		before := sp.SpareSides()
		ss[2].Release()
		if sp.SpareSides() != before {
			t.Fatalf("%s: a Conn between messages gave back a side state", tc.name)
		}
	}
}
