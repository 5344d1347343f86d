package upstream_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// result is how one Exchange.Do went.
type result struct {
	reply string
	err   error
}

// do leases a connection and runs one exchange of req on x.
func (c *client) do(x **upstream.Exchange, cfg upstream.ExchangeConfig, req string) result {
	c.t.Helper()
	res := make(chan result, 1)
	c.on(func() {
		if *x == nil {
			*x = upstream.NewExchange(c.local, frame.ScanLines(64), cfg)
		}
		c.local.Get(func(ls pool.Lease[*upstream.Conn], err error) {
			if err != nil {
				res <- result{err: err}
				return
			}
			(*x).Do(ls, []byte(req), func(reply []byte, err error) {
				res <- result{reply: string(reply), err: err}
			})
		})
	})
	return pctest.Recv(c.t, res, "the exchange's end")
}

// TestExchange: a reply ends the exchange and the connection is reused; a
// timeout, a short read, a close, an oversized reply and a reply followed
// by more bytes each end it, and the connection is never lent again.
func TestExchange(t *testing.T) {
	tests := []struct {
		name    string
		serve   func(net.Conn)
		want    string
		err     error // errors.Is; nil: a reply
		reused  bool  // the second exchange reuses the first's connection
		timeout time.Duration
	}{
		{name: "reply", serve: pctest.LineEcho, want: "hello", reused: true},
		{name: "reply in pieces", serve: func(c net.Conn) {
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					return
				}
				for i := range len(line) {
					c.Write([]byte{line[i]})
					time.Sleep(time.Millisecond) // separate reads (the test passes however they arrive)
				}
			}
		}, want: "hello", reused: true},
		{name: "timeout", serve: func(c net.Conn) { io.Copy(io.Discard, c) }, err: upstream.ErrReplyTimeout, timeout: 50 * time.Millisecond},
		{name: "short read", serve: func(c net.Conn) {
			bufio.NewReader(c).ReadString('\n')
			c.Write([]byte("hel"))
		}, err: io.ErrUnexpectedEOF},
		{name: "closed before the reply", serve: func(c net.Conn) {
			bufio.NewReader(c).ReadString('\n')
		}, err: io.EOF},
		{name: "reply over the limit", serve: func(c net.Conn) {
			bufio.NewReader(c).ReadString('\n')
			c.Write([]byte(strings.Repeat("x", 100)))
			io.Copy(io.Discard, c)
		}, err: frame.ErrTooLong},
		{name: "two replies to one request", serve: func(c net.Conn) {
			r := bufio.NewReader(c)
			for {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
				c.Write([]byte("hello\nextra\n"))
			}
		}, want: "hello"},
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				up := pctest.Serve(t, func(c net.Conn) {
					defer c.Close()
					tt.serve(c)
				})
				c := newClient(t, b, up.Addr(), pool.Config{MaxSize: 2})
				cfg := upstream.ExchangeConfig{MaxReply: 64, Timeout: tt.timeout}
				if cfg.Timeout == 0 {
					cfg.Timeout = 10 * time.Second
				}
				var x *upstream.Exchange
				for i := range 2 {
					r := c.do(&x, cfg, "hello\n")
					if tt.err != nil {
						if !errors.Is(r.err, tt.err) {
							t.Fatalf("exchange %d: %q, %v; want %v", i, r.reply, r.err, tt.err)
						}
						if tt.err == upstream.ErrReplyTimeout && !errors.Is(r.err, os.ErrDeadlineExceeded) {
							t.Fatalf("a timeout %v does not match os.ErrDeadlineExceeded", r.err)
						}
					} else if r.err != nil || r.reply != tt.want {
						t.Fatalf("exchange %d: %q, %v; want %q", i, r.reply, r.err, tt.want)
					}
				}
				want := 2
				if tt.reused {
					want = 1
				}
				if n := up.Accepted(); n != want {
					t.Fatalf("the upstream accepted %d connections for two exchanges, want %d", n, want)
				}
				pctest.WaitFor(t, "every lease back", func() bool {
					st, _ := c.state()
					return st.Connections == st.Idle
				})
			})
		}
	})
}

// TestExchangeWithRedis: one Exchange over a pooled connection to a real
// redis-server, each reply framed by resp.ScanReply, a nested one too.
func TestExchangeWithRedis(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (Debian: apt-get install redis-server; scripts/ensure-tools.sh installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	srv := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	pctest.WaitFor(t, "redis-server to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		// The replies read by ScanReply, and by a ReplyScanner (which
		// keeps its progress through a partial reply).
		for _, scanner := range []bool{false, true} {
			c := newClient(t, b, addr, pool.Config{MaxSize: 1})
			var x *upstream.Exchange
			var rs *resp.ReplyScanner
			c.on(func() {
				if scanner {
					x = upstream.NewExchange(c.local, nil, upstream.ExchangeConfig{Timeout: 10 * time.Second,
						Scanner: func() frame.Scanner { rs = resp.NewReplyScanner(resp.ReplyLimits{}); return rs }})
				} else {
					x = upstream.NewExchange(c.local, resp.ScanReply(resp.ReplyLimits{}), upstream.ExchangeConfig{Timeout: 10 * time.Second})
				}
			})
			cfg := upstream.ExchangeConfig{}
			total := 0
			for _, tt := range []struct{ req, want string }{
				{string(resp.AppendCommand(nil, "SET", "k", "a\r\nb")), "+OK\r\n"},
				{string(resp.AppendCommand(nil, "GET", "k")), "$4\r\na\r\nb\r\n"},
				{string(resp.AppendCommand(nil, "SCAN", "0", "MATCH", "k")), "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nk\r\n"},
				{string(resp.AppendCommand(nil, "NOSUCH")), "-ERR unknown command 'NOSUCH', with args beginning with: \r\n"},
			} {
				if r := c.do(&x, cfg, tt.req); r.err != nil || r.reply != tt.want {
					t.Fatalf("scanner %v: %q: %q, %v; want %q", scanner, tt.req, r.reply, r.err, tt.want)
				}
				total += len(tt.want)
			}
			if scanner && (rs.Scanned() == 0 || rs.Scanned() > int64(total)) {
				t.Fatalf("the ReplyScanner examined %d bytes of %d: not the one that read the replies", rs.Scanned(), total)
			}
		}
	})
}
