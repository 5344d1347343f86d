package ws_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/percore/percore/runtime/frame/ws"
)

// raw builds a frame header by hand: b0, then the length as given
// (len7 126/127 followed by the extended length), the key when masked.
func raw(b0 byte, masked bool, payload []byte) []byte {
	return rawLen(b0, masked, uint64(len(payload)), payload)
}

func rawLen(b0 byte, masked bool, n uint64, payload []byte) []byte {
	var m byte
	if masked {
		m = 0x80
	}
	out := []byte{b0}
	switch {
	case n <= 125:
		out = append(out, m|byte(n))
	case n <= 0xFFFF:
		out = append(out, m|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, m|127)
		out = binary.BigEndian.AppendUint64(out, n)
	}
	key := []byte{0x37, 0xfa, 0x21, 0x3d}
	if masked {
		out = append(out, key...)
	}
	for i, c := range payload {
		if masked {
			c ^= key[i&3]
		}
		out = append(out, c)
	}
	return out
}

// TestViolations: every protocol violation fails with the close code RFC
// 6455 gives for it, on the decoder of the role that receives it.
func TestViolations(t *testing.T) {
	code := func(c int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(c)) }
	tests := []struct {
		name    string
		role    ws.Role
		deflate bool
		lim     ws.Limits
		in      []byte
		want    ws.CloseCode
	}{
		{"RSV2", ws.Server, false, ws.Limits{}, raw(0x81|0x20, true, []byte("x")), 1002},
		{"RSV3", ws.Server, false, ws.Limits{}, raw(0x81|0x10, true, []byte("x")), 1002},
		{"RSV1 without deflate", ws.Server, false, ws.Limits{}, raw(0x81|0x40, true, []byte("x")), 1002},
		{"RSV1 on a continuation", ws.Server, true, ws.Limits{}, append(raw(0x01, true, []byte("a")), raw(0x80|0x40, true, []byte("b"))...), 1002},
		{"RSV1 on a ping", ws.Server, true, ws.Limits{}, raw(0x89|0x40, true, nil), 1002},
		{"opcode 3", ws.Server, false, ws.Limits{}, raw(0x83, true, nil), 1002},
		{"opcode 7", ws.Server, false, ws.Limits{}, raw(0x87, true, nil), 1002},
		{"opcode 11", ws.Server, false, ws.Limits{}, raw(0x8B, true, nil), 1002},
		{"opcode 15", ws.Server, false, ws.Limits{}, raw(0x8F, true, nil), 1002},
		{"fragmented ping", ws.Server, false, ws.Limits{}, raw(0x09, true, []byte("x")), 1002},
		{"fragmented close", ws.Server, false, ws.Limits{}, raw(0x08, true, nil), 1002},
		{"ping of 126 bytes", ws.Server, false, ws.Limits{}, raw(0x89, true, make([]byte, 126)), 1002},
		{"close of 126 bytes", ws.Server, false, ws.Limits{}, raw(0x88, true, append(code(1000), make([]byte, 124)...)), 1002},
		{"unmasked client frame", ws.Server, false, ws.Limits{}, raw(0x81, false, []byte("x")), 1002},
		{"masked server frame", ws.Client, false, ws.Limits{}, raw(0x81, true, []byte("x")), 1002},
		{"continuation without a message", ws.Server, false, ws.Limits{}, raw(0x80, true, []byte("x")), 1002},
		{"text inside a message", ws.Server, false, ws.Limits{}, append(raw(0x01, true, []byte("a")), raw(0x81, true, []byte("b"))...), 1002},
		{"64-bit length with its top bit", ws.Server, false, ws.Limits{MaxMessage: -1}, rawLen(0x82, true, 1<<63, nil), 1002},
		{"close of 1 byte", ws.Server, false, ws.Limits{}, raw(0x88, true, []byte{3}), 1002},
		{"close code 999", ws.Server, false, ws.Limits{}, raw(0x88, true, code(999)), 1002},
		{"close code 1004", ws.Server, false, ws.Limits{}, raw(0x88, true, code(1004)), 1002},
		{"close code 1005", ws.Server, false, ws.Limits{}, raw(0x88, true, code(1005)), 1002},
		{"close code 1006", ws.Server, false, ws.Limits{}, raw(0x88, true, code(1006)), 1002},
		{"close code 1015", ws.Server, false, ws.Limits{}, raw(0x88, true, code(1015)), 1002},
		{"close code 2999", ws.Server, false, ws.Limits{}, raw(0x88, true, code(2999)), 1002},
		{"close code 5000", ws.Server, false, ws.Limits{}, raw(0x88, true, code(5000)), 1002},
		{"close reason not UTF-8", ws.Server, false, ws.Limits{}, raw(0x88, true, append(code(1000), 0xff)), 1007},
		{"text not UTF-8", ws.Server, false, ws.Limits{}, raw(0x81, true, []byte("ok\xc0\xafok")), 1007},
		{"text ending inside a code point", ws.Server, false, ws.Limits{}, raw(0x81, true, []byte("ok\xe2\x82")), 1007},
		{"text not UTF-8 across fragments", ws.Server, false, ws.Limits{}, append(raw(0x01, true, []byte("a\xed")), raw(0x80, true, []byte("\xa0\x80"))...), 1007},
		{"frame over MaxFrame", ws.Server, false, ws.Limits{MaxFrame: 10}, raw(0x82, true, make([]byte, 11)), 1009},
		{"message over MaxMessage", ws.Server, false, ws.Limits{MaxMessage: 10}, append(raw(0x02, true, make([]byte, 6)), raw(0x80, true, make([]byte, 5))...), 1009},
		{"default limit", ws.Server, false, ws.Limits{}, rawLen(0x82, true, ws.DefaultMaxMessage+1, nil), 1009},
		{"client: frame over MaxFrame", ws.Client, false, ws.Limits{MaxFrame: 10}, raw(0x82, false, make([]byte, 11)), 1009},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := ws.Decoder{Role: tc.role, Deflate: tc.deflate, Limits: tc.lim}
			in := append([]byte(nil), tc.in...)
			var err error
			for off := 0; off < len(in); {
				n, f, e := d.Next(in[off:])
				off += n
				if e != nil {
					err = e
					break
				}
				if f.Event == ws.NeedMore {
					break
				}
			}
			var ce *ws.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v, want a *CloseError with code %d", err, tc.want)
			}
			if ce.Code != tc.want {
				t.Fatalf("code %d (%s), want %d", ce.Code, ce.Reason, tc.want)
			}
			// The decoder stays failed.
			if _, _, e := d.Next([]byte{0x81, 0x80, 0, 0, 0, 0}); e != err {
				t.Fatalf("after the failure: %v, want %v again", e, err)
			}
		})
	}
}

// TestValidClose: every close code that may be sent is accepted, and its
// reason handed over.
func TestValidClose(t *testing.T) {
	for _, c := range []int{1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999} {
		var d ws.Decoder
		in := raw(0x88, true, append(binary.BigEndian.AppendUint16(nil, uint16(c)), "bye \u00e9"...))
		n, f, err := d.Next(in)
		if err != nil || f.Event != ws.Close || int(f.Code) != c || string(f.Payload) != "bye \u00e9" || n != len(in) {
			t.Errorf("code %d: n %d, frame %+v, err %v", c, n, f, err)
		}
		if !d.Closed() {
			t.Errorf("code %d: not closed", c)
		}
		// What follows a Close is consumed and ignored.
		rest := raw(0x81, true, []byte("after"))
		if n, f, err := d.Next(rest); n != len(rest) || f.Event != ws.NeedMore || err != nil {
			t.Errorf("after the close: %d %v %v", n, f.Event, err)
		}
	}
}

// TestKeepsProgress: shown the input as frame.View shows it (what was left
// unconsumed, then the next read), the decoder never leaves more than a
// header or a control frame unconsumed: a frame's payload is taken as it
// arrives, so a message trickled byte by byte costs time linear in its
// size (issue 23's fault 5, for this codec).
func TestKeepsProgress(t *testing.T) {
	var stream []byte
	stream = append(stream, rawLen(0x82, true, 1<<20, make([]byte, 1<<20))...)
	stream = append(stream, raw(0x01, true, bytes.Repeat([]byte("a"), 300))...)
	stream = append(stream, raw(0x89, true, bytes.Repeat([]byte("p"), 125))...)
	stream = append(stream, raw(0x80, true, bytes.Repeat([]byte("b"), 70000))...)
	for _, step := range []int{1, 7, 64, 1000} {
		var d ws.Decoder
		var held []byte
		total, shown := 0, 0
		for off := 0; off < len(stream); off += step {
			in := append(held, stream[off:min(off+step, len(stream))]...)
			shown += len(in)
			pos := 0
			for {
				n, f, err := d.Next(in[pos:])
				if err != nil {
					t.Fatal(err)
				}
				pos += n
				total += len(f.Payload)
				if f.Event == ws.NeedMore {
					break
				}
			}
			held = append([]byte(nil), in[pos:]...)
			if len(held) > ws.MaxHeaderLen+ws.MaxControlPayload {
				t.Fatalf("step %d: %d bytes left unconsumed", step, len(held))
			}
		}
		if want := 1<<20 + 300 + 125 + 70000; total != want {
			t.Fatalf("step %d: %d payload bytes, want %d", step, total, want)
		}
		// Each byte is shown at most once more than once per partial
		// header or control frame: the bound that makes the cost linear.
		if shown > len(stream)+len(stream)/step*(ws.MaxHeaderLen+ws.MaxControlPayload)+1 {
			t.Fatalf("step %d: %d bytes shown for a stream of %d", step, shown, len(stream))
		}
	}
}

// TestModel: a seeded random stream of messages (fragmented, with control
// frames between fragments, text and binary, empty frames) cut at random
// points reaches a Conn; the oracle is the list of messages and control
// frames sent.
func TestModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for round := range 200 {
		var stream []byte
		var want []string
		for range 1 + rng.IntN(20) {
			op := byte(1 + rng.IntN(2))
			var m []byte
			for range rng.IntN(300) {
				m = append(m, "aé€𝄞"[rng.IntN(4)])
			}
			if op == 1 {
				m = []byte(strings.ToValidUTF8(string(m), "?"))
			}
			kind := "Text "
			if op == 2 {
				kind = "Binary "
			}
			frags := 1 + rng.IntN(4)
			for i := range frags {
				lo, hi := len(m)*i/frags, len(m)*(i+1)/frags
				b0 := byte(0)
				if i == 0 {
					b0 = op
				}
				if i == frags-1 {
					b0 |= 0x80
				}
				stream = append(stream, raw(b0, true, m[lo:hi])...)
				if i == frags-1 {
					want = append(want, kind+string(m))
				}
				if rng.IntN(3) == 0 {
					p := fmt.Sprintf("ping %d", rng.IntN(1000))
					stream = append(stream, raw(0x89, true, []byte(p))...)
					want = append(want, "Ping "+p)
				}
			}
		}
		stream = append(stream, raw(0x88, true, []byte{0x03, 0xe8})...)
		want = append(want, "Close ")
		pool := ws.NewPool(ws.Config{})
		var c ws.Conn
		c.Init(pool, ws.Server, nil)
		var got []string
		var held []byte
		for off := 0; off < len(stream); {
			k := 1 + rng.IntN(200)
			in := append(held, stream[off:min(off+k, len(stream))]...)
			off += k
			pos := 0
			for {
				n, ev, p, err := c.Next(in[pos:])
				pos += n
				if err != nil {
					t.Fatalf("seed %d round %d: %v", seed, round, err)
				}
				if ev == ws.NeedMore {
					break
				}
				got = append(got, ev.String()+" "+string(p))
			}
			held = append([]byte(nil), in[pos:]...)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("seed %d round %d:\ngot  %q\nwant %q", seed, round, got, want)
		}
	}
}

// TestConnSize: what an idle connection costs the codec.
func TestConnSize(t *testing.T) {
	if s := unsafe.Sizeof(ws.Conn{}); s > 32 { // the context takeover beside it (decision 0065), the Limits with the Pool, the decoder's progress in a side state (decision 0074)
		t.Fatalf("ws.Conn is %d bytes, more than 32", s)
	} else {
		t.Logf("ws.Conn: %d bytes", s)
	}
	if ws.SideSize > 56 { // what maxSpareSides' "64 of 56 bytes" counts on
		t.Fatalf("a Conn's side state is %d bytes, more than 56", ws.SideSize)
	}
}

// TestMask: the word-at-a-time masking equals the byte-wise definition at
// every length and starting phase, and is its own inverse.
func TestMask(t *testing.T) {
	key := [4]byte{0x11, 0x22, 0x84, 0xf0}
	for n := range 100 {
		for phase := range 4 {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(i * 7)
			}
			want := make([]byte, n)
			for i := range p {
				want[i] = p[i] ^ key[(phase+i)&3]
			}
			got := append([]byte(nil), p...)
			if next := ws.Mask(key, phase, got); next != (phase+n)&3 {
				t.Fatalf("n %d phase %d: next phase %d", n, phase, next)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("n %d phase %d: %x, want %x", n, phase, got, want)
			}
		}
	}
}
