package upstream_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// startEcho starts a line echo upstream; the test can count its accepts
// and close, or write to, the connections it holds.
func startEcho(t *testing.T) *pctest.Server {
	t.Helper()
	return pctest.Serve(t, pctest.LineEcho)
}

// client runs a one-loop percore runtime with a pool of upstream
// connections to addr.
type client struct {
	t     *testing.T
	loop  *percore.Loop
	p     *pool.Pool[*upstream.Conn]
	local *pool.Local[*upstream.Conn]
}

func newClient(t *testing.T, b percore.Backend, addr string, cfg pool.Config) *client {
	t.Helper()
	rt := pctest.Start(t, percore.Config{Backend: b, Logger: slog.New(slog.DiscardHandler)}, nil)
	m, err := upstream.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New[*upstream.Conn](m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c := &client{t: t, loop: rt.Loops()[0], p: p}
	c.on(func() { c.local = p.Local(c.loop) })
	return c
}

// on runs f on the client's loop and waits for it.
func (c *client) on(f func()) {
	c.t.Helper()
	pctest.OnLoop(c.t, c.loop, f)
}

// exchange is one request over a leased connection.
type exchange struct {
	conn  *upstream.Conn
	reply string
	err   error
}

// roundTrip leases a connection, sends line, waits for the reply line and
// puts the connection back (keep: leave the receiver attached instead).
func (c *client) roundTrip(line string, keep bool) exchange {
	c.t.Helper()
	res := make(chan exchange, 1)
	c.on(func() {
		c.local.Get(func(ls pool.Lease[*upstream.Conn], err error) {
			if err != nil {
				res <- exchange{err: err}
				return
			}
			uc := ls.Conn()
			var buf []byte
			uc.Receive(func(data []byte) {
				buf = append(buf, data...)
				if bytes.IndexByte(buf, '\n') < 0 {
					return
				}
				if !keep {
					uc.Receive(nil, nil)
				}
				c.local.Put(ls)
				res <- exchange{conn: uc, reply: string(buf)}
			}, func(err error) {
				c.local.Put(ls)
				res <- exchange{conn: uc, err: err}
			})
			uc.Write([]byte(line))
		})
	})
	return pctest.Recv(c.t, res, "reply")
}

func (c *client) state() (st pool.State, s pool.Statistics) {
	c.on(func() { st, s = c.local.State(), c.local.Statistics() })
	return st, s
}

func TestRoundTripAndReuse(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := startEcho(t)
		c := newClient(t, b, up.Addr(), pool.Config{})
		first := c.roundTrip("hello\n", false)
		second := c.roundTrip("again\n", false)
		if first.err != nil || second.err != nil || first.reply != "hello\n" || second.reply != "again\n" {
			t.Fatalf("replies %+v, %+v", first, second)
		}
		if first.conn != second.conn || up.Accepted() != 1 {
			t.Errorf("the idle connection was not reused (%d accepts)", up.Accepted())
		}
	})
}

func TestDroppedConnections(t *testing.T) {
	tests := []struct {
		name   string
		before func(up *pctest.Server)
		keep   bool // return with the receiver still attached
	}{
		{"closed by the upstream while idle", func(up *pctest.Server) {
			up.Each(func(c net.Conn) { c.Close() })
		}, false},
		{"unsolicited bytes while idle", func(up *pctest.Server) {
			up.Each(func(c net.Conn) { c.Write([]byte("surprise\n")) })
		}, false},
		{"returned mid-exchange", nil, true},
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				up := startEcho(t)
				c := newClient(t, b, up.Addr(), pool.Config{})
				first := c.roundTrip("one\n", tt.keep)
				if first.err != nil {
					t.Fatal(first.err)
				}
				if tt.before != nil {
					tt.before(up)
					pctest.WaitFor(t, "the client to notice", func() bool {
						var closed bool
						c.on(func() { closed = first.conn.Err() != nil })
						return closed
					})
				}
				second := c.roundTrip("two\n", false)
				if second.err != nil || second.reply != "two\n" {
					t.Fatalf("second exchange: %+v", second)
				}
				if second.conn == first.conn {
					t.Error("a broken connection was lent again")
				}
				st, s := c.state()
				if s.Created != 2 || s.Closed() != 1 || s.Created != s.Closed()+uint64(st.Connections) {
					t.Errorf("state %v; statistics %v", st, s)
				}
			})
		}
	})
}

func TestRefused(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		c := newClient(t, b, pctest.DeadAddr(t), pool.Config{MaxSize: 1})
		for range 3 { // each frees its slot
			r := c.roundTrip("x\n", false)
			if !errors.Is(r.err, syscall.ECONNREFUSED) {
				t.Fatalf("get: %v; want ECONNREFUSED", r.err)
			}
		}
		if st, s := c.state(); st.Connecting != 0 || s.ConnectErrors != 3 || s.GetsFailed != 3 {
			t.Errorf("state %v; statistics %v", st, s)
		}
	})
}

// fakeLoop is a pool.Loop that is not a percore loop.
type fakeLoop struct{}

func (fakeLoop) Schedule(time.Duration, func()) func() bool { return func() bool { return false } }
func (fakeLoop) Post(func()) error                          { return nil }
func (fakeLoop) OnStop(func())                              {}
func (fakeLoop) OnPublish(func())                           {}

func TestConnectNeedsPercoreLoop(t *testing.T) {
	m, err := upstream.New("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	var got error
	m.Connect(&fakeLoop{}, func(_ *upstream.Conn, err error) { got = err })
	if got == nil {
		t.Error("connect from a foreign loop: no error")
	}
	if _, err := upstream.New("localhost:80"); err == nil {
		t.Error("a host name: no error")
	}
}
