package ws_test

import (
	"testing"

	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/frame/ws"
)

func parseReqB(tb testing.TB, s string) *http1.Request {
	tb.Helper()
	r := &http1.Request{}
	if ok, err := http1.ParseRequest([]byte(s), r, http1.Limits{}); !ok || err != nil {
		tb.Fatalf("parse %q: %v %v", s, ok, err)
	}
	return r
}

// TestAllocs: the hot path allocates nothing: a message in (whole or
// fragmented, compressed or not, once the pool is warm), a message, a
// pong, a prepared message and a close out.
func TestAllocs(t *testing.T) {
	for _, deflate := range []bool{false, true} {
		d := ws.Deflate{Enabled: deflate, Threshold: -1}
		s, c := pair(t, ws.Config{Deflate: d}, ws.Config{Deflate: d})
		msg := jsonMessage(3000)
		whole, _ := c.AppendMessage(nil, ws.OpText, msg)
		frag := append(raw(0x01, true, msg[:1000]), append(raw(0x89, true, []byte("p")), raw(0x80, true, msg[1000:])...)...)
		room := make([]byte, s.MaxLen(len(msg)))
		ctl := make([]byte, ws.MaxHeaderLen+ws.MaxControlPayload)
		pm, _ := ws.NewPool(ws.Config{Deflate: d}).Prepare(ws.OpText, msg)
		buf := make([]byte, len(whole))
		fbuf := make([]byte, len(frag))
		run := func() {
			copy(buf, whole) // the decoder unmasks in place
			for off := 0; ; {
				n, ev, _, err := s.Next(buf[off:])
				off += n
				if err != nil {
					t.Fatal(err)
				}
				if ev == ws.NeedMore {
					break
				}
			}
			if !deflate {
				copy(fbuf, frag)
				for off := 0; ; {
					n, ev, _, err := s.Next(fbuf[off:])
					off += n
					if err != nil {
						t.Fatal(err)
					}
					if ev == ws.NeedMore {
						break
					}
				}
			}
			if _, err := s.PutMessage(room, ws.OpText, msg); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutControl(ctl, ws.OpPong, []byte("pong")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.PutPrepared(room, pm); err != nil {
				t.Fatal(err)
			}
		}
		run() // warm the pool's buffers and the compressor
		if n := testing.AllocsPerRun(200, run); n != 0 {
			t.Errorf("deflate=%v: %v allocations per run", deflate, n)
		}
		if n := testing.AllocsPerRun(100, func() {
			var cc ws.Conn
			cc.Init(ws.NewPool(ws.Config{}), ws.Server, nil)
			cc.PutClose(ctl, ws.CloseNormal, "bye")
		}); n > 1 { // the Pool itself
			t.Errorf("close: %v allocations", n)
		}
	}
}
