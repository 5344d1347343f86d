// Command wsgorilla is a peer gateway of issue 27's WebSocket benchmark:
// the protocol of examples/bench/gwproto on gorilla/websocket v1.5.3 and
// net/http, built as gorilla's chat example builds a hub: a read goroutine
// and a write goroutine per connection, a buffered send channel (the
// outbound cap, -queue) that a publish skips when it is full (the message
// dropped for that subscriber and counted), pings from the writer every
// -ping-interval, a read deadline of twice that moved on by every frame
// and Pong, and a write deadline of -write-timeout (the writer gives up and
// closes the connection). A publish is encoded once for all subscribers
// with websocket.PreparedMessage; write buffers come from a pool
// (Upgrader.WriteBufferPool), as gorilla's documentation recommends for
// many connections that write now and then.
//
//	GOMAXPROCS=1 wsgorilla -addr 127.0.0.1:7300 -secret S -ping-interval 30s
package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/percore/percore/examples/bench/gwproto"
)

func main() { gwproto.Main("wsgorilla", serve) }

type outMsg struct {
	op       int
	data     []byte
	prepared *websocket.PreparedMessage
}

type client struct {
	conn *websocket.Conn
	send chan outMsg
	subs gwproto.Subscription // the read goroutine's
	done chan struct{}        // closed when the read goroutine ends
}

type server struct {
	f       gwproto.Flags
	topics  gwproto.Topics[*client]
	conns   gwproto.Set[*client]
	dropped atomic.Int64
	up      websocket.Upgrader
}

func serve(ctx context.Context, ln net.Listener, f gwproto.Flags) error {
	s := &server{f: f}
	s.up = websocket.Upgrader{
		ReadBufferSize:  1024, // the chat example's sizes
		WriteBufferSize: 1024,
		WriteBufferPool: &sync.Pool{},
		CheckOrigin:     func(*http.Request) bool { return true },
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", s.handleWS)
	mux.HandleFunc("/publish", gwproto.PublishHandler(s.deliver))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { gwproto.Refuse(w) })
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	err := hs.Shutdown(context.Background())
	s.conns.Close(func(c *client) { c.conn.Close(); <-c.done })
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *server) handleWS(w http.ResponseWriter, r *http.Request) {
	if _, ok := gwproto.Authorized(r, s.f.Secret); !ok {
		gwproto.Refuse(w)
		return
	}
	conn, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade answered the request
	}
	c := &client{conn: conn, send: make(chan outMsg, s.f.Queue), done: make(chan struct{})}
	if !s.conns.Add(c) {
		conn.Close()
		return
	}
	go s.writePump(c)
	go s.readPump(c)
}

func (s *server) readPump(c *client) {
	defer func() {
		gwproto.Leave(&s.topics, &c.subs, c)
		s.conns.Remove(c)
		close(c.send) // ends the writer, which closes the connection
		close(c.done)
	}()
	wait := 2 * s.f.PingInterval
	c.conn.SetReadLimit(gwproto.MaxPublish)
	_ = c.conn.SetReadDeadline(time.Now().Add(wait))
	c.conn.SetPongHandler(func(string) error { return c.conn.SetReadDeadline(time.Now().Add(wait)) })
	for {
		op, p, err := c.conn.ReadMessage()
		if err != nil {
			return
		}
		_ = c.conn.SetReadDeadline(time.Now().Add(wait))
		switch op {
		case websocket.BinaryMessage:
			c.send <- outMsg{op: op, data: p} // echo: the reader waits for room
		case websocket.TextMessage:
			cmd, err := gwproto.ParseCommand(p)
			if err == nil {
				gwproto.Apply(&s.topics, &c.subs, c, cmd)
			}
			c.send <- outMsg{op: websocket.TextMessage, data: gwproto.Reply(cmd, err)}
		}
	}
}

func (s *server) writePump(c *client) {
	ticker := time.NewTicker(s.f.PingInterval)
	defer func() {
		ticker.Stop()
		c.conn.Close()
		for range c.send { // until the reader closes it
		}
	}()
	for {
		select {
		case m, ok := <-c.send:
			if !ok {
				_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				return
			}
			_ = c.conn.SetWriteDeadline(time.Now().Add(s.f.WriteTimeout))
			var err error
			if m.prepared != nil {
				err = c.conn.WritePreparedMessage(m.prepared)
			} else {
				err = c.conn.WriteMessage(m.op, m.data)
			}
			if err != nil {
				return
			}
		case <-ticker.C:
			_ = c.conn.SetWriteDeadline(time.Now().Add(s.f.WriteTimeout))
			if err := c.conn.WriteMessage(websocket.PingMessage, nil); err != nil {
				return
			}
		}
	}
}

// deliver hands body to every subscriber of topic whose queue has room.
func (s *server) deliver(topic string, body []byte) int {
	pm, err := websocket.NewPreparedMessage(websocket.TextMessage, body)
	if err != nil {
		return 0
	}
	n := 0
	s.topics.Each(topic, func(c *client) {
		select {
		case c.send <- outMsg{prepared: pm}:
			n++
		default:
			s.dropped.Add(1)
		}
	})
	return n
}
