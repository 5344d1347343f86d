package ws_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/percore/percore/runtime/frame/ws"
)

// decodeAll runs a Conn over in, shown in pieces of step bytes as
// frame.View shows them, and returns what it saw: the events with their
// payloads, and the close code of the error it stopped at.
func decodeAll(in []byte, step int, role ws.Role, deflate bool) (string, error) {
	pool := ws.NewPool(ws.Config{Limits: ws.Limits{MaxMessage: 1 << 20}})
	var hs *ws.Handshake
	if deflate {
		hs = &ws.Handshake{Deflate: ws.DeflateParams{Enabled: true}}
	}
	var c ws.Conn
	c.Init(pool, role, hs)
	var out bytes.Buffer
	var held []byte
	for off := 0; off < len(in); off += step {
		buf := append(held, in[off:min(off+step, len(in))]...)
		pos := 0
		for {
			n, ev, p, err := c.Next(buf[pos:])
			if n < 0 || pos+n > len(buf) {
				return "", fmt.Errorf("consumed %d of %d", n, len(buf)-pos)
			}
			pos += n
			if err != nil {
				var ce *ws.CloseError
				if !errors.As(err, &ce) {
					return "", fmt.Errorf("error %v is not a *CloseError", err)
				}
				fmt.Fprintf(&out, "error %d", ce.Code)
				return out.String(), nil
			}
			if ev == ws.NeedMore {
				break
			}
			fmt.Fprintf(&out, "%v %q\n", ev, p)
		}
		held = append([]byte(nil), buf[pos:]...)
		if len(held) > ws.MaxHeaderLen+ws.MaxControlPayload {
			return "", fmt.Errorf("%d bytes left unconsumed", len(held))
		}
	}
	return out.String(), nil
}

// FuzzDecoder: any input, for either role, with and without
// permessage-deflate, decodes to the same events and the same close code
// whether it arrives whole or a byte at a time, never leaves more than a
// header or a control frame unconsumed, and fails only with *CloseError.
func FuzzDecoder(f *testing.F) {
	f.Add(raw(0x81, true, []byte("hello")), false, false)
	f.Add(append(raw(0x01, true, []byte("hel")), append(raw(0x89, true, []byte("p")), raw(0x80, true, []byte("lo"))...)...), false, false)
	f.Add(raw(0x82, false, make([]byte, 300)), true, false)
	f.Add(rawLen(0x82, true, 70000, make([]byte, 70000)), false, false)
	f.Add(raw(0x88, true, []byte{0x03, 0xe8, 'b', 'y', 'e'}), false, false)
	f.Add(raw(0x81, true, []byte("\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80")), false, false)
	f.Add(compressedFrame(1, deflateRaw([]byte("compressed text, compressed text"))), false, true)
	f.Add(raw(0x83, true, nil), false, false)
	f.Fuzz(func(t *testing.T, in []byte, client, deflate bool) {
		role := ws.Server
		if client {
			role = ws.Client
		}
		whole, err := decodeAll(bytes.Clone(in), max(len(in), 1), role, deflate)
		if err != nil {
			t.Fatal(err)
		}
		bytewise, err := decodeAll(bytes.Clone(in), 1, role, deflate)
		if err != nil {
			t.Fatal(err)
		}
		if whole != bytewise {
			t.Fatalf("whole:\n%s\nbyte by byte:\n%s", whole, bytewise)
		}
	})
}
