package frame_test

import (
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

// TestValueWithoutAdapter: on a connection no adapter serves, Value and
// SetValue are the Conn's own.
func TestValueWithoutAdapter(t *testing.T) {
	var c percore.Conn
	frame.SetValue(&c, 42)
	if c.Value() != 42 || frame.Value(&c) != 42 {
		t.Fatalf("Value = %v, Conn.Value = %v; want 42", frame.Value(&c), c.Value())
	}
}

// TestValueBesideSession: on a served connection the handler's value lives
// next to the adapter's state, and survives a Conn.SetValue misuse.
func TestValueBesideSession(t *testing.T) {
	var got []any
	h := frame.Lines(frame.HandlerFunc(func(c *percore.Conn, line []byte) {
		got = append(got, frame.Value(c))
	}), frame.LineConfig{})
	var c percore.Conn
	h.(percore.OpenHandler).OnOpen(&c)
	frame.SetValue(&c, "mine")
	h.OnData(&c, []byte("a\n"))
	c.SetValue("overwritten") // not what the docs say to do
	h.OnData(&c, []byte("b\n"))
	if len(got) != 2 || got[0] != "mine" || got[1] != "overwritten" {
		t.Fatalf("values seen %v", got)
	}
}
