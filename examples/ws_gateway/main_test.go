//go:build linux

package main

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/examples/internal/serverflag"
	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/ws"
)

// The protocol's own cases (auth, pub/sub, order, echo, slow consumers,
// heartbeats) run against this program from the benchmark module:
// examples/bench/gwproto/gwtest/percore_test.go. These are the bad input
// the issue lists, on both backends.

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		main() // a gateway process of restart_test.go
		os.Exit(0)
	}
	leakcheck.Main(m)
}

const testSecret = "test-secret"

func startGateway(t *testing.T, b percore.Backend, mod func(*options)) *running {
	t.Helper()
	o := options{secret: testSecret, pingInterval: time.Minute, writeTimeout: 10 * time.Second,
		headTimeout: 10 * time.Second, queue: 256, messageBytes: 1024}
	if mod != nil {
		mod(&o)
	}
	r, err := start(&serverflag.Flags{Addr: "127.0.0.1:0", Cores: []int{0}, Backend: b}, o, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	return r
}

func token(user string) string {
	m := hmac.New(sha256.New, []byte(testSecret))
	m.Write([]byte(user))
	return hex.EncodeToString(m.Sum(nil))
}

// wsDial opens a WebSocket to r as user and returns the connection,
// past the 101.
func wsDial(t *testing.T, r *running, user string) (net.Conn, *bufio.Reader) {
	t.Helper()
	return wsDialAddr(t, r.rt.Addr().String(), user)
}

// wsDialAddr opens a WebSocket to the gateway at addr.
func wsDialAddr(t *testing.T, addr, user string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := pctest.Dial(t, addr)
	fmt.Fprintf(c, "GET /ws?user=%s&token=%s HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", user, token(user))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("upgrade: %d %v", resp.StatusCode, resp.Header)
	}
	return c, br
}

// frame is a client frame: masked unless unmasked is set.
func frame(b0 byte, payload []byte, unmasked bool) []byte {
	out := []byte{b0}
	mask := byte(0x80)
	if unmasked {
		mask = 0
	}
	switch n := len(payload); {
	case n < 126:
		out = append(out, mask|byte(n))
	case n < 1<<16:
		out = append(out, mask|126, byte(n>>8), byte(n))
	default:
		out = append(out, mask|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	if unmasked {
		return append(out, payload...)
	}
	key := [4]byte{1, 2, 3, 4}
	out = append(out, key[:]...)
	for i, c := range payload {
		out = append(out, c^key[i%4])
	}
	return out
}

// readFrame reads one server frame (unmasked, as a server sends).
func readFrame(br *bufio.Reader) (op byte, p []byte, err error) {
	var h [2]byte
	if _, err = io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 != 0 {
		return 0, nil, errors.New("a masked frame from the server")
	}
	n := int(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		_, err = io.ReadFull(br, b[:])
		n = int(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		_, err = io.ReadFull(br, b[:])
		n = int(binary.BigEndian.Uint64(b[:]))
	}
	if err != nil {
		return 0, nil, err
	}
	p = make([]byte, n)
	_, err = io.ReadFull(br, p)
	return h[0] & 0x0f, p, err
}

// closeCode reads frames until the server's Close and returns its code,
// then requires the end of the stream.
func closeCode(t *testing.T, br *bufio.Reader) ws.CloseCode {
	t.Helper()
	for {
		op, p, err := readFrame(br)
		if err != nil {
			t.Fatalf("want a Close frame: %v", err)
		}
		if op != 0x8 {
			continue
		}
		if len(p) < 2 {
			t.Fatalf("a Close without a code")
		}
		if _, err := io.Copy(io.Discard, br); err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("after the Close: %v, want the end of the stream", err)
		}
		return ws.CloseCode(binary.BigEndian.Uint16(p))
	}
}

func TestBadFramesCloseWithTheRFCCode(t *testing.T) {
	long := make([]byte, 126)
	cases := []struct {
		name  string
		frame []byte
		want  ws.CloseCode
	}{
		{"reserved bits", frame(0x80|0x40|0x1, []byte("x"), false), ws.CloseProtocolError},
		{"unknown opcode", frame(0x80|0x3, nil, false), ws.CloseProtocolError},
		{"fragmented control", frame(0x9, nil, false), ws.CloseProtocolError},
		{"control over 125 bytes", frame(0x80|0x9, long, false), ws.CloseProtocolError},
		{"unmasked client frame", frame(0x80|0x1, []byte("SUB a"), true), ws.CloseProtocolError},
		{"invalid UTF-8", frame(0x80|0x1, []byte{'S', 0xff, 0xfe}, false), ws.CloseInvalidPayload},
		{"length over the limit", append(binary.BigEndian.AppendUint64([]byte{0x82, 0x80 | 127}, 1<<40), 1, 2, 3, 4), ws.CloseTooBig},
		{"close with a bad code", frame(0x80|0x8, []byte{0x03, 0xe7}, false), ws.CloseProtocolError}, // 999
		{"continuation without a start", frame(0x80, []byte("x"), false), ws.CloseProtocolError},     // FIN, opcode 0 (continuation)
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startGateway(t, b, nil)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				c, br := wsDial(t, r, "mallory")
				if _, err := c.Write(tc.frame); err != nil {
					t.Fatal(err)
				}
				if got := closeCode(t, br); got != tc.want {
					t.Fatalf("closed with %d, want %d", got, tc.want)
				}
			})
		}
		// Counted, and nothing leaked: every client left its loop's list.
		want := uint64(len(cases))
		pctest.WaitFor(t, "the protocol closes counted", func() bool {
			n := r.g.counters[0]
			return n.protocolCloses.Load() == want && n.closes.Load() == want
		})
		// The gateway serves on.
		c, br := wsDial(t, r, "alice")
		c.Write(frame(0x81, []byte("SUB news"), false))
		if op, p, err := readFrame(br); err != nil || op != 0x1 || string(p) != "OK SUB news" {
			t.Fatalf("after the bad clients: %d %q %v", op, p, err)
		}
		// A Close from the client is answered with its code, then the end.
		c.Write(frame(0x88, []byte{0x03, 0xe8, 'b', 'y', 'e'}, false))
		if got := closeCode(t, br); got != ws.CloseNormal {
			t.Fatalf("the close handshake: %d, want 1000", got)
		}
	})
}

func TestRefusedBeforeTheUpgrade(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startGateway(t, b, nil)
		base := "http://" + r.rt.Addr().String()
		hs := "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
		for _, tc := range []struct {
			target string
			status int
		}{
			{"/ws", 401},
			{"/ws?user=alice", 401},
			{"/ws?token=" + token("alice"), 401},
			{"/ws?user=bob&token=" + token("alice"), 401},
			{"/ws?user=alice&token=" + strings.ToUpper(token("alice")), 401},
			{"/elsewhere?user=alice&token=" + token("alice"), 401},
			{"/ws?user=alice&token=" + token("alice") + "&v", 101},
		} {
			c := pctest.Dial(t, r.rt.Addr().String())
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: gw%s", tc.target, hs)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("%s: %v", tc.target, err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s: %d, want %d", tc.target, resp.StatusCode, tc.status)
			}
			c.Close()
		}
		// A good token with a handshake that is not one: the codec's 4xx.
		resp, err := http.Get(base + "/ws?user=alice&token=" + token("alice"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("a plain GET with a good token: %d, want 400", resp.StatusCode)
		}
		// Publishing: 405, 400.
		for _, tc := range []struct {
			method, target, body string
			status               int
		}{
			{"GET", "/publish?topic=a", "", 405},
			{"POST", "/publish", "x", 400},
			{"POST", "/publish?topic=a", "\xff", 400},
			{"POST", "/publish?topic=a", "fine", 200},
		} {
			req, _ := http.NewRequest(tc.method, base+tc.target, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("%s %s: %d %q, want %d", tc.method, tc.target, resp.StatusCode, body, tc.status)
			}
		}
		http.DefaultClient.CloseIdleConnections()
	})
}

// TestHalfOpenUpgradesAreBounded: connections that begin an upgrade and
// never finish it are closed by the head timeout, all of them, and the
// gateway serves meanwhile.
func TestHalfOpenUpgradesAreBounded(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startGateway(t, b, func(o *options) { o.headTimeout = 300 * time.Millisecond })
		const n = 200
		conns := make([]net.Conn, n)
		for i := range conns {
			conns[i] = pctest.Dial(t, r.rt.Addr().String())
			fmt.Fprintf(conns[i], "GET /ws?user=u%d&token=%s HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\n", i, token(fmt.Sprint("u", i)))
		}
		c, br := wsDial(t, r, "alice")
		c.Write(frame(0x81, []byte("SUB a"), false))
		if _, p, err := readFrame(br); err != nil || string(p) != "OK SUB a" {
			t.Fatalf("a client among the half-open ones: %q %v", p, err)
		}
		for i, hc := range conns {
			resp, err := http.ReadResponse(bufio.NewReader(hc), nil)
			hc.(*net.TCPConn).CloseWrite() // the lingering close then ends at once
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusRequestTimeout {
					t.Fatalf("half-open %d: %d, want 408", i, resp.StatusCode)
				}
			}
			if _, err := io.Copy(io.Discard, bufio.NewReader(hc)); err != nil && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("half-open %d: %v, want it closed", i, err)
			}
		}
		pctest.WaitFor(t, "only the live client open", func() bool { return r.rt.Stats().Open == 1 })
	})
}
