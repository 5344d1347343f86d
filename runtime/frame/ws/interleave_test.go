package ws_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/frame/ws"
)

// pairsOnPools returns n server Conns that share one Pool, each with its
// own client Conn (the clients share another): what a loop's connections
// are to the loop's Pool.
func pairsOnPools(t testing.TB, n int, scfg, ccfg ws.Config) (s, c []*ws.Conn, sp *ws.Pool) {
	t.Helper()
	sp, cp := ws.NewPool(scfg), ws.NewPool(ccfg)
	for range n {
		key := ws.NewKey()
		req := ws.AppendRequest(nil, "h", "/", &key, &ccfg, "")
		var r http1.Request
		if ok, err := http1.ParseRequest(req, &r, http1.Limits{}); !ok || err != nil {
			t.Fatal(err)
		}
		hs, herr := ws.Accept(&r, sp.Config())
		if herr != nil {
			t.Fatal(herr)
		}
		var rs http1.Response
		if ok, err := http1.ParseResponse(ws.AppendAccept(nil, &hs), &rs, false, http1.Limits{}); !ok || err != nil {
			t.Fatal(err)
		}
		chs, err := ws.CheckResponse(&rs, &key, cp.Config())
		if err != nil {
			t.Fatal(err)
		}
		sc, cc := &ws.Conn{}, &ws.Conn{}
		sc.Init(sp, ws.Server, &hs)
		cc.Init(cp, ws.Client, &chs)
		s, c = append(s, sc), append(c, cc)
	}
	return s, c, sp
}

// TestPoolSharedInterleaved: several Conns of one Pool, each mid-message
// at random moments while the others decode (whole, fragmented with a ping
// between the fragments, compressed with and without context takeover),
// their input cut at random. The oracle is each connection's own sequence:
// every message arrives once, whole and in its order, and a payload a Conn
// returned is still intact after the other Conns' calls until that Conn's
// next call (the Pool's buffers and its shared decompressor are lent to
// one Conn at a time). Between messages no Conn holds a side state.
func TestPoolSharedInterleaved(t *testing.T) {
	seed := rand.Uint64()
	if os.Getenv("WS_SEED") != "" {
		seed, _ = strconv.ParseUint(os.Getenv("WS_SEED"), 10, 64)
	}
	t.Logf("seed %d (WS_SEED=%d to repeat)", seed, seed)
	for _, mode := range []struct {
		name    string
		deflate ws.Deflate
	}{
		{"plain", ws.Deflate{}},
		{"deflate, no context takeover", ws.Deflate{Enabled: true, Threshold: -1}},
		{"deflate, context takeover", ws.Deflate{Enabled: true, Threshold: -1, WriteContextTakeover: true, ReadContextTakeover: true}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			const conns, perConn = 5, 40
			s, c, _ := pairsOnPools(t, conns, ws.Config{Deflate: mode.deflate}, ws.Config{Deflate: mode.deflate})
			type stream struct {
				wire, held []byte
				sent       [][]byte // the messages, in order
				got        int      // how many arrived
				last       []byte   // the payload Next last returned (not copied)
				lastWant   []byte   // what it must still be
			}
			st := make([]stream, conns)
			for i := range st {
				for k := range perConn {
					m := fmt.Appendf(nil, "conn %d message %d ", i, k)
					m = append(m, bytes.Repeat([]byte{'a' + byte(rng.IntN(26))}, rng.IntN(4000))...)
					st[i].sent = append(st[i].sent, m)
					if rng.IntN(3) == 0 && len(m) > 2 {
						// Fragmented (uncompressed), a ping between.
						cut := 1 + rng.IntN(len(m)-1)
						st[i].wire = append(st[i].wire, raw(0x01, true, m[:cut])...)
						st[i].wire = append(st[i].wire, raw(0x89, true, []byte("p"))...)
						st[i].wire = append(st[i].wire, raw(0x80, true, m[cut:])...)
						continue
					}
					var err error
					if st[i].wire, err = c[i].AppendMessage(st[i].wire, ws.OpText, m); err != nil {
						t.Fatal(err)
					}
				}
			}
			check := func() {
				for i := range st {
					if st[i].last != nil && !bytes.Equal(st[i].last, st[i].lastWant) {
						t.Fatalf("seed %d: conn %d's payload changed before its next call", seed, i)
					}
				}
			}
			for left := conns; left > 0; {
				i := rng.IntN(conns)
				x := &st[i]
				if len(x.wire) == 0 && len(x.held) == 0 {
					continue
				}
				k := min(1+rng.IntN(3000), len(x.wire))
				x.held = append(x.held, x.wire[:k]...)
				x.wire = x.wire[k:]
				for {
					n, ev, p, err := s[i].Next(x.held)
					x.held = x.held[n:]
					x.last = nil
					if err != nil {
						t.Fatalf("seed %d: conn %d, message %d: %v", seed, i, x.got, err)
					}
					if ev == ws.NeedMore {
						break
					}
					if ev == ws.Ping {
						continue
					}
					if ev != ws.Text || x.got >= len(x.sent) || !bytes.Equal(p, x.sent[x.got]) {
						t.Fatalf("seed %d: conn %d, message %d: %v of %d bytes, not the one sent", seed, i, x.got, ev, len(p))
					}
					x.got++
					x.last, x.lastWant = p, bytes.Clone(p)
					// Another connection's work, before this one's next call.
					check()
				}
				check()
				if len(x.wire) == 0 && len(x.held) == 0 {
					s[i].Next(nil) // gives back what the last message held
					x.last = nil
					if x.got != len(x.sent) {
						t.Fatalf("seed %d: conn %d: %d messages of %d", seed, i, x.got, len(x.sent))
					}
					if s[i].HoldsSide() {
						t.Errorf("seed %d: conn %d holds a side state after its last message", seed, i)
					}
					left--
				}
			}
		})
	}
}
