package frame

import (
	"testing"

	percore "github.com/percore/percore/runtime"
)

// TestHoldsNothingBetweenTokens: a connection holds a buffer only while it
// holds a partial token, for Split and View alike, and the buffer goes back
// to the pool as soon as the token is complete. Under View the session
// itself is held only as long (an idle view holds none: decision 0065).
func TestHoldsNothingBetweenTokens(t *testing.T) {
	tests := []struct {
		name string
		h    percore.Handler
		idle bool // no session at all while nothing is held
	}{
		{"split", Split(ScanLines(64), HandlerFunc(func(*percore.Conn, []byte) {}), SplitConfig{}), false},
		{"view", View(viewLines{}, SplitConfig{}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c percore.Conn
			// held returns the session's buffer and held bytes (none
			// without a session), failing if a session is kept where the
			// adapter must keep none.
			held := func(when string, idle bool) ([]byte, int) {
				t.Helper()
				s, _ := c.AdapterValue().(*session)
				if s == nil {
					if !tt.idle {
						t.Fatalf("%s: no session", when)
					}
					return nil, 0
				}
				if idle && tt.idle {
					t.Fatalf("%s: an idle view keeps its session (%d bytes held)", when, s.t.held())
				}
				return s.t.buf, s.t.held()
			}
			tt.h.(percore.OpenHandler).OnOpen(&c)
			held("after OnOpen", true)
			tt.h.OnData(&c, []byte("one\ntwo\n"))
			if buf, _ := held("whole lines", true); buf != nil {
				t.Fatalf("whole lines: the connection holds a %d-byte buffer", cap(buf))
			}
			tt.h.OnData(&c, []byte("thr"))
			if buf, n := held("a partial line", false); buf == nil || n != 3 {
				t.Fatalf("a partial line: holds %d bytes", n)
			}
			tt.h.OnData(&c, []byte("ee\nfour\n"))
			if buf, n := held("the partial line completed", true); buf != nil || n != 0 {
				t.Fatalf("the partial line completed: the connection still holds a %d-byte buffer", cap(buf))
			}
		})
	}
}

type viewLines struct{}

func (viewLines) OnView(_ *percore.Conn, in []byte) (int, error) {
	n := 0
	for i := range in {
		if in[i] == '\n' {
			n = i + 1
		}
	}
	return n, nil
}
