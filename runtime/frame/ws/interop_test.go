package ws_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/lxzan/gws"

	"github.com/percore/percore/runtime/frame/ws"
)

// Interop both ways with gorilla/websocket v1.5.3 and lxzan/gws v1.8.9
// (test-only dependencies: decision record 0032), with and without
// permessage-deflate. The node `ws` package is in node_test.go.

// interopMessages are what every interop test sends: empty, short, text
// with multi-byte code points, a binary message over 64 KiB, and a 1 MiB
// compressible text.
func interopMessages() []struct {
	op ws.Opcode
	p  []byte
} {
	var big strings.Builder
	for i := 0; big.Len() < 1<<20; i++ {
		fmt.Fprintf(&big, "{\"n\":%d,\"city\":\"Zürich\"}\n", i)
	}
	bin := make([]byte, 70000)
	for i := range bin {
		bin[i] = byte(i * 31)
	}
	return []struct {
		op ws.Opcode
		p  []byte
	}{
		{ws.OpText, nil},
		{ws.OpText, []byte("hello")},
		{ws.OpText, []byte(strings.Repeat("Größe 𝄞 € ", 20))},
		{ws.OpBinary, bin},
		{ws.OpText, []byte(big.String())},
	}
}

// exercise runs the client side against an echo server: every message and
// its echo, a ping and its pong, then the closing handshake.
func exercise(t *testing.T, cl *client, wantDeflate bool) {
	t.Helper()
	if cl.c.Compressed() != wantDeflate {
		t.Fatalf("permessage-deflate agreed: %v, want %v (%+v)", cl.c.Compressed(), wantDeflate, cl.hs.Deflate)
	}
	for round := range 2 { // twice: context takeover carries over
		for i, m := range interopMessages() {
			if err := cl.send(m.op, m.p); err != nil {
				t.Fatal(err)
			}
			ev, p, err := cl.recv()
			for err == nil && (ev == ws.Ping || ev == ws.Pong) {
				ev, p, err = cl.recv()
			}
			if err != nil {
				t.Fatalf("round %d message %d: %v", round, i, err)
			}
			want := ws.Text
			if m.op == ws.OpBinary {
				want = ws.Binary
			}
			if ev != want || !bytes.Equal(p, m.p) {
				t.Fatalf("round %d message %d: echo %v of %d bytes, want %v of %d", round, i, ev, len(p), want, len(m.p))
			}
		}
	}
	if err := cl.ping([]byte("are you there")); err != nil {
		t.Fatal(err)
	}
	ev, p, err := cl.recv()
	if err != nil || ev != ws.Pong || string(p) != "are you there" {
		t.Fatalf("pong: %v %q %v", ev, p, err)
	}
	code, err := cl.close(4000)
	if err != nil {
		t.Fatal(err)
	}
	if code != 4000 && code != ws.CloseNormal {
		t.Fatalf("close echoed %d", code)
	}
}

func gorillaEcho(t *testing.T, compress bool) string {
	up := websocket.Upgrader{EnableCompression: compress, CheckOrigin: func(*http.Request) bool { return true }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		c.SetReadLimit(16 << 20)
		for {
			mt, p, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, p); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestGorillaServer: the codec's client against gorilla's server.
func TestGorillaServer(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("deflate=%v", compress), func(t *testing.T) {
			addr := gorillaEcho(t, compress)
			cl := dial(t, addr, "/", ws.Config{Deflate: ws.Deflate{Enabled: true}})
			exercise(t, cl, compress)
		})
	}
}

// gorillaClient runs gorilla's client against addr: every message and its
// echo, a ping, and the close.
func gorillaClient(t *testing.T, addr string, compress bool) {
	d := websocket.Dialer{EnableCompression: compress, HandshakeTimeout: 10 * time.Second}
	c, resp, err := d.Dial("ws://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	agreed := strings.Contains(resp.Header.Get("Sec-WebSocket-Extensions"), "permessage-deflate")
	if agreed != compress {
		t.Fatalf("permessage-deflate agreed: %v, want %v", agreed, compress)
	}
	c.SetReadLimit(16 << 20)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for round := range 2 {
		for i, m := range interopMessages() {
			mt := websocket.TextMessage
			if m.op == ws.OpBinary {
				mt = websocket.BinaryMessage
			}
			if err := c.WriteMessage(mt, m.p); err != nil {
				t.Fatal(err)
			}
			gt, p, err := c.ReadMessage()
			if err != nil || gt != mt || !bytes.Equal(p, m.p) {
				t.Fatalf("round %d message %d: %v %d bytes %v", round, i, gt, len(p), err)
			}
		}
	}
	pong := make(chan string, 1)
	c.SetPongHandler(func(s string) error { pong <- s; return nil })
	c.WriteControl(websocket.PingMessage, []byte("ping!"), time.Now().Add(time.Second))
	c.WriteMessage(websocket.TextMessage, []byte("after ping"))
	if _, p, err := c.ReadMessage(); err != nil || string(p) != "after ping" {
		t.Fatalf("after ping: %q %v", p, err)
	}
	if s := <-pong; s != "ping!" {
		t.Fatalf("pong %q", s)
	}
	c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4001, "done"))
	_, _, err = c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4001 {
		t.Fatalf("close: %v, want the echo of 4001", err)
	}
}

// TestGorillaClient: gorilla's client against the codec's server.
// (Gorilla's client accepts permessage-deflate only without context
// takeover both ways, which is the server's default.)
func TestGorillaClient(t *testing.T) {
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("deflate=%v", compress), func(t *testing.T) {
			addr := echoServer(t, ws.Config{Deflate: ws.Deflate{Enabled: true}})
			gorillaClient(t, addr, compress)
		})
	}
}

type gwsEcho struct{ gws.BuiltinEventHandler }

func (gwsEcho) OnMessage(c *gws.Conn, m *gws.Message) {
	defer m.Close()
	_ = c.WriteMessage(m.Opcode, m.Bytes())
}

// gwsDeflates are gws's permessage-deflate settings the tests use: off,
// without context takeover, with it both ways (gws then limits its windows
// to 12 bits).
var gwsDeflates = []gws.PermessageDeflate{
	{},
	{Enabled: true, Threshold: 1},
	{Enabled: true, ServerContextTakeover: true, ClientContextTakeover: true, Threshold: 1},
}

// TestGwsServer: the codec's client against gws's server.
func TestGwsServer(t *testing.T) {
	for i, pd := range gwsDeflates {
		for _, ours := range []ws.Deflate{{Enabled: true}, {Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true}} {
			t.Run(fmt.Sprintf("gws%d-takeover=%v", i, ours.ReadContextTakeover), func(t *testing.T) {
				up := gws.NewUpgrader(gwsEcho{}, &gws.ServerOption{PermessageDeflate: pd, ReadMaxPayloadSize: 16 << 20})
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					c, err := up.Upgrade(w, r)
					if err != nil {
						return
					}
					c.ReadLoop()
				}))
				t.Cleanup(srv.Close)
				cl := dial(t, strings.TrimPrefix(srv.URL, "http://"), "/", ws.Config{Deflate: ours})
				exercise(t, cl, pd.Enabled)
			})
		}
	}
}

type gwsClient struct {
	gws.BuiltinEventHandler
	got    chan []byte
	pongs  chan string
	closed chan error
}

func (h *gwsClient) OnMessage(c *gws.Conn, m *gws.Message) {
	h.got <- bytes.Clone(m.Bytes())
	m.Close()
}
func (h *gwsClient) OnPong(c *gws.Conn, p []byte)   { h.pongs <- string(p) }
func (h *gwsClient) OnClose(c *gws.Conn, err error) { h.closed <- err }

// TestGwsClient: gws's client against the codec's server.
func TestGwsClient(t *testing.T) {
	for i, pd := range gwsDeflates {
		for _, ours := range []ws.Deflate{{Enabled: true}, {Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true}} {
			t.Run(fmt.Sprintf("gws%d-takeover=%v", i, ours.ReadContextTakeover), func(t *testing.T) {
				addr := echoServer(t, ws.Config{Deflate: ours})
				h := &gwsClient{got: make(chan []byte, 16), pongs: make(chan string, 1), closed: make(chan error, 1)}
				c, _, err := gws.NewClient(h, &gws.ClientOption{Addr: "ws://" + addr + "/", PermessageDeflate: pd, ReadMaxPayloadSize: 16 << 20})
				if err != nil {
					t.Fatal(err)
				}
				go c.ReadLoop()
				timeout := time.After(30 * time.Second)
				for round := range 2 {
					for j, m := range interopMessages() {
						if err := c.WriteMessage(gws.Opcode(m.op), m.p); err != nil {
							t.Fatal(err)
						}
						select {
						case p := <-h.got:
							if !bytes.Equal(p, m.p) {
								t.Fatalf("round %d message %d: echo of %d bytes, want %d", round, j, len(p), len(m.p))
							}
						case err := <-h.closed:
							t.Fatalf("round %d message %d: closed: %v", round, j, err)
						case <-timeout:
							t.Fatal("timeout")
						}
					}
				}
				c.WritePing([]byte("gws ping"))
				if p := <-h.pongs; p != "gws ping" {
					t.Fatalf("pong %q", p)
				}
				// gws's WriteClose closes the socket at once (it does not
				// wait for the answer): only its own report comes back.
				c.WriteClose(4002, []byte("bye"))
				<-h.closed
			})
		}
	}
}

// TestRefusalReachesClients: a refused handshake is an HTTP error that
// gorilla's client reads as one.
func TestRefusalReachesClients(t *testing.T) {
	addr := echoServer(t, ws.Config{Origins: []string{"https://allowed.example"}})
	h := http.Header{"Origin": {"https://other.example"}}
	_, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+"/", h)
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("dial: %v, response %v", err, resp)
	}
	resp.Body.Close()
}

// OnPing answers with the ping's payload (RFC 6455 5.5.3; gws's built-in
// handler answers with an empty pong).
func (gwsEcho) OnPing(c *gws.Conn, p []byte) { _ = c.WritePong(p) }
