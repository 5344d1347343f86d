package frame_test

import (
	"bufio"
	"testing"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

type plainLines struct{}

func (plainLines) OnFrame(*percore.Conn, []byte) {}

type eofLines struct{ plainLines }

func (eofLines) OnEOF(*percore.Conn) {}

type plainFrames struct{}

func (plainFrames) OnFrame(*percore.Conn, []byte) {}

type eofFrames struct{ plainFrames }

func (eofFrames) OnEOF(*percore.Conn) {}

// TestAdapterInterfaces: an adapter implements percore.EOFHandler exactly
// when the wrapped handler does (it decides whether the runtime keeps a
// half-closed connection), and always the callbacks that change nothing.
func TestAdapterInterfaces(t *testing.T) {
	tests := []struct {
		name    string
		h       percore.Handler
		wantEOF bool
	}{
		{"lines", frame.Lines(plainLines{}, frame.LineConfig{}), false},
		{"lines with OnEOF", frame.Lines(eofLines{}, frame.LineConfig{}), true},
		{"length", frame.LengthPrefixed(plainFrames{}, frame.LengthConfig{}), false},
		{"length with OnEOF", frame.LengthPrefixed(eofFrames{}, frame.LengthConfig{}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := tt.h.(percore.EOFHandler); ok != tt.wantEOF {
				t.Fatalf("implements EOFHandler: %v, want %v", ok, tt.wantEOF)
			}
			if _, ok := tt.h.(percore.OpenHandler); !ok {
				t.Fatal("does not implement OpenHandler")
			}
			if _, ok := tt.h.(percore.CloseHandler); !ok {
				t.Fatal("does not implement CloseHandler")
			}
			if _, ok := tt.h.(percore.ShutdownHandler); !ok {
				t.Fatal("does not implement ShutdownHandler")
			}
			if _, ok := tt.h.(interface{ OnDrain(*percore.Conn) }); !ok {
				t.Fatal("does not implement OnDrain")
			}
		})
	}
}

// valueUser keeps its own value in Conn.Value under an adapter, and
// asserts its type in every callback (a Conn.Value that held the adapter's
// session made the assertion panic).
type valueUser struct{ closed []int }

type userState struct{ frames, eofs int }

func (u *valueUser) OnOpen(c *percore.Conn) { c.SetValue(&userState{}) }

func (u *valueUser) OnFrame(c *percore.Conn, _ []byte) { c.Value().(*userState).frames++ }

func (u *valueUser) OnView(c *percore.Conn, in []byte) (int, error) {
	n := 0
	for i, b := range in {
		if b == '\n' {
			c.Value().(*userState).frames++
			n = i + 1
		}
	}
	return n, nil
}

func (u *valueUser) OnEOF(c *percore.Conn) { c.Value().(*userState).eofs++ }

func (u *valueUser) OnClose(c *percore.Conn, _ error) {
	st := c.Value().(*userState)
	u.closed = append(u.closed, st.frames, st.eofs)
}

// TestValueIsTheHandlersUnderEveryAdapter: under Split, Lines,
// LengthPrefixed and View, the handler's SetValue in OnOpen is what Value
// returns in every later callback (its frames, OnEOF, OnClose), and the
// adapter's state is in AdapterValue, out of its way.
func TestValueIsTheHandlersUnderEveryAdapter(t *testing.T) {
	lengthPrefixed := func(payloads ...string) []byte {
		var b []byte
		for _, p := range payloads {
			b = append(b, byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p)))
			b = append(b, p...)
		}
		return b
	}
	tests := []struct {
		name string
		make func(u *valueUser) percore.Handler
		in   [][]byte // three frames, the second split across two reads
	}{
		{"Split", func(u *valueUser) percore.Handler { return frame.Split(bufio.ScanLines, u, frame.SplitConfig{}) },
			[][]byte{[]byte("a\nb"), []byte("b\nc\n")}},
		{"Lines", func(u *valueUser) percore.Handler { return frame.Lines(u, frame.LineConfig{}) },
			[][]byte{[]byte("a\nb"), []byte("b\nc\n")}},
		{"LengthPrefixed", func(u *valueUser) percore.Handler { return frame.LengthPrefixed(u, frame.LengthConfig{}) },
			[][]byte{lengthPrefixed("a", "bb")[:7], append(lengthPrefixed("a", "bb")[7:], lengthPrefixed("c")...)}},
		{"View", func(u *valueUser) percore.Handler { return frame.View(u, frame.SplitConfig{}) },
			[][]byte{[]byte("a\nb"), []byte("b\nc\n")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &valueUser{}
			h := tt.make(u)
			var c percore.Conn
			h.(percore.OpenHandler).OnOpen(&c)
			if _, ok := c.Value().(*userState); !ok {
				t.Fatalf("after OnOpen, Value is %T, want the handler's *userState", c.Value())
			}
			if c.AdapterValue() == nil && tt.name != "View" { // View keeps one only while bytes are held
				t.Fatal("the adapter keeps no state in AdapterValue")
			}
			for _, in := range tt.in {
				h.OnData(&c, in)
			}
			h.(percore.EOFHandler).OnEOF(&c)
			h.(percore.CloseHandler).OnClose(&c, nil)
			if st := c.Value().(*userState); st.frames != 3 || st.eofs != 1 {
				t.Fatalf("the handler saw %d frames and %d OnEOF through its own value, want 3 and 1", st.frames, st.eofs)
			}
			if len(u.closed) != 2 || u.closed[0] != 3 {
				t.Fatalf("OnClose saw %v", u.closed)
			}
		})
	}
}
