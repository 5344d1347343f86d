package ws_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/percore/percore/runtime/frame/ws"
)

// TestStateResume: a Conn between messages, written down and resumed from
// its state in a fresh Conn (another process's), reads and writes as the
// original would, for every deflate agreement that can move; one with a
// compression context in use, mid-message or closing refuses to move.
// The extension bits of AppendState's flags byte (extReadReset and
// extWriteReset shifted by 2).
const (
	extReadResetFlag  = 1 << 2
	extWriteResetFlag = 2 << 2
)

func TestStateResume(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 30))
	msgs := [][]byte{[]byte("hello"), bytes.Repeat([]byte("abc"), 2000), {}, bytes.Repeat([]byte{0xe2, 0x82, 0xac}, 700)}
	cfgs := []ws.Deflate{
		{},
		{Enabled: true},
		{Enabled: true, ReadContextTakeover: true, ReadWindowBits: 10},
		{Enabled: true, WriteContextTakeover: true},
	}
	for i, d := range cfgs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			cfg := ws.Config{Deflate: d}
			// The client allows what the server asks for.
			s, c := pair(t, cfg, ws.Config{Deflate: ws.Deflate{Enabled: d.Enabled,
				WriteContextTakeover: d.ReadContextTakeover, ReadContextTakeover: d.WriteContextTakeover}})
			st, err := s.AppendState([]byte("x"))
			if err != nil || len(st) != 1+ws.StateLen {
				t.Fatalf("fresh: %d bytes, %v", len(st), err)
			}
			// Before any message nothing is held: it moves.
			var r ws.Conn
			rest, err := r.Resume(ws.NewPool(cfg), append(st[1:], "tail"...))
			if err != nil || string(rest) != "tail" {
				t.Fatalf("resume: %q, %v", rest, err)
			}
			if r.Role() != ws.Server || r.Compressed() != s.Compressed() {
				t.Fatalf("resumed role %v compressed %v", r.Role(), r.Compressed())
			}
			for _, dir := range []struct{ from, to *ws.Conn }{{c, &r}, {&r, c}} {
				got := deliver(t, dir.from, dir.to, msgs, rng)
				for k := range msgs {
					if k >= len(got) || !bytes.Equal(got[k], msgs[k]) {
						t.Fatalf("message %d differs after resume", k)
					}
				}
			}
			// After messages a context in use does not move.
			_, err = r.AppendState(nil)
			ctx := d.Enabled && (d.ReadContextTakeover || d.WriteContextTakeover)
			if ctx != errors.Is(err, ws.ErrNotPortable) || (!ctx && err != nil) {
				t.Fatalf("after messages: %v (context takeover %v)", err, ctx)
			}
		})
	}
	t.Run("mid-message", func(t *testing.T) {
		s, c := pair(t, ws.Config{}, ws.Config{})
		wire, _ := c.AppendMessage(nil, ws.OpText, bytes.Repeat([]byte("a"), 300))
		if n, ev, _, err := s.Next(wire[:100]); err != nil || ev != ws.NeedMore || n == 0 {
			t.Fatalf("part: %d %v %v", n, ev, err)
		}
		if s.Between() {
			t.Fatal("Between in a frame's payload")
		}
		if _, err := s.AppendState(nil); !errors.Is(err, ws.ErrInMessage) {
			t.Fatalf("in a frame: %v", err)
		}
		f1 := ws.AppendFrame(nil, ws.OpText, []byte("ab"), true)
		f1[0] &^= 0x80 // not final: a fragmented message begins
		s2, _ := pair(t, ws.Config{}, ws.Config{})
		if _, ev, _, err := s2.Next(f1); err != nil || ev != ws.NeedMore {
			t.Fatalf("first fragment: %v %v", ev, err)
		}
		if _, err := s2.AppendState(nil); !errors.Is(err, ws.ErrInMessage) {
			t.Fatalf("between fragments: %v", err)
		}
	})
	t.Run("closing", func(t *testing.T) {
		s, _ := pair(t, ws.Config{}, ws.Config{})
		if _, err := s.PutClose(make([]byte, 200), ws.CloseNormal, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AppendState(nil); !errors.Is(err, ws.ErrNotPortable) {
			t.Fatalf("closing: %v", err)
		}
	})
	t.Run("bad state", func(t *testing.T) {
		for _, b := range [][]byte{nil, {1, 2, 3}, {0x21, 0, 15, 0}, {0x13, 0, 15, 0}, {0x10, 2, 15, 9}, {0x10, 3, 15, 3},
			// Deflate with a write window under 8 bits (each once made
			// the first compressed write panic), a missing or extra read
			// context, extension bits or windows without deflate.
			{0x10, 0x01 | extReadResetFlag, 7, 0}, {0x10, 0x01 | extReadResetFlag | extWriteResetFlag, 0, 0}, {0x10, 0x03, 3, 15},
			{0x10, 0x01, 15, 0}, {0x10, 0x03 | extReadResetFlag, 15, 15}, {0x10, 0x03, 15, 7},
			{0x10, extWriteResetFlag, 0, 0}, {0x10, 0, 15, 0}, {0x10, 0, 0, 9}} {
			var r ws.Conn
			if _, err := r.Resume(ws.NewPool(ws.Config{}), b); !errors.Is(err, ws.ErrState) {
				t.Errorf("%x: %v, want ErrState", b, err)
			}
		}
	})
}
