//go:build linux

package frame_test

import (
	"bytes"
	"testing"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/internal/rawconn"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// partialView takes the whole lines of its input while take is set, and
// counts its calls.
type partialView struct {
	take  bool
	calls int
	lines [][]byte
}

func (v *partialView) OnView(_ *percore.Conn, in []byte) (int, error) {
	v.calls++
	if !v.take {
		return 0, nil
	}
	done := 0
	for {
		i := bytes.IndexByte(in[done:], '\n')
		if i < 0 {
			return done, nil
		}
		v.lines = append(v.lines, append([]byte(nil), in[done:done+i]...))
		done += i + 1
	}
}

// TestRedeliver: Redeliver shows what View holds to the handler again,
// and with nothing held does nothing at all: no call, no session taken.
func TestRedeliver(t *testing.T) {
	v := &partialView{}
	h := frame.View(v, frame.SplitConfig{})
	c := new(percore.Conn) // no loop: View's machinery alone
	h.(percore.OpenHandler).OnOpen(c)

	frame.Redeliver(c)
	if v.calls != 0 || c.AdapterValue() != nil {
		t.Fatalf("nothing held: %d calls, session %v; want none", v.calls, c.AdapterValue())
	}
	h.OnData(c, []byte("one\ntwo\nthr"))
	if v.calls != 1 || c.AdapterValue() == nil {
		t.Fatalf("after a read left whole: %d calls, session %v", v.calls, c.AdapterValue())
	}
	v.take = true
	frame.Redeliver(c)
	if v.calls != 2 || len(v.lines) != 2 || string(v.lines[0]) != "one" || string(v.lines[1]) != "two" {
		t.Fatalf("redelivered: %d calls, lines %q; want 2 calls, [one two]", v.calls, v.lines)
	}
	h.OnData(c, []byte("ee\n"))
	if len(v.lines) != 3 || string(v.lines[2]) != "three" {
		t.Fatalf("lines %q, want the held \"thr\" completed", v.lines)
	}
	if c.AdapterValue() != nil {
		t.Fatal("all consumed, yet a session is held")
	}
	calls := v.calls
	frame.Redeliver(c)
	if v.calls != calls {
		t.Fatal("Redeliver called the handler with nothing held")
	}
}

// laterView answers each line it takes from a timer of its connection,
// outside OnView, where View keeps no session: a line starting with 'F'
// as a frame (WriteFrame) of as many bytes, others as a line (WriteLine).
type laterView struct{}

type laterConn struct {
	c     *percore.Conn
	timer *percore.Timer
	line  [64]byte
	n     int
}

func (laterView) OnOpen(c *percore.Conn) {
	lc := &laterConn{c: c}
	lc.timer = c.Loop().AfterFunc(0, lc.answer)
	lc.timer.Stop()
	c.SetValue(lc)
}

func (laterView) OnView(c *percore.Conn, in []byte) (int, error) {
	i := bytes.IndexByte(in, '\n')
	if i < 0 {
		return 0, nil
	}
	lc := c.Value().(*laterConn)
	lc.n = copy(lc.line[:], in[:i])
	lc.timer.Reset(0)
	return i + 1, nil
}

func (lc *laterConn) answer() {
	line := lc.line[:lc.n]
	if c := lc.c; c.AdapterValue() != nil {
		c.Close() // a session outside OnView: the test would not test
		return
	}
	if len(line) > 3 && line[0] == 'F' {
		frame.WriteFrame(lc.c, line[:len(line)-3]) // 4+len-3: the line's length and its '\n'
		return
	}
	frame.WriteLine(lc.c, line)
}

// TestWriteOutsideViewAllocs: WriteFrame and WriteLine on a connection
// under View with no session (between messages, from a timer) allocate
// nothing, on both backends.
func TestWriteOutsideViewAllocs(t *testing.T) {
	for _, req := range []string{"ping-line\n", "F-a-frame-of-bytes\n"} {
		t.Run(req[:1], func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				rt := serve(t, b, frame.View(laterView{}, frame.SplitConfig{}))
				c := rawconn.Dial(t, rt.Addr())
				pieces := [][]byte{[]byte(req)}
				for range 200 {
					if err := c.RoundTrip(pieces...); err != nil {
						t.Fatal(err)
					}
				}
				var err error
				allocs := testing.AllocsPerRun(1000, func() {
					if e := c.RoundTrip(pieces...); e != nil {
						err = e
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if allocs != 0 {
					t.Fatalf("%v allocations per round trip, want 0", allocs)
				}
			})
		})
	}
}
