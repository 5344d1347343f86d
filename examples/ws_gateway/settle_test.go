//go:build linux

package main

import (
	"bytes"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// TestReturnAfterStorm: -return-after keeps its meaning in the runtime's
// terms: 0 is never (negative there), and a count is the storm's size.
func TestReturnAfterStorm(t *testing.T) {
	for _, tt := range []struct {
		flag uint64
		want int
	}{
		{0, -1},
		{1, 1},
		{1000, 1000},
		{1 << 40, 1<<31 - 1},
	} {
		if got := returnAfterStorm(tt.flag); got != tt.want {
			t.Errorf("returnAfterStorm(%d) = %d; want %d", tt.flag, got, tt.want)
		}
	}
}

// TestShedLetsGoOfThePoolsSpares: when a loop sheds (as the return after
// a storm has it do before it collects), the loop's codec pool lets go of
// the buffer and side state a fragmented message left it, and the next
// fragmented message is echoed whole.
func TestShedLetsGoOfThePoolsSpares(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startGateway(t, b, nil)
		l := r.rt.Loops()[0]
		c, br := wsDial(t, r, "alice")
		msg := bytes.Repeat([]byte("fragment"), 64)
		echo := func(what string) {
			t.Helper()
			c.Write(append(frame(0x02, msg[:200], false), frame(0x80, msg[200:], false)...))
			op, p, err := readFrame(br)
			if err != nil || op != 0x2 || !bytes.Equal(p, msg) {
				t.Fatalf("%s: the echo of a fragmented message: op %#x, %d bytes, %v", what, op, len(p), err)
			}
		}
		spares := func() (bufs, sides int) {
			pctest.OnLoop(t, l, func() { bufs, sides = r.g.loops.Get(l).pool.Spares() })
			return bufs, sides
		}
		echo("before the shed")
		if bufs, sides := spares(); bufs == 0 || sides == 0 {
			t.Fatalf("after a fragmented message the pool keeps %d buffers and %d side states; want some of each", bufs, sides)
		}
		if err := l.ShedSpares(); err != nil {
			t.Fatal(err)
		}
		if bufs, sides := spares(); bufs != 0 || sides != 0 {
			t.Fatalf("after the loop shed the pool keeps %d buffers and %d side states; want none", bufs, sides)
		}
		echo("after the shed")
	})
}

// TestClientGoneMidMessageGivesBack: a client that goes away with a
// fragmented message partly sent leaves the loop's codec pool the side
// state and buffer its connection held (OnClose releases its ws.Conn),
// instead of leaving them to the collector.
func TestClientGoneMidMessageGivesBack(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startGateway(t, b, nil)
		l := r.rt.Loops()[0]
		spares := func() (bufs, sides int) {
			pctest.OnLoop(t, l, func() { bufs, sides = r.g.loops.Get(l).pool.Spares() })
			return bufs, sides
		}
		c, br := wsDial(t, r, "alice")
		bufs0, sides0 := spares()
		msg := bytes.Repeat([]byte("fragment"), 64)
		// The first fragment, then a ping: its pong says the fragment was read.
		c.Write(append(frame(0x02, msg[:200], false), frame(0x89, []byte("p"), false)...))
		if op, p, err := readFrame(br); err != nil || op != 0xa || string(p) != "p" {
			t.Fatalf("the pong between fragments: op %#x, %q, %v", op, p, err)
		}
		c.Close()
		pctest.WaitFor(t, "the client's close", func() bool { return r.rt.Stats().Open == 0 })
		if bufs, sides := spares(); sides != sides0+1 || bufs != bufs0+1 {
			t.Fatalf("after the client left mid-message the pool keeps %d buffers (%d before) and %d side states (%d before); want its buffer and side state back",
				bufs, bufs0, sides, sides0)
		}
	})
}
