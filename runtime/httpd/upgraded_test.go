//go:build linux

package httpd_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// TestSpareStates: a loop keeps at most Config.SpareStates of the states
// its upgraded connections let go (the default 64, none for a negative
// value), and upgrades work the same with any bound. Three connections are
// open at once, so that three states are let go together.
func TestSpareStates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spares int
		want   int
	}{
		{"default", 0, 3},
		{"two", 2, 2},
		{"none", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				ts := start(t, b, httpd.Config{SpareStates: tc.spares})
				l := ts.rt.Loops()[0]
				var cs []net.Conn
				for range 3 {
					c := pctest.Dial(t, ts.addr)
					c.SetDeadline(time.Now().Add(10 * time.Second))
					cs = append(cs, c)
				}
				// Each connection holds its state from OnOpen to its upgrade.
				pctest.WaitFor(t, "three connections open", func() bool { return ts.rt.Stats().Open == 3 })
				for i, c := range cs {
					c.Write([]byte("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhello"))
					rd := bufio.NewReader(c)
					resp, err := http.ReadResponse(rd, nil)
					if err != nil || resp.StatusCode != 101 {
						t.Fatalf("upgrade %d: %v %v", i, resp, err)
					}
					got := make([]byte, len("hello"))
					if _, err := io.ReadFull(rd, got); err != nil || string(got) != "hello" {
						t.Fatalf("upgrade %d, its echo: %q %v", i, got, err)
					}
				}
				if got := ts.srv.SpareCount(l); got != tc.want {
					t.Fatalf("SpareStates %d: the loop keeps %d states, want %d", tc.spares, got, tc.want)
				}
				upgradeOnce(t, ts)
				if got := pctest.HTTPGet(t, "http://"+ts.addr+"/plaintext"); got != "Hello, World!" {
					t.Fatalf("a plain request after the upgrades: %q", got)
				}
			})
		})
	}
}

// TestShedSpareStates: when the loop sheds (Loop.ShedSpares, as the return after
// a storm asks before it collects), the server lets go of its spare states
// and free buffers; the next upgrade gets a new state and the next answer
// given later new buffers.
func TestShedSpareStates(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		l := ts.rt.Loops()[0]
		keeps := func(what string, states int, bufs bool) {
			t.Helper()
			got, gotBufs := ts.srv.SpareCount(l), ts.srv.FreeBufs(l)
			if got != states || (gotBufs > 0) != bufs {
				t.Fatalf("%s: the loop keeps %d states and %d buffers; want %d states, buffers %v", what, got, gotBufs, states, bufs)
			}
		}
		// An answer given after its handler returned is built in a
		// buffer of the loop's, given back once sent; an upgraded
		// connection's state goes to the spares.
		later := func(what string) {
			t.Helper()
			if got := pctest.HTTPGet(t, "http://"+ts.addr+"/timer"); got != "timer" {
				t.Fatalf("GET /timer %s: %q", what, got)
			}
			upgradeOnce(t, ts)
		}
		later("before the shed")
		keeps("after an answer given later and an upgrade", 1, true)
		if err := l.ShedSpares(); err != nil {
			t.Fatal(err)
		}
		keeps("after the loop shed", 0, false)
		later("after the shed")
		keeps("after the shed, an answer given later and an upgrade", 1, true)
	})
}
