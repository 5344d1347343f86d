package wsinterop_test

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

	"github.com/percore/percore/internal/wstest"
	"github.com/percore/percore/runtime/frame/ws"
)

// Interop both ways with gorilla/websocket v1.5.3 and lxzan/gws v1.8.9
// (test-only dependencies: decision records 0032 and 0037), with and
// without permessage-deflate. The node `ws` package is in
// runtime/frame/ws/node_test.go.

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
			cl := wstest.Dial(t, addr, "/", ws.Config{Deflate: ws.Deflate{Enabled: true}})
			wstest.Exercise(t, cl, compress)
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
		for i, m := range wstest.Messages() {
			mt := websocket.TextMessage
			if m.Op == ws.OpBinary {
				mt = websocket.BinaryMessage
			}
			if err := c.WriteMessage(mt, m.Payload); err != nil {
				t.Fatal(err)
			}
			gt, p, err := c.ReadMessage()
			if err != nil || gt != mt || !bytes.Equal(p, m.Payload) {
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
			addr := wstest.EchoServer(t, ws.Config{Deflate: ws.Deflate{Enabled: true}})
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
				cl := wstest.Dial(t, strings.TrimPrefix(srv.URL, "http://"), "/", ws.Config{Deflate: ours})
				wstest.Exercise(t, cl, pd.Enabled)
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
				addr := wstest.EchoServer(t, ws.Config{Deflate: ours})
				h := &gwsClient{got: make(chan []byte, 16), pongs: make(chan string, 1), closed: make(chan error, 1)}
				c, _, err := gws.NewClient(h, &gws.ClientOption{Addr: "ws://" + addr + "/", PermessageDeflate: pd, ReadMaxPayloadSize: 16 << 20})
				if err != nil {
					t.Fatal(err)
				}
				go c.ReadLoop()
				timeout := time.After(30 * time.Second)
				for round := range 2 {
					for j, m := range wstest.Messages() {
						if err := c.WriteMessage(gws.Opcode(m.Op), m.Payload); err != nil {
							t.Fatal(err)
						}
						select {
						case p := <-h.got:
							if !bytes.Equal(p, m.Payload) {
								t.Fatalf("round %d message %d: echo of %d bytes, want %d", round, j, len(p), len(m.Payload))
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
	addr := wstest.EchoServer(t, ws.Config{Origins: []string{"https://allowed.example"}})
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
