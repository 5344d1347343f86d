package ws_test

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/frame/ws"
)

// pair returns a server and a client Conn whose handshake ran with the
// given configurations.
func pair(t testing.TB, scfg, ccfg ws.Config) (s, c *ws.Conn) {
	t.Helper()
	key := ws.NewKey()
	req := ws.AppendRequest(nil, "h", "/", &key, &ccfg, "")
	var r http1.Request
	if ok, err := http1.ParseRequest(req, &r, http1.Limits{}); !ok || err != nil {
		t.Fatal(err)
	}
	sp, cp := ws.NewPool(scfg), ws.NewPool(ccfg)
	hs, herr := ws.Accept(&r, sp.Config())
	if herr != nil {
		t.Fatal(herr)
	}
	resp := ws.AppendAccept(nil, &hs)
	var rs http1.Response
	if ok, err := http1.ParseResponse(resp, &rs, false, http1.Limits{}); !ok || err != nil {
		t.Fatal(err)
	}
	chs, err := ws.CheckResponse(&rs, &key, cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	s, c = &ws.Conn{}, &ws.Conn{}
	s.Init(sp, ws.Server, &hs)
	c.Init(cp, ws.Client, &chs)
	return s, c
}

// deliver writes messages from one Conn and reads them with the other,
// whole and then cut in random places; it returns what arrived.
func deliver(t testing.TB, from, to *ws.Conn, msgs [][]byte, rng *rand.Rand) [][]byte {
	t.Helper()
	var wire []byte
	for i, m := range msgs {
		op := ws.OpBinary
		if i%2 == 0 {
			op = ws.OpText
		}
		var err error
		wire, err = from.AppendMessage(wire, op, m)
		if err != nil {
			t.Fatal(err)
		}
	}
	var got [][]byte
	var held []byte
	for off := 0; off < len(wire); {
		k := 1 + rng.IntN(3000)
		in := append(held, wire[off:min(off+k, len(wire))]...)
		off += k
		pos := 0
		for {
			n, ev, p, err := to.Next(in[pos:])
			pos += n
			if err != nil {
				t.Fatalf("message %d: %v (from %v to %v)", len(got), err, from.Role(), to.Role())
			}
			if ev == ws.NeedMore {
				break
			}
			got = append(got, bytes.Clone(p))
		}
		held = append([]byte(nil), in[pos:]...)
	}
	return got
}

// TestDeflate: messages both ways under every combination of context
// takeover and window limits either end may ask for, cut at random.
func TestDeflate(t *testing.T) {
	seed := rand.Uint64()
	if os.Getenv("WS_SEED") != "" {
		seed, _ = strconv.ParseUint(os.Getenv("WS_SEED"), 10, 64)
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	var msgs [][]byte
	for i := range 60 {
		n := []int{0, 10, 200, 5000, 70000}[i%5]
		var b strings.Builder
		for b.Len() < n {
			fmt.Fprintf(&b, "{\"seq\":%d,\"name\":\"Größe\",\"v\":%d} ", i, rng.IntN(100))
		}
		// Cut at n bytes, and back to a code point boundary: even
		// messages go as text.
		m := b.String()[:n]
		for !utf8.ValidString(m) {
			m = m[:len(m)-1]
		}
		msgs = append(msgs, []byte(m))
	}
	cfgs := []ws.Deflate{
		{Enabled: true},
		{Enabled: true, WriteContextTakeover: true},
		{Enabled: true, ReadContextTakeover: true},
		{Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true},
		{Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true, ReadWindowBits: 9},
		{Enabled: true, ReadContextTakeover: true, ReadWindowBits: 12, Threshold: -1, Level: 6},
	}
	for si, sd := range cfgs {
		for ci, cd := range cfgs {
			t.Run(fmt.Sprintf("server%d-client%d", si, ci), func(t *testing.T) {
				s, c := pair(t, ws.Config{Deflate: sd}, ws.Config{Deflate: cd})
				if !s.Compressed() || !c.Compressed() {
					t.Fatal("permessage-deflate not agreed")
				}
				for _, dir := range []struct{ from, to *ws.Conn }{{s, c}, {c, s}} {
					got := deliver(t, dir.from, dir.to, msgs, rng)
					if len(got) != len(msgs) {
						t.Fatalf("seed %d: %d messages, want %d", seed, len(got), len(msgs))
					}
					for i := range msgs {
						if !bytes.Equal(got[i], msgs[i]) {
							t.Fatalf("seed %d: message %d differs", seed, i)
						}
					}
				}
			})
		}
	}
}

// TestWindowLimit: asked for a window of 512 bytes, the compressor refers
// back no further: a random block repeated 4 KiB later is sent twice,
// where a 32 KiB window sends it once.
func TestWindowLimit(t *testing.T) {
	block := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range block {
		block[i] = byte(rng.Uint32())
	}
	m := append(bytes.Clone(block), block...)
	s, c := pair(t, ws.Config{Deflate: ws.Deflate{Enabled: true}}, ws.Config{Deflate: ws.Deflate{Enabled: true, ReadContextTakeover: true, ReadWindowBits: 9}})
	small, err := s.AppendMessage(nil, ws.OpBinary, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(small) < 2*4096 {
		t.Fatalf("window 9: %d bytes for a 4 KiB block sent twice: a reference reached past 512 bytes", len(small))
	}
	s2, _ := pair(t, ws.Config{Deflate: ws.Deflate{Enabled: true}}, ws.Config{Deflate: ws.Deflate{Enabled: true}})
	big, _ := s2.AppendMessage(nil, ws.OpBinary, m)
	if len(big) > 4096+200 {
		t.Fatalf("window 15: %d bytes for a 4 KiB block sent twice", len(big))
	}
	if _, ev, p, err := c.Next(small); err != nil || ev != ws.Binary || !bytes.Equal(p, m) {
		t.Fatalf("the message does not arrive: %v %v", ev, err)
	}
}

// TestDeflateBound: MaxLen holds the compressed frame of incompressible
// data, for every window.
func TestDeflateBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	for _, bits := range []int{8, 9, 12, 15} {
		s, c := pair(t, ws.Config{Deflate: ws.Deflate{Enabled: true, Threshold: -1}}, ws.Config{Deflate: ws.Deflate{Enabled: true, ReadContextTakeover: true, ReadWindowBits: bits}})
		for _, n := range []int{1, 100, 5000, 70000, 1 << 20} {
			m := make([]byte, n)
			for i := range m {
				m[i] = byte(rng.Uint32())
			}
			room := make([]byte, s.MaxLen(n))
			k, err := s.PutMessage(room, ws.OpBinary, m)
			if err != nil {
				t.Fatalf("window %d, %d bytes: %v", bits, n, err)
			}
			var wire []byte
			wire = append(wire, room[:k]...)
			if _, ev, p, err := c.Next(wire); err != nil || ev != ws.Binary || !bytes.Equal(p, m) {
				t.Fatalf("window %d, %d bytes: differs (frame %d)", bits, n, k)
			}
		}
	}
}

// compressedFrame is a client's compressed frame (RSV1) of deflate data.
func compressedFrame(op byte, data []byte) []byte {
	return wireFrame{op: op, fin: true, rsv: 4, payload: data}.encode(rand.New(rand.NewPCG(5, 5)))
}

func deflateRaw(p []byte) []byte {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestCompression)
	w.Write(p)
	w.Flush()
	return bytes.TrimSuffix(b.Bytes(), []byte{0, 0, 0xff, 0xff})
}

// TestInflateErrors: a compressed message that inflates past the limit
// fails with 1009 as soon as it does (a small bomb does not inflate
// whole), bad DEFLATE data and inflated text that is not UTF-8 with 1007.
func TestInflateErrors(t *testing.T) {
	tests := []struct {
		name string
		lim  ws.Limits
		in   []byte
		want ws.CloseCode
	}{
		{"bomb", ws.Limits{MaxMessage: 1 << 20}, compressedFrame(2, deflateRaw(make([]byte, 64<<20))), 1009},
		{"not deflate", ws.Limits{}, compressedFrame(2, []byte{0xff, 0xff, 0xff, 0xff, 0xff}), 1007},
		{"text not UTF-8", ws.Limits{}, compressedFrame(1, deflateRaw([]byte("ok\xff"))), 1007},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hs := &ws.Handshake{Deflate: ws.DeflateParams{Enabled: true, ServerNoContextTakeover: true, ClientNoContextTakeover: true}}
			var c ws.Conn
			c.Init(ws.NewPool(ws.Config{Limits: tc.lim}), ws.Server, hs)
			_, _, _, err := c.Next(tc.in)
			var ce *ws.CloseError
			if !errors.As(err, &ce) || ce.Code != tc.want {
				t.Fatalf("error %v, want code %d", err, tc.want)
			}
		})
	}
}

// TestPrepared: one message encoded once reaches connections of every
// kind: plain, compressing without and with context takeover, with a
// limited window, and clients; those without context takeover get the
// shared compressed bytes themselves.
func TestPrepared(t *testing.T) {
	// References reach 2 KiB back: a compressor with a window of 1 KiB
	// cannot make the shared encoding.
	var b strings.Builder
	r := rand.New(rand.NewPCG(8, 8))
	for b.Len() < 2048 {
		fmt.Fprintf(&b, "event %d;", r.IntN(1000000))
	}
	msg := []byte(strings.Repeat(b.String(), 2))
	pool := ws.NewPool(ws.Config{Deflate: ws.Deflate{Enabled: true}})
	pm, err := pool.Prepare(ws.OpText, msg)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []struct {
		name     string
		srv, cli ws.Deflate
		shared   bool
	}{
		{"plain", ws.Deflate{}, ws.Deflate{}, true},
		{"deflate", ws.Deflate{Enabled: true}, ws.Deflate{Enabled: true}, true},
		{"takeover", ws.Deflate{Enabled: true, WriteContextTakeover: true}, ws.Deflate{Enabled: true, ReadContextTakeover: true}, false},
		{"window 10", ws.Deflate{Enabled: true}, ws.Deflate{Enabled: true, ReadContextTakeover: true, ReadWindowBits: 10}, false},
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			s, c := pair(t, ws.Config{Deflate: k.srv}, ws.Config{Deflate: k.cli})
			for i := range 3 { // context takeover: the prepared message between others
				room := make([]byte, s.PreparedLen(pm))
				n, err := s.PutPrepared(room, pm)
				if err != nil {
					t.Fatal(err)
				}
				frame := room[:n]
				isShared := bytes.Equal(frame, pm.Frame()) || bytes.Equal(frame, pm.DeflatedFrame())
				// A compressor with context takeover starts from nothing
				// too, so its first message may match the shared bytes.
				if (i > 0 || k.shared) && isShared != k.shared {
					t.Fatalf("message %d: shared encoding used: %v, want %v", i, isShared, k.shared)
				}
				// SharedFrame is the same bytes, without the copy, exactly
				// when PutPrepared copied the shared encoding.
				if sf := s.SharedFrame(pm); (sf != nil) != k.shared || sf != nil && !bytes.Equal(sf, frame) {
					t.Fatalf("message %d: SharedFrame %d bytes (shared %v), PutPrepared %d", i, len(sf), k.shared, len(frame))
				}
				got := deliverWire(t, c, frame)
				other := deliver(t, s, c, [][]byte{[]byte("between " + k.name)}, rng)
				if !bytes.Equal(got, msg) || len(other) != 1 {
					t.Fatalf("prepared message arrived as %q", got)
				}
			}
			// From a client: masked with its own key, never shared.
			if sf := c.SharedFrame(pm); sf != nil {
				t.Fatalf("a client's SharedFrame: %d bytes, want nil (it masks)", len(sf))
			}
			room := make([]byte, c.PreparedLen(pm))
			n, _ := c.PutPrepared(room, pm)
			if got := deliverWire(t, s, room[:n]); !bytes.Equal(got, msg) {
				t.Fatalf("client's prepared message arrived as %q", got)
			}
		})
	}
}

func deliverWire(t *testing.T, to *ws.Conn, wire []byte) []byte {
	t.Helper()
	_, ev, p, err := to.Next(wire)
	if err != nil || ev != ws.Text {
		t.Fatalf("event %v, err %v", ev, err)
	}
	return bytes.Clone(p)
}

// TestCloseHandshake: after PutClose no frame may be written; the answer
// to a Close echoes its status, or none.
func TestCloseHandshake(t *testing.T) {
	s, c := pair(t, ws.Config{}, ws.Config{})
	var buf [ws.MaxHeaderLen + ws.MaxControlPayload]byte
	n, err := c.PutClose(buf[:], ws.CloseGoingAway, strings.Repeat("é", 100))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutMessage(make([]byte, 100), ws.OpText, []byte("x")); err != ws.ErrCloseSent {
		t.Fatalf("message after close: %v", err)
	}
	_, ev, reason, err := s.Next(buf[:n])
	if err != nil || ev != ws.Close || s.CloseCode() != ws.CloseGoingAway || len(reason) > 123 {
		t.Fatalf("close: %v %v %d %d", ev, err, s.CloseCode(), len(reason))
	}
	m, err := s.PutClose(buf[:], s.CloseCode(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ev, _, err := c.Next(buf[:m]); err != nil || ev != ws.Close || c.CloseCode() != ws.CloseGoingAway {
		t.Fatalf("echo: %v %v", ev, err)
	}
	if !s.CloseSent() || !s.CloseReceived() || !c.CloseSent() || !c.CloseReceived() {
		t.Fatal("closing handshake not complete")
	}
	if _, err := s.PutClose(buf[:], ws.CloseAbnormal, ""); err != ws.ErrCloseSent {
		t.Fatalf("second close: %v", err)
	}
	if pm, err := ws.NewPool(ws.Config{}).Prepare(ws.OpText, []byte("x")); err != nil || s.SharedFrame(pm) != nil {
		t.Fatalf("SharedFrame after close: want nil (%v)", err)
	}
	var fresh ws.Conn
	fresh.Init(ws.NewPool(ws.Config{}), ws.Server, nil)
	if _, err := fresh.PutClose(buf[:], ws.CloseAbnormal, ""); err != ws.ErrNotData {
		t.Fatalf("close 1006: %v", err)
	}
}
