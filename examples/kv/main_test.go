//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/internal/rawconn"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/resp"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// serve starts the server on loops loops, on the test's first CPUs (it
// skips when there are fewer).
func serve(t *testing.T, b percore.Backend, loops int) *percore.Runtime {
	t.Helper()
	use := pctest.LoopCores(t, loops)
	return serveWith(t, b, use, config{maxRequest: 1 << 20, policy: "noeviction"})
}

// serveWith starts a server of cfg on the CPUs use, one loop each.
func serveWith(t *testing.T, b percore.Backend, use []int, cfg config) *percore.Runtime {
	t.Helper()
	rt, _ := serveServer(t, b, use, cfg)
	return rt
}

// serveServer is serveWith, returning the server too.
func serveServer(t *testing.T, b percore.Backend, use []int, cfg config) (*percore.Runtime, *server) {
	t.Helper()
	s, err := newServer(cfg, len(use))
	if err != nil {
		t.Fatal(err)
	}
	return pctest.Start(t, percore.Config{Backend: b, Cores: use, LoopSetup: s.setup}, s.handler()), s
}

// cmd is one command, as a client sends it.
func wire(args ...string) []byte { return resp.AppendCommand(nil, args...) }

// exchange sends req and reads exactly len(want) bytes back.
func exchange(t *testing.T, c net.Conn, req []byte, want string) {
	t.Helper()
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %q: %v", got, err)
	}
	if string(got) != want {
		t.Fatalf("replies\n%q\nwant\n%q", got, want)
	}
}

// TestSetThenGetElsewhere: a SET on one connection and a GET on another
// find the same value, whichever loops the connections and the keys land
// on.
func TestSetThenGetElsewhere(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		var conns []net.Conn
		for range 6 {
			conns = append(conns, pctest.Dial(t, rt.Addr().String()))
		}
		for i := range 40 {
			key, val := "key:"+strconv.Itoa(i), "value "+strconv.Itoa(i)
			exchange(t, conns[i%len(conns)], wire("SET", key, val), "+OK\r\n")
			exchange(t, conns[(i+1)%len(conns)], wire("GET", key), string(resp.AppendBulkString(nil, val)))
		}
		if st := rt.Stats(); st.CallsMade == 0 {
			t.Fatalf("no cross-loop call in 40 keys over 2 loops: %+v", st)
		}
	})
}

// model is a single-threaded server: the replies the loops must give.
type model map[string]string

func (m model) reply(args []string) string {
	// Redis Cluster's rule: a command's keys share a slot.
	var keys []string
	switch args[0] {
	case "DEL", "EXISTS", "MGET":
		keys = args[1:]
	case "MSET":
		for i := 1; i < len(args); i += 2 {
			keys = append(keys, args[i])
		}
	}
	for _, k := range keys {
		if slotOf([]byte(k)) != slotOf([]byte(keys[0])) {
			return string(replyCrossSlot)
		}
	}
	switch args[0] {
	case "SET":
		m[args[1]] = args[2]
		return "+OK\r\n"
	case "GET":
		if v, ok := m[args[1]]; ok {
			return string(resp.AppendBulkString(nil, v))
		}
		return "$-1\r\n"
	case "INCR":
		n, _ := strconv.ParseInt(m[args[1]], 10, 64)
		m[args[1]] = strconv.FormatInt(n+1, 10)
		return ":" + m[args[1]] + "\r\n"
	case "DEL", "EXISTS":
		n := 0
		for _, k := range args[1:] {
			if _, ok := m[k]; ok {
				n++
				if args[0] == "DEL" {
					delete(m, k)
				}
			}
		}
		return ":" + strconv.Itoa(n) + "\r\n"
	case "PING":
		return "+PONG\r\n"
	case "INCRBY":
		n, _ := strconv.ParseInt(m[args[1]], 10, 64)
		d, _ := strconv.ParseInt(args[2], 10, 64)
		m[args[1]] = strconv.FormatInt(n+d, 10)
		return ":" + m[args[1]] + "\r\n"
	case "MSET":
		for i := 1; i+1 < len(args); i += 2 {
			m[args[i]] = args[i+1]
		}
		return "+OK\r\n"
	case "MGET":
		out := "*" + strconv.Itoa(len(args)-1) + "\r\n"
		for _, k := range args[1:] {
			out += m.reply([]string{"GET", k})
		}
		return out
	}
	return ""
}

// TestPipelineInOrder: one write of SET/GET pairs (and INCR, INCRBY,
// multi-key DEL, EXISTS, MSET and MGET over keys of one slot, PING, and
// multi-key commands refused for keys of several slots) over keys of
// every loop gets exactly the replies a single-threaded server gives, in
// order.
func TestPipelineInOrder(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		m := model{}
		var req []byte
		var want strings.Builder
		add := func(args ...string) {
			req = append(req, wire(args...)...)
			want.WriteString(m.reply(args))
		}
		// Keys in five hash tags (five slots, on both loops), so that
		// multi-key commands have keys of one slot.
		key := func(tag, n int) string { return "{t" + strconv.Itoa(tag) + "}k" + strconv.Itoa(n%37) }
		for i := range 200 {
			tag := i % 5
			k := key(tag, i)
			add("SET", k, "v"+strconv.Itoa(i))
			add("GET", k)
			if i%5 == 0 {
				add("INCR", "n"+strconv.Itoa(i%7))
				add("PING")
			}
			if i%3 == 0 {
				k2, k3 := key(tag, i+5), key(tag, i+9)
				add("MSET", k2, "m"+strconv.Itoa(i), k3, "x", k, "y"+strconv.Itoa(i))
				add("MGET", k, key(tag, 100), k2, k3)
				add("INCRBY", "n"+strconv.Itoa(i%5), strconv.Itoa(i-100))
			}
			if i%11 == 0 {
				add("DEL", k, key(tag, i+1), key(tag, 99))
				add("EXISTS", k, key(tag, i+2), key(tag, i+2))
				add("GET", k)
				add("MSET", k, "z", key(tag+1, i), "z") // two slots: refused, nothing written
				add("MGET", k, key(tag+1, i))
				add("GET", k)
			}
		}
		for range 3 { // on new connections, over the keys the last left
			c := pctest.Dial(t, rt.Addr().String())
			exchange(t, c, req, want.String())
			want.Reset()
			for _, args := range splitCommands(t, req) {
				want.WriteString(m.reply(args))
			}
		}
		if st := rt.Stats(); st.CallsMade == 0 {
			t.Fatal("the pipeline made no cross-loop call")
		}
	})
}

// splitCommands reads req back into commands.
func splitCommands(t *testing.T, req []byte) [][]string {
	t.Helper()
	var out [][]string
	for len(req) > 0 {
		args, n, err := resp.Parse(nil, req, resp.Limits{})
		if err != nil || n == 0 {
			t.Fatalf("parse the test's own request: %v", err)
		}
		var s []string
		for _, a := range args {
			s = append(s, string(a))
		}
		out = append(out, s)
		req = req[n:]
	}
	return out
}

// TestErrors: Redis's texts for an unknown command, a wrong arity, a
// value that is not an integer and a protocol error, which closes the
// connection after the replies before it.
func TestErrors(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		c := pctest.Dial(t, rt.Addr().String())
		exchange(t, c, wire("FOO", "a", "b"), "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n")
		exchange(t, c, wire("GET"), "-ERR wrong number of arguments for 'get' command\r\n")
		exchange(t, c, append(wire("SET", "s", "x"), wire("INCR", "s")...), "+OK\r\n-ERR value is not an integer or out of range\r\n")
		exchange(t, c, []byte("PING\r\n*1\r\n*1\r\n"), "+PONG\r\n-ERR Protocol error: expected '$', got '*'\r\n")
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("after a protocol error: read %d, %v; want the server's close", n, err)
		}
	})
}

// TestEndOfStreamAnswersFirst: a client that half-closes after its
// pipeline gets every reply, those from other loops included, then the
// close.
func TestEndOfStreamAnswersFirst(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		var req []byte
		var want string
		for i := range 50 {
			k := "eof" + strconv.Itoa(i)
			req = append(req, wire("SET", k, k)...)
			req = append(req, wire("GET", k)...)
			want += "+OK\r\n" + string(resp.AppendBulkString(nil, k))
		}
		c := pctest.Dial(t, rt.Addr().String())
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		c.CloseWrite()
		got, err := io.ReadAll(c)
		if err != nil || string(got) != want {
			t.Fatalf("after the half-close: %d bytes, %v; want all %d bytes of replies", len(got), err, len(want))
		}
	})
}

// TestGetAllocatesNothing: a GET answered with Conn.Reserve and Commit
// allocates nothing on the server (one loop, so that the key is local).
func TestGetAllocatesNothing(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 1)
		exchange(t, pctest.Dial(t, rt.Addr().String()), wire("SET", "k", "thirteen char"), "+OK\r\n")
		c := rawconn.Dial(t, rt.Addr())
		// A 20-byte GET of a 13-byte value has a 20-byte reply:
		// RoundTrip reads as much as it sends.
		get := wire("GET", "k")
		if len(get) != len(resp.AppendBulkString(nil, "thirteen char")) {
			t.Fatalf("request %d bytes, reply %d: RoundTrip needs them equal", len(get), len(resp.AppendBulkString(nil, "thirteen char")))
		}
		for range 200 {
			if err := c.RoundTrip(get); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		allocs := testing.AllocsPerRun(1000, func() {
			if e := c.RoundTrip(get); e != nil {
				err = e
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if allocs != 0 {
			t.Fatalf("%v allocations per GET, want 0", allocs)
		}
	})
}

// TestRemoteGetAllocatesNothing: a GET for a key of the other loop goes
// there as a cross-loop call through the loop's percore.OpPool and comes
// back through the connection's ordered.Queue, and allocates nothing once
// warm. Each round pipelines a GET of a key of each loop, so that one of
// them is the other loop's whichever loop the connection is on.
func TestRemoteGetAllocatesNothing(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		// One key per loop, each as long as a GET of it is as its reply
		// (RoundTrip reads as much as it sends).
		var keys [2]string
		for i := 0; keys[0] == "" || keys[1] == ""; i++ {
			k := "k" + strconv.Itoa(i)
			slot := slotOf([]byte(k))
			owner := rt.Loops()[0].Owner([]byte{byte(slot >> 8), byte(slot)})
			if keys[owner.ID()] == "" {
				keys[owner.ID()] = k
			}
		}
		setup := pctest.Dial(t, rt.Addr().String())
		var get []byte
		for _, k := range keys {
			req := wire("GET", k)
			val := ""
			for len(resp.AppendBulkString(nil, val)) < len(req) {
				val += "v"
			}
			if len(resp.AppendBulkString(nil, val)) != len(req) {
				t.Fatalf("no value of %s has a reply as long as its GET", k)
			}
			exchange(t, setup, wire("SET", k, val), "+OK\r\n")
			get = append(get, req...)
		}
		c := rawconn.Dial(t, rt.Addr())
		for range 200 {
			if err := c.RoundTrip(get); err != nil {
				t.Fatal(err)
			}
		}
		made := rt.Stats().CallsMade
		var err error
		allocs := testing.AllocsPerRun(1000, func() {
			if e := c.RoundTrip(get); e != nil {
				err = e
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case raceEnabled:
			t.Logf("%v allocations per pair of GETs under -race (the wake-ups allocate there): not checked", allocs)
		case allocs != 0:
			t.Fatalf("%v allocations per pair of GETs, one of them on the other loop, want 0", allocs)
		}
		pctest.WaitFor(t, "a cross-loop call per round", func() bool { return rt.Stats().CallsMade-made >= 1000 })
	})
}

// redisCLI returns the path of redis-cli, or skips t.
func redisCLI(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed (Debian: apt-get install redis-tools; scripts/ensure-tools.sh installs it)")
	}
	return p
}

// TestRedisCLI: the real client starts against the server, gets PONG and
// a SET/GET round trip, the keys on both loops.
func TestRedisCLI(t *testing.T) {
	cli := redisCLI(t)
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		_, port, _ := net.SplitHostPort(rt.Addr().String())
		run := func(args ...string) string {
			t.Helper()
			cmd := exec.Command(cli, append([]string{"-h", "127.0.0.1", "-p", port}, args...)...)
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return strings.TrimSpace(string(out))
		}
		if got := run("PING"); got != "PONG" {
			t.Fatalf("redis-cli PING: %q", got)
		}
		for i := range 8 {
			k, v := fmt.Sprintf("cli:%d", i), fmt.Sprintf("value %d", i)
			if got := run("SET", k, v); got != "OK" {
				t.Fatalf("redis-cli SET %s: %q", k, got)
			}
			if got := run("GET", k); got != v {
				t.Fatalf("redis-cli GET %s: %q, want %q", k, got, v)
			}
		}
		// Interactive mode asks COMMAND DOCS first: it must get an answer.
		cmd := exec.Command(cli, "-h", "127.0.0.1", "-p", port)
		cmd.Stdin = strings.NewReader("GET cli:3\n")
		cmd.WaitDelay = 10 * time.Second
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("value 3")) {
			t.Fatalf("redis-cli from stdin: %v\n%s", err, out)
		}
	})
}

// TestLikeRedisServer compares the replies of a real redis-server and of
// this server, byte for byte, for the errors it claims to share.
func TestLikeRedisServer(t *testing.T) {
	redis, err := net.Dial("tcp", pctest.StartRedis(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer redis.Close()
	rt := serve(t, percore.Epoll, 1)
	ours := pctest.Dial(t, rt.Addr().String())
	rr, or := bufio.NewReader(redis), bufio.NewReader(ours)
	for _, req := range [][]byte{
		wire("PING"), wire("PING", "hi"), wire("ECHO", "a\r\nb"), wire("GET", "missing"),
		wire("SET", "k", "v"), wire("GET", "k"), wire("SET", "k", "v", "XX", "NX", "bogus"),
		wire("INCR", "k"), wire("INCR", "n"), wire("INCR", "n"), wire("SET", "big", "9223372036854775807"), wire("INCR", "big"),
		wire("SET", "{t}a", "1"), wire("SET", "{t}b", "2"),
		wire("EXISTS", "{t}a", "{t}b", "{t}none"), wire("DEL", "{t}a", "{t}none"), wire("GET"), wire("PING", "a", "b"),
		wire("FOO"), wire("FOO", strings.Repeat("x", 200), "y"), wire("unknowncmd", "a\r\nb", "c"),
		[]byte("SET inline v\r\n"), []byte("GET inline\r\n"), wire("CONFIG", "GET", "appendonly"),
	} {
		redis.SetDeadline(time.Now().Add(10 * time.Second))
		redis.Write(req)
		ours.Write(req)
		want, err1 := pctest.ReadReply(rr)
		got, err2 := pctest.ReadReply(or)
		if err1 != nil || err2 != nil || got != want {
			t.Errorf("%q: redis-server %q (%v), ours %q (%v)", req, want, err1, got, err2)
		}
	}
}

// TestEveryBoundaryOverTCP cuts a pipeline at every byte into two writes,
// a pause apart so that the server most likely reads them separately (a
// pause, not synchronisation: the test passes however they arrive), on
// both backends: the replies are the same at every cut.
func TestEveryBoundaryOverTCP(t *testing.T) {
	req := append(append(wire("SET", "{c}cut", "a\r\nb"), "GET {c}cut\r\n"...), wire("EXISTS", "{c}cut", "{c}nope")...)
	want := "+OK\r\n$4\r\na\r\nb\r\n:1\r\n"
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		c := pctest.Dial(t, rt.Addr().String())
		c.SetNoDelay(true)
		for i := 1; i < len(req); i++ {
			if _, err := c.Write(req[:i]); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond)
			exchange(t, c, req[i:], want)
		}
	})
}

func newReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }
