//go:build linux

package runtime_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// The claims of the accepts armed into the direct descriptor table: an
// idle listener's accept, armed while the table had room, must not keep
// the last free slots from a busy listener (the review of the claims:
// the busy listener's connections waited in its backlog, with slots free,
// until a close).

// twoListenersOneTable starts one loop with two listeners accepting into
// a table of slots with the margin given (-2: the default).
func twoListenersOneTable(t *testing.T, slots, margin int) (*percore.Runtime, []*percore.Listener) {
	t.Helper()
	f := needDirect(t)
	cfg := percore.FixedTable(percore.Config{Backend: percore.IOURing, UringFeatures: f,
		Addr: "127.0.0.1:0", Listen: []string{"127.0.0.1:0"}}, slots, margin)
	rt := start(t, cfg, slotEcho{})
	lns := rt.Listeners()
	if len(lns) != 2 {
		t.Fatalf("%d listeners, want 2", len(lns))
	}
	return rt, lns
}

// echoOn dials listener ln, writes one byte and reads its echo; the read
// deadline only bounds a failure.
func echoOn(t *testing.T, rt *percore.Runtime, ln *percore.Listener, what string, b byte) net.Conn {
	t.Helper()
	c := pctest.Dial(t, ln.Addr.String())
	if _, err := c.Write([]byte{b}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 1)
	if _, err := io.ReadFull(c, got); err != nil || got[0] != b {
		t.Fatalf("%s: echo %q, %v; stats %+v", what, got, err, rt.Stats())
	}
	return c
}

// Single accepts (a table of 3, the default margin): listener 1's idle
// accept holds a claim; listener 0's third connection takes it back.
func TestDirectDescriptorsIdleListenerGivesBackItsClaim(t *testing.T) {
	rt, lns := twoListenersOneTable(t, 3, -2)
	for i, b := range []byte("abc") {
		echoOn(t, rt, lns[0], "connection "+string('0'+rune(i))+" on listener 0 of a table of 3", b)
	}
	if s := rt.Stats(); s.Accepts != 3 || s.AcceptErrors != 0 {
		t.Fatalf("%d accepts, %d accept errors; want 3 and 0", s.Accepts, s.AcceptErrors)
	}
}

// Multishot accepts (a table of 10, margin 2): listener 1's idle
// multishot holds the margin; listener 0 fills the table all the same,
// and listener 1, polling now, is served once a slot is closed.
func TestDirectDescriptorsIdleMultishotGivesBackTheMargin(t *testing.T) {
	rt, lns := twoListenersOneTable(t, 10, 2)
	var cs []net.Conn
	for i := range 10 {
		cs = append(cs, echoOn(t, rt, lns[0], "connection "+string('0'+rune(i))+" on listener 0 of a table of 10", 'x'))
	}
	if s := rt.Stats(); s.Accepts != 10 || s.AcceptErrors != 0 {
		t.Fatalf("with the table full: %d accepts, %d accept errors; want 10 and 0", s.Accepts, s.AcceptErrors)
	}
	cs[0].Close()
	echoOn(t, rt, lns[1], "listener 1 after a close", 'y')
	if s := rt.Stats(); s.Accepts != 11 || s.AcceptErrors != 0 {
		t.Fatalf("%d accepts, %d accept errors; want 11 and 0", s.Accepts, s.AcceptErrors)
	}
}
