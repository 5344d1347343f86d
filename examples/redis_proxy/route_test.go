//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/examples/internal/serverflag"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// keyOn returns the first key name base0, base1, ... that the proxy p puts
// on server.
func keyOn(p *proxy, base string, server int) string {
	for i := 0; ; i++ {
		if k := base + strconv.Itoa(i); p.serverOf([]byte(k)) == server {
			return k
		}
	}
}

// TestRoutesByKeyPositions: commands whose key is not their first argument
// (numkeys first, a subcommand first, keys after numkeys) go to the server
// of their keys, as Redis's key specs find them, and answer what one Redis
// holding all the data answers; a command whose keys belong to several
// servers is refused with CROSSSLOT, or, for the commands Redis Cluster
// splits (request_policy:multi_shard), split and joined as one Redis would
// answer: MGET's nil for a key of another type too.
func TestRoutesByKeyPositions(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r1, r2, r3 := pctest.StartRedis(t), pctest.StartRedis(t), pctest.StartRedis(t)
		oracle := dialResp(t, pctest.StartRedis(t).Addr())
		s := startProxy(t, b, 1, 10*time.Second, 2, r1.Addr(), r2.Addr(), r3.Addr())
		c := dialResp(t, s.rt.Addr().String())
		// a, b2 and d on one server, x on another, l on the third.
		a, b2, d := keyOn(s.p, "a", 0), keyOn(s.p, "b", 0), keyOn(s.p, "d", 0)
		x, l := keyOn(s.p, "x", 1), keyOn(s.p, "l", 2)
		script := "return redis.call('SET', KEYS[1], ARGV[1])"
		fn := "#!lua name=lib\nredis.register_function('getk', function(keys, args) return redis.call('GET', keys[1]) end)"
		for _, r := range []*pctest.RedisServer{r1, r2, r3} {
			dialResp(t, r.Addr()).do(t, "FUNCTION", "LOAD", fn)
		}
		oracle.do(t, "FUNCTION", "LOAD", fn)
		sha := strings.TrimSpace(strings.Split(oracle.do(t, "SCRIPT", "LOAD", script), "\r\n")[1])
		for _, r := range []*pctest.RedisServer{r1, r2, r3} {
			dialResp(t, r.Addr()).do(t, "SCRIPT", "LOAD", script)
		}
		cmds := [][]string{
			{"SET", a, "va"}, {"SET", x, "vx"}, {"RPUSH", l, "e1", "e2"}, {"SADD", b2, "m1", "m2"},
			{"EVAL", script, "1", d, "vd"}, {"GET", d},
			{"EVALSHA", sha, "1", a, "va2"}, {"GET", a},
			{"FCALL", "getk", "1", x}, {"FCALL_RO", "getk", "1", a},
			{"LMPOP", "1", l, "LEFT"}, {"LLEN", l},
			{"ZADD", d + "z", "1", "m"}, // d+"z" may be anywhere: a single key
			{"ZMPOP", "1", d + "z", "MIN"},
			{"SINTERCARD", "1", b2}, {"SCARD", b2},
			{"ZADD", "zz", "1", "m"}, {"ZUNION", "1", "zz"}, {"ZINTER", "1", "zz"}, {"ZDIFF", "1", "zz"},
			{"OBJECT", "ENCODING", x}, {"MEMORY", "USAGE", "nokey"}, {"OBJECT", "REFCOUNT", a},
			{"XADD", "st", "1-1", "f", "v"}, {"XINFO", "GROUPS", "st"}, {"XLEN", "st"},
			{"BITOP", "AND", d + "bits", d + "bits"},
			{"MGET", a, x, l, "none"}, // WRONGTYPE for GET l; nil for MGET
			{"MSET", a, "1", x, "2"}, {"MGET", a, x},
			{"DEL", a, x, "none"}, {"EXISTS", a, x, l}, {"TOUCH", l, x},
			{"MSET", a, "1", x}, // no value for x
		}
		got := c.pipeline(t, cmds...)
		want := oracle.pipeline(t, cmds...)
		for i := range cmds {
			if got[i] != want[i] {
				t.Errorf("%q: the proxy answered %q, one Redis %q", cmds[i], got[i], want[i])
			}
		}
		for _, tc := range []struct {
			cmd  []string
			want string
		}{
			{[]string{"EVAL", script, "2", a, x, "v"}, "-CROSSSLOT"},
			{[]string{"SINTERCARD", "2", a, x}, "-CROSSSLOT"},
			{[]string{"RENAME", a, x}, "-CROSSSLOT"},
			{[]string{"MSETNX", a, "1", x, "2"}, "-CROSSSLOT"},
			{[]string{"EVAL", script, "0"}, "-ERR command 'EVAL' is not supported by the proxy: no key"},
			{[]string{"SET", a, "v"}, "+OK"},
			{[]string{"RENAME", a, d}, "+OK"},
			{[]string{"GET"}, "-ERR wrong number of arguments for 'get' command"},
			{[]string{"OBJECT", "NOSUCH", a}, "-ERR unknown subcommand 'NOSUCH'. Try OBJECT HELP."},
			{[]string{"NOSUCH", a}, "-ERR unknown command 'NOSUCH', with args beginning with: '" + a + "' "},
		} {
			if got := c.do(t, tc.cmd...); !strings.HasPrefix(got, tc.want) {
				t.Errorf("%q: %q, want %q", tc.cmd, got, tc.want)
			}
		}
	})
}

// TestNotOneReplyRefused is issue 31's shift of the shared connection's
// replies: SUNSUBSCRIBE with 200 channels (200 replies) and REPLCONF ACK
// (none) from one client, while another pipelines GETs on the same
// upstream connection. Both are refused, by their rules in the table; the
// other client gets its own replies, every one.
func TestNotOneReplyRefused(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := pctest.StartRedis(t)
		s := startProxy(t, b, 1, 5*time.Second, 1, r.Addr())
		bad, good := dialResp(t, s.rt.Addr().String()), dialResp(t, s.rt.Addr().String())
		if got := good.do(t, "SET", "a", "v"); got != "+OK\r\n" {
			t.Fatal(got)
		}
		var cmds [][]string
		unsub := []string{"SUNSUBSCRIBE"}
		for i := range 200 {
			unsub = append(unsub, "c"+strconv.Itoa(i))
		}
		for range 50 {
			cmds = append(cmds, []string{"REPLCONF", "ACK", "0"}, unsub)
		}
		var gets [][]string
		for range 2000 {
			gets = append(gets, []string{"GET", "a"})
		}
		done := make(chan []string, 1)
		go func() { done <- good.pipelineNoFatal(gets) }()
		for i, got := range bad.pipeline(t, cmds...) {
			if !strings.HasPrefix(got, "-ERR command '"+strings.ToUpper(cmds[i][0])+"' is not supported by the proxy") {
				t.Fatalf("%s: %q", cmds[i][0], got)
			}
		}
		replies := pctest.Recv(t, done, "the other client's replies")
		if len(replies) != len(gets) {
			t.Fatalf("the other client got %d of %d replies", len(replies), len(gets))
		}
		for i, got := range replies {
			if got != bulk("v") {
				t.Fatalf("GET a %d: %q", i, got)
			}
		}
	})
}

// proxyConnsUsed counts redis-server r's connections (the asker's
// excluded) that have run a command: the proxy's links that carried
// requests, not the idle ones.
func proxyConnsUsed(t *testing.T, r *pctest.RedisServer) int {
	t.Helper()
	list := dialResp(t, r.Addr()).do(t, "CLIENT", "LIST")
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " cmd=") && !strings.Contains(line, " cmd=NULL") && !strings.Contains(line, " cmd=client|list") {
			n++
		}
	}
	return n
}

// TestDeepPipelinesUseMoreConnectionsInOrder: with -depth 2 and -max 4, the
// commands of many clients with deep pipelines go out on more than one
// upstream connection (issue 31: a connection leased for them was
// released at once, unused), and each client's commands still run in the
// order it sent them: a seeded random mix of SET, APPEND, INCR, GET and DEL
// on each client's own keys, checked reply by reply against a model.
func TestDeepPipelinesUseMoreConnectionsInOrder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("REDIS_PROXY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (REDIS_PROXY_SEED=%d repeats it)", seed, seed)
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := pctest.StartRedis(t)
		use := pctest.LoopCores(t, 1)
		s, err := start(config{Flags: serverflag.Flags{Addr: "127.0.0.1:0", Cores: use, Backend: b}, servers: []string{r.Addr()},
			max: 4, depth: 2, wait: 5 * time.Second, timeout: 10 * time.Second, maxReq: 1 << 20, maxReply: 1 << 20, maxWait: 4096,
			logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.close)
		const clients, rounds = 12, 6
		var wg sync.WaitGroup
		errs := make(chan string, clients)
		for cl := range clients {
			c := dialResp(t, s.rt.Addr().String())
			rng := rand.New(rand.NewPCG(seed, uint64(cl)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				model := map[string]string{}
				for round := range rounds {
					var cmds [][]string
					var want []string
					for range 1 + rng.IntN(300) {
						k := "c" + strconv.Itoa(cl) + ":" + strconv.Itoa(rng.IntN(4))
						v, has := model[k]
						switch rng.IntN(5) {
						case 0:
							nv := strconv.Itoa(rng.IntN(100))
							cmds, want = append(cmds, []string{"SET", k, nv}), append(want, "+OK\r\n")
							model[k] = nv
						case 1:
							cmds = append(cmds, []string{"APPEND", k, "1"})
							model[k] = v + "1"
							want = append(want, ":"+strconv.Itoa(len(v)+1)+"\r\n")
						case 2:
							n, err := strconv.Atoi(v)
							if !has {
								n, err = 0, nil
							}
							cmds = append(cmds, []string{"INCR", k})
							if err != nil || n >= 1<<40 || (has && strconv.Itoa(n) != v) {
								// Redis takes only a canonical integer ("01" is not one)
								want = append(want, "-ERR value is not an integer or out of range\r\n")
								break
							}
							model[k] = strconv.Itoa(n + 1)
							want = append(want, ":"+strconv.Itoa(n+1)+"\r\n")
						case 3:
							cmds = append(cmds, []string{"GET", k})
							if has {
								want = append(want, bulk(v))
							} else {
								want = append(want, "$-1\r\n")
							}
						case 4:
							cmds = append(cmds, []string{"DEL", k})
							if has {
								want = append(want, ":1\r\n")
							} else {
								want = append(want, ":0\r\n")
							}
							delete(model, k)
						}
					}
					got := c.pipelineNoFatal(cmds)
					for i := range want {
						if i >= len(got) || got[i] != want[i] {
							g := "(none)"
							if i < len(got) {
								g = got[i]
							}
							errs <- fmt.Sprintf("client %d round %d: %q answered %q, want %q", cl, round, cmds[i], g, want[i])
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		if n := proxyConnsUsed(t, r); n < 2 {
			t.Errorf("%d upstream connection(s) carried the commands of %d clients with deep pipelines; want more than one", n, clients)
		}
	})
}
