//go:build linux

package main

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/examples/internal/serverflag"
	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/resp"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// redisClients asks redis-server r how many clients it has, this one included.
func redisClients(t *testing.T, r *pctest.RedisServer) int {
	t.Helper()
	c := dialResp(t, r.Addr())
	info := c.do(t, "INFO", "clients")
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "connected_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatalf("no connected_clients in %q", info)
	return 0
}

// respClient is a test's client, with a deadline on every exchange.
type respClient struct {
	c net.Conn
	r *bufio.Reader
}

func dialResp(t *testing.T, addr string) *respClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &respClient{c: c, r: bufio.NewReader(c)}
}

// pipeline sends the commands in one write and returns their replies.
func (rc *respClient) pipeline(t *testing.T, cmds ...[]string) []string {
	t.Helper()
	var req []byte
	for _, c := range cmds {
		req = resp.AppendCommand(req, c...)
	}
	rc.c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := rc.c.Write(req); err != nil {
		t.Fatal(err)
	}
	var out []string
	for range cmds {
		r, err := pctest.ReadReply(rc.r)
		if err != nil {
			t.Fatalf("reply %d of %d: %q, %v", len(out)+1, len(cmds), r, err)
		}
		out = append(out, r)
	}
	return out
}

func (rc *respClient) do(t *testing.T, args ...string) string {
	t.Helper()
	return rc.pipeline(t, args)[0]
}

func bulk(s string) string { return string(resp.AppendBulkString(nil, s)) }

// startProxy starts the proxy on loops loops in front of servers.
func startProxy(t *testing.T, b percore.Backend, loops int, timeout time.Duration, max int, servers ...string) *server {
	t.Helper()
	return startProxyReply(t, b, loops, timeout, max, 1<<20, servers...)
}

// startProxyReply is startProxy with -max-reply maxReply.
func startProxyReply(t *testing.T, b percore.Backend, loops int, timeout time.Duration, max, maxReply int, servers ...string) *server {
	t.Helper()
	use := pctest.LoopCores(t, loops)
	s, err := start(config{Flags: serverflag.Flags{Addr: "127.0.0.1:0", Cores: use, Backend: b}, servers: servers,
		max: max, depth: 4, wait: 5 * time.Second, timeout: timeout, maxReq: 1 << 20, maxReply: maxReply, maxWait: 64,
		logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

// TestForwardingInOrder: clients on two loops pipeline SET, GET, INCR,
// MSET, MGET, DEL and EXISTS over keys of two redis-servers; every reply is
// what one Redis would give, in order, and each key is on the server its
// hash picks, and only there (TestPlacementLikeTwemproxy checks that this
// is twemproxy's choice too).
func TestForwardingInOrder(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r1, r2 := pctest.StartRedis(t), pctest.StartRedis(t)
		s := startProxy(t, b, 2, 10*time.Second, 4, r1.Addr(), r2.Addr())
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for cl := range 8 {
			c := dialResp(t, s.rt.Addr().String())
			wg.Add(1)
			go func() {
				defer wg.Done()
				var cmds [][]string
				var want []string
				p := "c" + strconv.Itoa(cl) + ":"
				for i := range 60 {
					k, k2 := p+strconv.Itoa(i), p+strconv.Itoa(i+1000)
					v := "v" + strconv.Itoa(i)
					cmds = append(cmds, []string{"SET", k, v}, []string{"GET", k}, []string{"INCR", p + "n"},
						[]string{"MSET", k2, "m", k, "w"}, []string{"MGET", k, "none", k2},
						[]string{"EXISTS", k, k2, "none"}, []string{"DEL", k2, "none"}, []string{"GET", k2})
					want = append(want, "+OK\r\n", bulk(v), ":"+strconv.Itoa(i+1)+"\r\n",
						"+OK\r\n", "*3\r\n"+bulk("w")+"$-1\r\n"+bulk("m"),
						":2\r\n", ":1\r\n", "$-1\r\n")
				}
				got := c.pipelineNoFatal(cmds)
				for i := range want {
					if i >= len(got) || got[i] != want[i] {
						g := "(none)"
						if i < len(got) {
							g = got[i]
						}
						errs <- "client " + strconv.Itoa(cl) + " reply " + strconv.Itoa(i) + ": " + strconv.Quote(g) + ", want " + strconv.Quote(want[i])
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		// Each key is where twemproxy would put it, and only there.
		order := twemproxyOrder([]string{r1.Addr(), r2.Addr()})
		direct := []*respClient{dialResp(t, order[0]), dialResp(t, order[1])}
		on := [2]int{}
		for i := range 60 {
			k := "c0:" + strconv.Itoa(i)
			idx := int(fnv1a64([]byte(k)) % 2)
			on[idx]++
			if got := direct[idx].do(t, "GET", k); got != bulk("w") {
				t.Fatalf("%s on server %d: %q", k, idx, got)
			}
			if got := direct[1-idx].do(t, "GET", k); got != "$-1\r\n" {
				t.Fatalf("%s also on server %d: %q", k, 1-idx, got)
			}
		}
		if on[0] == 0 || on[1] == 0 {
			t.Fatalf("60 keys all on one server: %v", on)
		}
	})
}

// pipelineNoFatal is pipeline for a goroutine other than the test's: it
// returns the replies it read.
func (rc *respClient) pipelineNoFatal(cmds [][]string) []string {
	var req []byte
	for _, c := range cmds {
		req = resp.AppendCommand(req, c...)
	}
	rc.c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := rc.c.Write(req); err != nil {
		return nil
	}
	var out []string
	for range cmds {
		r, err := pctest.ReadReply(rc.r)
		if err != nil {
			return out
		}
		out = append(out, r)
	}
	return out
}

// TestAtMostMaxConnections: 16 clients with deep pipelines on two loops
// want more upstream connections than -max allows; redis-server never
// sees more than loops*max of them, and every reply is right.
func TestAtMostMaxConnections(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := pctest.StartRedis(t)
		const loops, max = 2, 2
		s := startProxy(t, b, loops, 10*time.Second, max, r.Addr())
		var wg sync.WaitGroup
		bad := make(chan string, 16)
		for cl := range 16 {
			c := dialResp(t, s.rt.Addr().String())
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 5 {
					var cmds [][]string
					for i := range 50 {
						cmds = append(cmds, []string{"SET", "k" + strconv.Itoa(cl*1000+i), strconv.Itoa(round)})
					}
					for i, got := range c.pipelineNoFatal(cmds) {
						if got != "+OK\r\n" {
							bad <- "SET " + strconv.Itoa(i) + ": " + got
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(bad)
		for e := range bad {
			t.Error(e)
		}
		if n := redisClients(t, r) - 1; n > loops*max || n < 1 {
			t.Fatalf("redis-server has %d proxy connections; at most %d (loops x max)", n, loops*max)
		}
		_, st := s.pools[0].Snapshot()
		if st.Created > uint64(loops*max) {
			t.Fatalf("the pools opened %d connections for an upstream that never failed; want at most %d", st.Created, loops*max)
		}
	})
}

// TestUpstreamKilledAndRestarted: with the server gone, requests get
// "-ERR upstream ..." (never a hang); once it is back, they are served
// again, on new connections.
func TestUpstreamKilledAndRestarted(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := pctest.StartRedis(t)
		s := startProxy(t, b, 1, 10*time.Second, 4, r.Addr())
		c := dialResp(t, s.rt.Addr().String())
		if got := c.do(t, "SET", "k", "v"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
		r.Kill()
		for range 3 { // the pooled connection (closed by the peer), then refused connects
			if got := c.do(t, "GET", "k"); !strings.HasPrefix(got, "-ERR upstream "+r.Addr()) {
				t.Fatalf("GET with the server killed: %q", got)
			}
		}
		r.Start()
		pctest.WaitFor(t, "the proxy to reach the restarted server", func() bool {
			return c.do(t, "GET", "k") == "$-1\r\n" // a new, empty server
		})
		if got := c.pipeline(t, []string{"SET", "k", "v2"}, []string{"GET", "k"}); got[0] != "+OK\r\n" || got[1] != bulk("v2") {
			t.Fatalf("after the restart: %q", got)
		}
	})
}

// TestUpstreamFrozen: a stopped server (SIGSTOP) accepts connections and
// never replies: every request in flight gets "-ERR upstream ... timeout"
// after -timeout, and the connection is never lent again: once the server
// runs on, the replies it owed to the closed connection reach nobody, and
// new requests get their own replies.
func TestUpstreamFrozen(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := pctest.StartRedis(t)
		s := startProxy(t, b, 1, 200*time.Millisecond, 4, r.Addr())
		c := dialResp(t, s.rt.Addr().String())
		c.pipeline(t, []string{"SET", "a", "1"}, []string{"SET", "b", "2"})
		r.Signal(syscall.SIGSTOP)
		got := c.pipeline(t, []string{"GET", "a"}, []string{"GET", "b"}, []string{"PING"})
		for i, g := range got[:2] {
			if !strings.HasPrefix(g, "-ERR upstream "+r.Addr()+" timeout") {
				t.Fatalf("GET %d with the server frozen: %q", i, g)
			}
		}
		if got[2] != "+PONG\r\n" {
			t.Fatalf("PING (the proxy's own) behind them: %q", got[2])
		}
		r.Signal(syscall.SIGCONT)
		// "b" first: a connection out of step would answer with "a"'s
		// value.
		pctest.WaitFor(t, "the proxy to be served again", func() bool {
			return c.do(t, "GET", "b") == bulk("2")
		})
		if got := c.pipeline(t, []string{"GET", "a"}, []string{"GET", "b"}); got[0] != bulk("1") || got[1] != bulk("2") {
			t.Fatalf("after the thaw: %q", got)
		}
		_, st := s.pools[0].Snapshot()
		if st.ClosedBroken == 0 {
			t.Fatalf("no connection was closed as broken: %+v", st)
		}
	})
}

// TestRefused: commands a pooled connection cannot carry, and commands
// without a key, get an error and the connection goes on.
func TestRefused(t *testing.T) {
	r := pctest.StartRedis(t)
	s := startProxy(t, percore.Epoll, 1, 10*time.Second, 2, r.Addr())
	c := dialResp(t, s.rt.Addr().String())
	got := c.pipeline(t, []string{"MULTI"}, []string{"BLPOP", "q", "0"}, []string{"SELECT", "1"}, []string{"KEYS", "*"},
		[]string{"SET", "k", "v"}, []string{"GET", "k"})
	for i, g := range got[:4] {
		if !strings.HasPrefix(g, "-ERR command") {
			t.Errorf("refused command %d: %q", i, g)
		}
	}
	if got[4] != "+OK\r\n" || got[5] != bulk("v") {
		t.Fatalf("after the refusals: %q", got[4:])
	}
}

// TestPlacementLikeTwemproxy: keys written through a real twemproxy
// (Debian's nutcracker, hash fnv1a_64, distribution modula) in front of
// three redis-servers land on the same servers as keys written through the
// proxy in front of three others listed in the same order. The servers'
// ports are random, so over runs the orders of their names vary: this is
// what found that twemproxy sorts a pool's servers by name. The keys hold
// bytes >= 0x80 too ("kéy"): twemproxy hashes each as a sign-extended C
// char.
func TestPlacementLikeTwemproxy(t *testing.T) {
	bin, err := exec.LookPath("nutcracker")
	if err != nil {
		t.Skip("nutcracker (twemproxy) is not installed (Debian: apt-get install nutcracker; scripts/ensure-tools.sh installs it)")
	}
	const n = 3
	var tw, ours []string
	for range n {
		tw = append(tw, pctest.StartRedis(t).Addr())
		ours = append(ours, pctest.StartRedis(t).Addr())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	twAddr := ln.Addr().String()
	ln.Close()
	conf := t.TempDir() + "/nutcracker.yml"
	yml := "test:\n  listen: " + twAddr + "\n  hash: fnv1a_64\n  distribution: modula\n  redis: true\n  servers:\n"
	for _, a := range tw {
		yml += "   - " + a + ":1\n"
	}
	if err := writeFile(conf, yml); err != nil {
		t.Fatal(err)
	}
	stats := freePort(t)
	cmd := exec.Command(bin, "-c", conf, "-s", stats, "-o", t.TempDir()+"/nutcracker.log")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pctest.WaitFor(t, "nutcracker to listen", func() bool {
		c, err := net.Dial("tcp", twAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	s := startProxy(t, percore.Epoll, 1, 10*time.Second, 2, ours...)
	var cmds [][]string
	for i := range 200 {
		cmds = append(cmds, []string{"SET", "key:" + strconv.Itoa(i*7919), "v"})
	}
	for i := range 100 {
		cmds = append(cmds, []string{"SET", "kéy" + strconv.Itoa(i), "v"}, []string{"SET", "\xff\x80" + strconv.Itoa(i), "v"})
	}
	for who, addr := range map[string]string{"twemproxy": twAddr, "the proxy": s.rt.Addr().String()} {
		for i, got := range dialResp(t, addr).pipeline(t, cmds...) {
			if got != "+OK\r\n" {
				t.Fatalf("%s: SET %q: %q", who, cmds[i][1], got)
			}
		}
	}
	// Server i of each pool, in the order of its names as twemproxy
	// sorts them: if twemproxy did not sort them so, the runs where
	// the ports' order and the names' order differ would fail.
	var twc, oc []*respClient
	for i, a := range twemproxyOrder(tw) {
		twc = append(twc, dialResp(t, a))
		oc = append(oc, dialResp(t, twemproxyOrder(ours)[i]))
	}
	for _, c := range cmds {
		for i := range n {
			a, b := twc[i].do(t, "EXISTS", c[1]), oc[i].do(t, "EXISTS", c[1])
			if a != b {
				t.Fatalf("%q on server %d: twemproxy's %q, the proxy's %q", c[1], i, a, b)
			}
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func writeFile(name, s string) error { return os.WriteFile(name, []byte(s), 0o600) }

// TestBadInput: a client's malformed or oversized request gets Redis's
// protocol error after the replies before it, then the close; an
// upstream reply over -max-reply gets an error, its connection is dropped
// (the rest of that reply would be out of step), and the next request is
// served on a new one.
func TestBadInput(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := pctest.StartRedis(t)
		s := startProxyReply(t, b, 1, 10*time.Second, 2, 1024, r.Addr())
		for _, tc := range []struct{ req, want string }{
			{"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$9999999\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
			{"*1\r\n*1\r\n$1\r\nx\r\n", "-ERR Protocol error: expected '$', got '*'\r\n"},
		} {
			c := dialResp(t, s.rt.Addr().String())
			c.c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.c.Write([]byte(tc.req)); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c.r)
			if err != nil || string(got) != tc.want {
				t.Fatalf("%q: %q, %v; want %q then the close", tc.req, got, err, tc.want)
			}
		}
		dialResp(t, r.Addr()).do(t, "SET", "big", strings.Repeat("x", 4000))
		c := dialResp(t, s.rt.Addr().String())
		got := c.pipeline(t, []string{"SET", "small", "v"}, []string{"GET", "big"}, []string{"GET", "small"})
		if got[0] != "+OK\r\n" || !strings.HasPrefix(got[1], "-ERR upstream "+r.Addr()+" reply") {
			t.Fatalf("a reply over -max-reply: %q", got)
		}
		// GET small went on the same connection, behind the big reply:
		// it fails with it, or, sent after, succeeds on a new one.
		if got[2] != bulk("v") && !strings.HasPrefix(got[2], "-ERR upstream") {
			t.Fatalf("the request behind it: %q", got[2])
		}
		if got := c.do(t, "GET", "small"); got != bulk("v") {
			t.Fatalf("after the dropped connection: %q", got)
		}
		_, st := s.pools[0].Snapshot()
		if st.ClosedBroken == 0 {
			t.Fatalf("the connection out of step was not closed as broken: %+v", st)
		}
	})
}
