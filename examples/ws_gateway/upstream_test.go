//go:build linux

package main

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// fakeUpstream answers each framed message with its payload upside down
// (bytes reversed), under the same client id, and can be killed and
// started again on the same address.
type fakeUpstream struct {
	t     *testing.T
	addr  string
	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
	wg    sync.WaitGroup
}

func startUpstream(t *testing.T, addr string) *fakeUpstream {
	u := &fakeUpstream{t: t, addr: addr}
	u.listen()
	t.Cleanup(u.kill)
	return u
}

func (u *fakeUpstream) listen() {
	ln, err := net.Listen("tcp", u.addr)
	if err != nil {
		u.t.Fatal(err)
	}
	u.addr = ln.Addr().String()
	u.ln = ln
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			u.wg.Add(1)
			go func() { defer u.wg.Done(); u.serve(c) }()
		}
	}()
}

func (u *fakeUpstream) serve(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		var h [4]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return
		}
		msg := make([]byte, 4+binary.BigEndian.Uint32(h[:]))
		copy(msg, h[:])
		if _, err := io.ReadFull(br, msg[4:]); err != nil {
			return
		}
		p := msg[12:]
		for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
			p[i], p[j] = p[j], p[i]
		}
		if _, err := c.Write(msg); err != nil {
			return
		}
	}
}

// kill closes the listener and every connection, and waits for them.
func (u *fakeUpstream) kill() {
	u.ln.Close()
	u.mu.Lock()
	for _, c := range u.conns {
		c.Close()
	}
	u.conns = nil
	u.mu.Unlock()
	u.wg.Wait()
}

func binaryRoundTrip(t *testing.T, c net.Conn, br *bufio.Reader, msg string) (byte, string) {
	t.Helper()
	if _, err := c.Write(frame(0x82, []byte(msg), false)); err != nil {
		t.Fatal(err)
	}
	op, p, err := readFrame(br)
	if err != nil {
		t.Fatal(err)
	}
	return op, string(p)
}

// TestUpstream: binary messages go to the upstream and its replies come
// back to their own clients; a dead upstream fails requests at once and
// the link comes back when the upstream does.
func TestUpstream(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := startUpstream(t, "127.0.0.1:0")
		r := startGateway(t, b, func(o *options) { o.upstream = up.addr })
		alice, abr := wsDial(t, r, "alice")
		bob, bbr := wsDial(t, r, "bob")
		// The link may still be dialing for the first message: wait for it.
		pctest.WaitFor(t, "the first relay", func() bool {
			op, p := binaryRoundTrip(t, alice, abr, "hello")
			return op == 0x2 && p == "olleh"
		})
		for i := range 20 {
			who, br, msg := alice, abr, "from alice"
			if i%2 == 1 {
				who, br, msg = bob, bbr, "bob's"
			}
			if op, p := binaryRoundTrip(t, who, br, msg); op != 0x2 || p != reverse(msg) {
				t.Fatalf("relay %d: %d %q", i, op, p)
			}
		}
		up.kill()
		// Fails fast while it is down (the first may still find the
		// link up: the close may not have been seen yet).
		pctest.WaitFor(t, "a request failed fast", func() bool {
			op, p := binaryRoundTrip(t, bob, bbr, "anyone?")
			return op == 0x1 && p == "ERR upstream unavailable"
		})
		up.listen() // the same address
		pctest.WaitFor(t, "the link back", func() bool {
			op, p := binaryRoundTrip(t, alice, abr, "again")
			return op == 0x2 && p == "niaga"
		})
		// Text is still the gateway's.
		alice.Write(frame(0x81, []byte("SUB t"), false))
		if _, p, err := readFrame(abr); err != nil || string(p) != "OK SUB t" {
			t.Fatalf("a command with an upstream: %q %v", p, err)
		}
	})
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// TestUpstreamIDWrap: once the link's client ids wrap round (2^32 clients
// that sent upstream on one loop), a new client does not take the id of
// one that still holds it: each gets its own replies.
func TestUpstreamIDWrap(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := startUpstream(t, "127.0.0.1:0")
		r := startGateway(t, b, func(o *options) { o.upstream = up.addr })
		l := r.rt.Loops()[0]
		link := func() (u *upLink) {
			pctest.OnLoop(t, l, func() { u = r.g.loops.Get(l).up })
			return u
		}
		pctest.WaitFor(t, "the link up", func() (up bool) {
			pctest.OnLoop(t, l, func() { up = r.g.loops.Get(l).up.up })
			return up
		})
		u := link()
		a, abr := wsDial(t, r, "alice")
		if op, got := binaryRoundTrip(t, a, abr, "from alice"); op != 0x2 || got != reverse("from alice") {
			t.Fatalf("alice's first reply: op %#x, %q", op, got)
		}
		var aliceID uint32
		pctest.OnLoop(t, l, func() {
			for _, route := range u.sent {
				aliceID = route.id
			}
			u.next = aliceID - 2 // the next two ids: one free, then alice's
		})
		bob, bbr := wsDial(t, r, "bob")
		carol, cbr := wsDial(t, r, "carol")
		if op, got := binaryRoundTrip(t, bob, bbr, "from bob"); op != 0x2 || got != reverse("from bob") {
			t.Fatalf("bob's reply: op %#x, %q", op, got)
		}
		if op, got := binaryRoundTrip(t, carol, cbr, "from carol"); op != 0x2 || got != reverse("from carol") {
			t.Fatalf("carol's reply, her id past alice's: op %#x, %q", op, got)
		}
		if op, got := binaryRoundTrip(t, a, abr, "alice again"); op != 0x2 || got != reverse("alice again") {
			t.Fatalf("alice's reply after the ids came round to hers: op %#x, %q", op, got)
		}
		pctest.OnLoop(t, l, func() {
			ids := map[uint32]bool{}
			for _, route := range u.sent {
				if ids[route.id] {
					t.Errorf("two clients hold id %d", route.id)
				}
				ids[route.id] = true
			}
		})
	})
}
