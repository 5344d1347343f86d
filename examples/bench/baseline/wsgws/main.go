// Command wsgws is a peer gateway of issue 27's WebSocket benchmark: the
// protocol of examples/bench/gwproto on lxzan/gws v1.8.9 and net/http,
// configured as gws's README's "Best Practice": gws.NewUpgrader with
// Recovery, upgrade in the net/http handler, then ReadLoop in a goroutine
// of its own per connection, deadlines moved on by every frame received.
// Two departures, both for the protocol: ParallelEnabled is off (it
// handles one connection's messages concurrently, and SUB then UNSUB must
// take effect in order), and permessage-deflate is off (the protocol has
// none). A publish is encoded once for all subscribers with
// gws.Broadcaster (the README's way of broadcasting), onto each
// connection's asynchronous write queue; gws's queue has no cap of its
// own, so the gateway counts what it queued per connection and drops a
// publish for a subscriber with -queue messages pending (counted). The
// server pings every connection each -ping-interval from a timer of its
// own (gws only answers Pings), and a read deadline of twice the interval
// closes a connection that does not answer; while publishes are queued
// the write deadline is -write-timeout after the last one written, so a
// subscriber whose writes stall that long is closed by the failed write.
//
//	GOMAXPROCS=1 wsgws -addr 127.0.0.1:7300 -secret S -ping-interval 30s
package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lxzan/gws"

	"github.com/percore/percore/examples/bench/gwproto"
)

func main() { gwproto.Main("wsgws", serve) }

type client struct {
	socket *gws.Conn
	subs   gwproto.Subscription // the read goroutine's
	ping   *time.Timer

	mu      sync.Mutex
	closed  bool // the ping timer stops
	pending int  // publishes queued and not yet written
}

type server struct {
	f       gwproto.Flags
	topics  gwproto.Topics[*client]
	conns   gwproto.Set[*client]
	dropped atomic.Int64
	up      *gws.Upgrader
	wg      sync.WaitGroup
}

const key = "c"

func serve(ctx context.Context, ln net.Listener, f gwproto.Flags) error {
	s := &server{f: f}
	s.up = gws.NewUpgrader(s, &gws.ServerOption{
		Recovery: gws.Recovery,
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		// Before the upgrade (gws's ServerOption.Authorize refuses after
		// hijacking): net/http's 401, as the other peers answer.
		if _, ok := gwproto.Authorized(r, f.Secret); !ok {
			gwproto.Refuse(w)
			return
		}
		socket, err := s.up.Upgrade(w, r)
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			socket.ReadLoop()
		}()
	})
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
	s.conns.Close(func(c *client) { c.socket.NetConn().Close() })
	s.wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (s *server) wait() time.Time { return time.Now().Add(2 * s.f.PingInterval) }

func (s *server) OnOpen(socket *gws.Conn) {
	c := &client{socket: socket}
	socket.Session().Store(key, c)
	_ = socket.SetReadDeadline(s.wait())
	if !s.conns.Add(c) {
		socket.NetConn().Close()
		return
	}
	c.mu.Lock() // the timer's function reads c.ping
	c.ping = time.AfterFunc(s.f.PingInterval, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return
		}
		socket.WriteAsync(gws.OpcodePing, nil, nil)
		c.ping.Reset(s.f.PingInterval)
	})
	c.mu.Unlock()
}

func (s *server) client(socket *gws.Conn) *client {
	v, _ := socket.Session().Load(key)
	c, _ := v.(*client)
	return c
}

func (s *server) OnClose(socket *gws.Conn, _ error) {
	c := s.client(socket)
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true
	if c.ping != nil {
		c.ping.Stop()
	}
	c.mu.Unlock()
	gwproto.Leave(&s.topics, &c.subs, c)
	s.conns.Remove(c)
}

func (s *server) OnPing(socket *gws.Conn, payload []byte) {
	_ = socket.SetReadDeadline(s.wait())
	_ = socket.WritePong(payload)
}

func (s *server) OnPong(socket *gws.Conn, _ []byte) { _ = socket.SetReadDeadline(s.wait()) }

func (s *server) OnMessage(socket *gws.Conn, m *gws.Message) {
	defer m.Close()
	_ = socket.SetReadDeadline(s.wait())
	switch m.Opcode {
	case gws.OpcodeBinary:
		_ = socket.WriteMessage(gws.OpcodeBinary, m.Bytes())
	case gws.OpcodeText:
		c := s.client(socket)
		cmd, err := gwproto.ParseCommand(m.Bytes())
		if err == nil && c != nil {
			gwproto.Apply(&s.topics, &c.subs, c, cmd)
		}
		_ = socket.WriteMessage(gws.OpcodeText, gwproto.Reply(cmd, err))
	}
}

// deliver hands body to every subscriber of topic under the cap.
func (s *server) deliver(topic string, body []byte) int {
	b := gws.NewBroadcaster(gws.OpcodeText, body)
	defer b.Close()
	n := 0
	s.topics.Each(topic, func(c *client) {
		c.mu.Lock()
		if c.pending >= s.f.Queue {
			c.mu.Unlock()
			s.dropped.Add(1)
			return
		}
		if c.pending == 0 {
			_ = c.socket.SetWriteDeadline(time.Now().Add(s.f.WriteTimeout))
		}
		c.pending++
		c.mu.Unlock()
		if err := b.Broadcast(c.socket); err != nil {
			s.written(c)
			return
		}
		c.socket.Async(func() { s.written(c) })
		n++
	})
	return n
}

// written runs on c's write queue after each publish: the next one gets
// -write-timeout from now, and with none left the deadline goes (or the
// next Pong, echo or ack would fail on an old one).
func (s *server) written(c *client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending--
	if c.pending > 0 {
		_ = c.socket.SetWriteDeadline(time.Now().Add(s.f.WriteTimeout))
	} else {
		_ = c.socket.SetWriteDeadline(time.Time{})
	}
}
