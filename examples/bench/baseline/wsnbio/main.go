// Command wsnbio is a peer gateway of issue 27's WebSocket benchmark: the
// protocol of examples/bench/gwproto on lesismal/nbio v1.6.8, its HTTP
// engine (nbhttp) in the event-loop mode (IOModNonBlocking, the default:
// connections served by nbio's pollers, no goroutine per connection) with
// its WebSocket upgrader, configured as nbio's websocket example and its
// million-connection benchmark configure it: MaxLoad 1,000,000 and
// ReleaseWebsocketPayload. Handlers run on nbio's executor, in order per
// connection. The upgrader's KeepaliveTime (a read deadline moved on by
// every frame) is twice -ping-interval, and Conn.Keepalive pings every
// -ping-interval. The outbound cap is nbio's MaxWriteBufferSize, -queue x
// 4 KiB and at least one largest message: past it nbio closes the connection (it has no way to drop a message
// and keep the connection, so this peer's slow consumers are closed, not
// dropped-then-closed; decision 0046). nbio has no encode-once broadcast:
// each subscriber's frame is written by Conn.WriteMessage.
//
//	GOMAXPROCS=1 wsnbio -addr 127.0.0.1:7300 -secret S -ping-interval 30s
package main

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/lesismal/nbio/logging"
	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"

	"github.com/percore/percore/examples/bench/gwproto"
)

func main() { gwproto.Main("wsnbio", serve) }

type client struct {
	conn *websocket.Conn
	subs gwproto.Subscription // handlers of one connection run in order
}

type server struct {
	f      gwproto.Flags
	topics gwproto.Topics[*client]
	conns  gwproto.Set[*client]
	up     *websocket.Upgrader
}

func serve(ctx context.Context, ln net.Listener, f gwproto.Flags) error {
	logging.SetLevel(logging.LevelError)
	s := &server{f: f}
	s.up = websocket.NewUpgrader()
	s.up.KeepaliveTime = 2 * f.PingInterval
	s.up.CheckOrigin = func(*http.Request) bool { return true }
	s.up.OnOpen(func(c *websocket.Conn) {
		cl := &client{conn: c}
		c.SetSession(cl)
		if !s.conns.Add(cl) {
			c.Close()
			return
		}
		c.Keepalive(f.PingInterval)
	})
	s.up.OnMessage(func(c *websocket.Conn, op websocket.MessageType, p []byte) {
		switch op {
		case websocket.BinaryMessage:
			_ = c.WriteMessage(websocket.BinaryMessage, p)
		case websocket.TextMessage:
			cl, _ := c.Session().(*client)
			cmd, err := gwproto.ParseCommand(p)
			if err == nil && cl != nil {
				gwproto.Apply(&s.topics, &cl.subs, cl, cmd)
			}
			_ = c.WriteMessage(websocket.TextMessage, gwproto.Reply(cmd, err))
		}
	})
	s.up.OnClose(func(c *websocket.Conn, _ error) {
		cl, _ := c.Session().(*client)
		if cl == nil {
			return
		}
		gwproto.Leave(&s.topics, &cl.subs, cl)
		s.conns.Remove(cl)
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := gwproto.Authorized(r, f.Secret); !ok {
			gwproto.Refuse(w)
			return
		}
		_, _ = s.up.Upgrade(w, r, nil) // on error Upgrade answered the request
	})
	mux.HandleFunc("/publish", gwproto.PublishHandler(s.deliver))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { gwproto.Refuse(w) })
	engine := nbhttp.NewEngine(nbhttp.Config{
		Network:                 "tcp",
		Addrs:                   []string{ln.Addr().String()},
		Listen:                  func(string, string) (net.Listener, error) { return ln, nil },
		MaxLoad:                 1000000,
		ReleaseWebsocketPayload: true,
		MaxWriteBufferSize:      writeCap(f.Queue),
		Handler:                 mux,
	})
	s.up.Engine = engine
	if err := engine.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	s.conns.Close(func(c *client) { c.conn.Close() })
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return engine.Shutdown(sctx)
}

// writeCap is nbio's MaxWriteBufferSize for -queue: queue x 4 KiB, and at
// least one message of the largest size (nbio closes a connection when
// what it holds plus the write at hand is over the cap, so a cap under
// one message would close on the first large publish).
func writeCap(queue int) int { return max(queue*4096, gwproto.MaxPublish+14) }

// deliver writes body to every subscriber of topic (nbio buffers what the
// socket does not take, up to MaxWriteBufferSize).
func (s *server) deliver(topic string, body []byte) int {
	n := 0
	s.topics.Each(topic, func(c *client) {
		if c.conn.WriteMessage(websocket.TextMessage, body) == nil {
			n++
		}
	})
	return n
}
