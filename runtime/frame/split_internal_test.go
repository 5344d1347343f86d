package frame

import (
	"testing"

	percore "github.com/percore/percore/runtime"
)

// TestHoldsNothingBetweenTokens: a connection holds a buffer only while it
// holds a partial token, for Split and View alike, and the buffer goes back
// to the pool as soon as the token is complete.
func TestHoldsNothingBetweenTokens(t *testing.T) {
	tests := []struct {
		name string
		h    percore.Handler
	}{
		{"split", Split(ScanLines(64), HandlerFunc(func(*percore.Conn, []byte) {}), SplitConfig{})},
		{"view", View(viewLines{}, SplitConfig{})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c percore.Conn
			tt.h.(percore.OpenHandler).OnOpen(&c)
			s := c.AdapterValue().(*session)
			tt.h.OnData(&c, []byte("one\ntwo\n"))
			if s.t.buf != nil {
				t.Fatalf("whole lines: the connection holds a %d-byte buffer", cap(s.t.buf))
			}
			tt.h.OnData(&c, []byte("thr"))
			if s.t.buf == nil || s.t.held() != 3 {
				t.Fatalf("a partial line: holds %d bytes", s.t.held())
			}
			tt.h.OnData(&c, []byte("ee\nfour\n"))
			if s.t.buf != nil || s.t.held() != 0 {
				t.Fatalf("the partial line completed: the connection still holds a %d-byte buffer", cap(s.t.buf))
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
