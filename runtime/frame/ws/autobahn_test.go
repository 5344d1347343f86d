package ws_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/percore/percore/internal/wstest"
	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/frame/ws"
)

// TestAutobahn plays the Autobahn fuzzingclient's part against the codec
// as an echo server, case by case: sections 1 to 7, 9 and 10 (the
// fuzzingclient's whole non-compression list, 9.9 and 9.10 being disabled
// there), 12 and 13 (permessage-deflate) with the server's default
// configuration and with context takeover allowed. Every case must reach
// Autobahn's strict outcome (its "OK", not "NON-STRICT"): the events it
// expects, the right end closing first, an allowed close code, and the
// server closing the connection. Section 9's sizes and the message counts
// of 9.7, 9.8, 12 and 13 are scaled down unless -ws.full.
func TestAutobahn(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d (masking keys and the order of nothing else)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	groups := []struct {
		name  string
		cases []abCase
		cfg   ws.Config
	}{
		{"1-7", cases1to7(), ws.Config{}},
		{"9-10", cases9and10(), ws.Config{}},
		{"12-13", cases12and13(), ws.Config{Deflate: ws.Deflate{Enabled: true}}},
		{"12-13-takeover", cases12and13(), ws.Config{Deflate: ws.Deflate{Enabled: true,
			WriteContextTakeover: true, ReadContextTakeover: true}}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			pool := ws.NewPool(g.cfg)
			for _, c := range g.cases {
				t.Run(c.id, func(t *testing.T) {
					if err := runCase(c, pool, rng); err != nil {
						t.Fatalf("case %s: %v", c.id, err)
					}
				})
			}
		})
	}
}

// newRand is the masking keys' source of the cases that encode frames
// ahead of their run.
func newRand() *rand.Rand { return rand.New(rand.NewPCG(rand.Uint64(), 1)) }

// fuzzer is the state of one case's connection, seen from the fuzzer.
type fuzzer struct {
	peer        *wstest.EchoPeer
	r           *reader
	rng         *rand.Rand
	sentClose   bool // the fuzzer's Close went out
	serverFirst bool // the endpoint's Close came before the fuzzer's
	deflate     *deflater
}

// write hands bytes to the endpoint and reads its answer.
func (f *fuzzer) write(b []byte, completesClose bool) {
	if f.peer.Closed {
		return
	}
	if completesClose {
		f.sentClose = true
	}
	wasClosed := f.r.closed
	f.peer.Feed(b)
	f.r.feed(f.peer.Out)
	f.peer.Out = f.peer.Out[:0]
	if f.r.closed && !wasClosed {
		f.serverFirst = !f.sentClose
	}
}

// sendStep writes a step's frames as the fuzzer puts them on the wire.
func (f *fuzzer) sendStep(s step) {
	if s.raw != nil {
		f.write(s.raw(), false)
		return
	}
	var pending []byte
	pendingClose := false
	flush := func() {
		if len(pending) > 0 {
			f.write(pending, pendingClose)
			pending, pendingClose = nil, false
		}
	}
	for _, sd := range s.sends {
		enc := sd.f.encode(f.rng)
		isClose := sd.f.closing
		switch {
		case sd.chop == 0:
			pending = append(pending, enc...)
			pendingClose = pendingClose || isClose
		case sd.chop == syncWrite:
			flush()
			f.write(enc, isClose)
		default:
			flush()
			for i := 0; i < len(enc); i += sd.chop {
				end := min(i+sd.chop, len(enc))
				f.write(enc[i:end], isClose && end == len(enc))
			}
		}
	}
	flush()
}

func runCase(c abCase, pool *ws.Pool, rng *rand.Rand) error {
	f := &fuzzer{r: &reader{}, rng: rng}
	var hs *ws.Handshake
	if c.offers != nil {
		h, resp, err := handshake(pool, c.offers)
		if err != nil {
			return err
		}
		hs = &h
		if hs.Deflate.Enabled {
			// The fuzzer's side of the extension, from the response as
			// it reads it.
			f.deflate = newDeflater(resp["client_no_context_takeover"] != "")
			f.r.inflate = resp["server_no_context_takeover"] == ""
			f.r.windowSize = 1 << 15
			if b := resp["server_max_window_bits"]; b != "" && b != "-" {
				n, _ := strconv.Atoi(b)
				f.r.windowSize = 1 << n
			}
		} else {
			return fmt.Errorf("permessage-deflate declined: offers %q", c.offers)
		}
	}
	f.peer = wstest.NewEchoPeer(pool, ws.Server, hs)
	for _, s := range c.steps {
		if s.mark != "" {
			if f.peer.Closed {
				break
			}
			f.r.events = append(f.r.events, event{kind: "timeout", payload: s.mark})
		}
		f.sendStep(s)
	}
	if c.gen != nil {
		c.messages = c.gen()
	}
	echoed := 0
	for i, m := range c.messages {
		op := byte(1)
		if m.binary {
			op = 2
		}
		before := len(f.r.events)
		for _, fr := range message(op, []byte(m.payload), c.fragment, f.deflate) {
			f.write(fr.encode(f.rng), false)
		}
		if f.r.err != nil {
			return fmt.Errorf("message %d: reading the echo: %v", i, f.r.err)
		}
		if len(f.r.events) != before+1 || f.r.events[before] != m {
			return fmt.Errorf("message %d of %d bytes: echo %v, endpoint error %v", i, len(m.payload), f.r.events[before:], f.peer.Err)
		}
		f.r.events = f.r.events[:before] // checked: let it go
		echoed++
	}
	if echoed != len(c.messages) {
		return fmt.Errorf("%d of %d messages echoed", echoed, len(c.messages))
	}
	if c.closedByMe && !c.ownClose {
		f.write(closeFrame(normal, nil).encode(f.rng), true)
	}
	return c.judge(f)
}

// judge compares the outcome with the case's expectation, as
// case.py's onConnectionLost does, strictly.
func (c abCase) judge(f *fuzzer) error {
	r := f.r
	if r.err != nil {
		return fmt.Errorf("the endpoint's output: %v", r.err)
	}
	if !r.closed || !f.peer.Closed {
		return fmt.Errorf("no closing handshake: close frame %v, connection closed %v (endpoint error %v)", r.closed, f.peer.Closed, f.peer.Err)
	}
	if c.info {
		return nil
	}
	want := c.ok
	if !slices.Equal(r.events, want) {
		return fmt.Errorf("events %v, want %v (endpoint error %v)", r.events, want, f.peer.Err)
	}
	if c.closedByMe == f.serverFirst {
		return fmt.Errorf("the wrong end closed first: the endpoint first %v (endpoint error %v)", f.serverFirst, f.peer.Err)
	}
	if r.closeCode != -1 && !slices.Contains(c.codes, r.closeCode) {
		return fmt.Errorf("close code %d, want one of %v (endpoint error %v)", r.closeCode, c.codes, f.peer.Err)
	}
	return nil
}

// handshake runs the opening handshake of a client offering offers, and
// returns what the server agreed and the parameters of its response as
// the fuzzer reads them ("-" for a parameter without a value).
func handshake(pool *ws.Pool, offers []string) (ws.Handshake, map[string]string, error) {
	req := "GET / HTTP/1.1\r\nHost: localhost:9001\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Extensions: " + strings.Join(offers, ", ") + "\r\n\r\n"
	var r http1.Request
	if ok, err := http1.ParseRequest([]byte(req), &r, http1.Limits{}); !ok || err != nil {
		return ws.Handshake{}, nil, fmt.Errorf("parse request: %v", err)
	}
	hs, herr := ws.Accept(&r, pool.Config())
	if herr != nil {
		return hs, nil, herr
	}
	out := ws.AppendAccept(nil, &hs)
	var resp http1.Response
	if ok, err := http1.ParseResponse(out, &resp, false, http1.Limits{}); !ok || err != nil {
		return hs, nil, fmt.Errorf("parse response %q: %v", out, err)
	}
	params := map[string]string{}
	ext := string(resp.Header.Get("Sec-WebSocket-Extensions"))
	for i, p := range strings.Split(ext, ";") {
		p = strings.TrimSpace(p)
		if i == 0 {
			if p != "" && p != "permessage-deflate" {
				return hs, nil, fmt.Errorf("response extension %q", p)
			}
			continue
		}
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			v = "-"
		}
		params[k] = v
	}
	return hs, params, nil
}
