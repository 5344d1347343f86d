//go:build linux

package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/frame/resp/commands"
)

// checkAccounts recomputes, on each loop's own thread, the memory its
// keys account for, and fails unless it is what the loop counts: a write
// into an entry that eviction had taken out of the map leaves the count
// with bytes no key holds.
func checkAccounts(t *testing.T, rt *percore.Runtime, s *server) {
	t.Helper()
	for _, l := range rt.Loops() {
		got := make(chan string, 1)
		if err := l.Post(func() {
			sh := s.shards.Get(l)
			sum := int64(0)
			for k, e := range sh.keys {
				sum += int64(entryOverhead + len(k) + cap(e.v))
			}
			if sum != sh.used {
				got <- fmt.Sprintf("loop %d accounts %d bytes, its %d keys hold %d", l.ID(), sh.used, len(sh.keys), sum)
				return
			}
			got <- ""
		}); err != nil {
			t.Fatal(err)
		}
		if msg := pctest.Recv(t, got, "the accounts of a loop"); msg != "" {
			t.Fatal(msg)
		}
	}
}

// TestWriteNotLostToItsOwnEviction (issue 31, item 7): under
// allkeys-random, the eviction that makes room for a write never takes the
// entry the write then fills: every SET, INCR and MSET answered +OK is
// there when read back, and the accounted memory is what the keys hold.
// Before, SET k <1000 B> then SET k <1950 B> under -maxmemory 2000 answered
// +OK, GET k was nil, and used_memory kept 1,048 bytes for no key.
func TestWriteNotLostToItsOwnEviction(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt, s := serveServer(t, b, pctest.LoopCores(t, 1), config{maxRequest: 1 << 20, policy: "allkeys-random", maxMemory: 2000})
		c := pctest.Dial(t, rt.Addr().String())
		r := bufio.NewReader(c)
		do := func(args ...string) string {
			t.Helper()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(wire(args...)); err != nil {
				t.Fatal(err)
			}
			got, err := pctest.ReadReply(r)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		v1, v2 := strings.Repeat("a", 1000), strings.Repeat("b", 1950)
		if got := do("SET", "k", v1); got != "+OK\r\n" {
			t.Fatalf("SET k <1000 B>: %q", got)
		}
		if got := do("SET", "k", v2); got != "+OK\r\n" {
			t.Fatalf("SET k <1950 B>: %q", got)
		}
		if got := do("GET", "k"); got != string(resp.AppendBulkString(nil, v2)) {
			t.Fatalf("GET k after SET k answered +OK: %.40q", got)
		}
		checkAccounts(t, rt, s)

		// A seeded random run of writes of every size, each read back.
		seed := rand.Uint64()
		rng := rand.New(rand.NewPCG(seed, 7))
		for i := range 400 {
			k := "{s}" + strconv.Itoa(rng.IntN(8))
			switch rng.IntN(3) {
			case 0:
				v := strings.Repeat("v", rng.IntN(1900))
				if got := do("SET", k, v); got != "+OK\r\n" {
					t.Fatalf("seed %d, write %d: SET: %.40q", seed, i, got)
				}
				if got := do("GET", k); got != string(resp.AppendBulkString(nil, v)) {
					t.Fatalf("seed %d, write %d: GET after SET answered +OK: %.40q", seed, i, got)
				}
			case 1:
				k2 := "{s}m" + strconv.Itoa(rng.IntN(4))
				v := strings.Repeat("m", rng.IntN(900))
				if got := do("MSET", k, v, k2, v); got != "+OK\r\n" {
					t.Fatalf("seed %d, write %d: MSET: %.40q", seed, i, got)
				}
				want := "*2\r\n" + strings.Repeat(string(resp.AppendBulkString(nil, v)), 2)
				if got := do("MGET", k, k2); got != want {
					t.Fatalf("seed %d, write %d: MGET after MSET answered +OK: %.60q", seed, i, got)
				}
			default:
				n := "{s}n" + strconv.Itoa(rng.IntN(3))
				got := do("INCR", n)
				if !strings.HasPrefix(got, ":") {
					t.Fatalf("seed %d, write %d: INCR: %q", seed, i, got)
				}
				if v := do("GET", n); v != string(resp.AppendBulkString(nil, strings.TrimSpace(got[1:]))) {
					t.Fatalf("seed %d, write %d: GET %q after INCR answered %q", seed, i, v, got)
				}
			}
		}
		checkAccounts(t, rt, s)
	})
}

// TestMSetWholeOrNothing (issue 31, item 7): under noeviction an MSET is
// refused whole or applied whole, never in part: Redis checks memory once,
// before the command runs. Before, each pair was checked as it was
// written, and an MSET answered -OOM had written the pairs that fitted.
func TestMSetWholeOrNothing(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serveWith(t, b, pctest.LoopCores(t, 1), config{maxRequest: 1 << 20, policy: "noeviction", maxMemory: 8000})
		c := pctest.Dial(t, rt.Addr().String())
		big := strings.Repeat("x", 3000)
		oom := 0
		for i := range 12 {
			a, z := fmt.Sprintf("{w%d}a", i), fmt.Sprintf("{w%d}z", i)
			got := roundTrip(t, c, wire("MSET", a, "1", z, big))
			exists := roundTrip(t, c, wire("EXISTS", a, z))
			switch got {
			case "+OK\r\n":
				if exists != ":2\r\n" {
					t.Fatalf("MSET %d answered +OK, EXISTS %q", i, exists)
				}
			case string(replyOOM):
				oom++
				if exists != ":0\r\n" {
					t.Fatalf("MSET %d answered -OOM, yet EXISTS %q: applied in part", i, exists)
				}
			default:
				t.Fatalf("MSET %d: %q", i, got)
			}
		}
		if oom == 0 {
			t.Fatal("no MSET was refused: the test did not reach the limit")
		}
	})
}

// TestMSetNeverSeenHalfApplied (issue 31, item 7): clients on both loops
// MSET three keys of one slot to one value while others MGET them: every
// MGET sees the three equal (Redis Cluster's rule, which kv follows, puts
// a multi-key command's keys in one slot, run at once on its loop). Keys
// of several slots are refused with CROSSSLOT, and nothing is written.
// Before, the keys of an MSET went to their loops one by one, and another
// loop's MGET saw half-applied MSETs in about 12% of reads.
func TestMSetNeverSeenHalfApplied(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		addr := rt.Addr().String()
		const rounds, tags = 300, 4
		var wg sync.WaitGroup
		errs := make(chan string, 16)
		for w := range 4 { // writers and readers, several connections so that both loops have some
			wg.Add(2)
			go func() {
				defer wg.Done()
				c := pctest.Dial(t, addr)
				r := bufio.NewReader(c)
				for i := range rounds {
					tag := (i + w) % tags
					v := strconv.Itoa(w*rounds + i)
					k := func(n string) string { return "{h" + strconv.Itoa(tag) + "}" + n }
					c.SetDeadline(time.Now().Add(10 * time.Second))
					c.Write(wire("MSET", k("a"), v, k("b"), v, k("c"), v))
					if got, err := pctest.ReadReply(r); err != nil || got != "+OK\r\n" {
						errs <- fmt.Sprintf("MSET: %q, %v", got, err)
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				c := pctest.Dial(t, addr)
				r := bufio.NewReader(c)
				for i := range rounds {
					tag := strconv.Itoa((i + w) % tags)
					c.SetDeadline(time.Now().Add(10 * time.Second))
					c.Write(wire("MGET", "{h"+tag+"}a", "{h"+tag+"}b", "{h"+tag+"}c"))
					got, err := pctest.ReadReply(r)
					if err != nil {
						errs <- err.Error()
						return
					}
					parts := strings.Split(got, "\r\n")
					none := got == "*3\r\n$-1\r\n$-1\r\n$-1\r\n" // before the first MSET of the tag
					if !none && (len(parts) != 8 || parts[2] != parts[4] || parts[4] != parts[6]) {
						errs <- fmt.Sprintf("MGET of three keys one MSET writes: %q, half applied", got)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatal(e)
		}
		c := pctest.Dial(t, addr)
		exchange(t, c, wire("MSET", "{h0}a", "new", "{other}a", "new"), string(replyCrossSlot))
		exchange(t, c, wire("EXISTS", "{other}a"), ":0\r\n")
		if st := rt.Stats(); st.CallsMade == 0 {
			t.Fatal("no cross-loop call: the keys all landed on one loop")
		}
	})
}

// TestParseBytes (issue 31, item 9): sizes read as Redis's configuration
// reads them, k, m and g in 1000s, kb, mb and gb in 1024s.
func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1000": 1000, "1k": 1000, "1K": 1000, "1kb": 1024, "1KB": 1024, "2m": 2e6, "2mb": 2 << 20,
		"3g": 3e9, "3gb": 3 << 30, "5b": 5, " 7k ": 7000,
	} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "-1", "1kk", "1.5m", "1t", "99999999999gb"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
}

// TestArityFromTheTable: every command kv runs, sent with too few
// arguments (and too many where the arity is fixed), gets redis-server's
// reply byte for byte: the arity, the names in the errors and the
// subcommands are Redis's command table's, not kept by hand.
func TestArityFromTheTable(t *testing.T) {
	redis, err := net.Dial("tcp", pctest.StartRedis(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer redis.Close()
	rt := serve(t, percore.Epoll, 1)
	ours := pctest.Dial(t, rt.Addr().String())
	rr, or := bufio.NewReader(redis), bufio.NewReader(ours)
	checked := 0
	for name, k := range supported {
		if name == "quit" || name == "hello" {
			continue // QUIT closes; HELLO's arguments are all optional
		}
		cmds := []*commands.Command{k.cmd}
		for i := range k.cmd.Subcommands {
			cmds = append(cmds, &k.cmd.Subcommands[i])
		}
		for _, c := range cmds {
			for _, argc := range []int{-c.Arity - 1, c.Arity - 1, c.Arity + 1} {
				if argc < 1 || c.ArityOK(argc) || (argc == c.Arity+1 && c.Arity < 0) {
					continue
				}
				args := strings.Split(c.Name, "|")
				if argc < len(args) {
					continue // the container alone: its own case
				}
				for len(args) < argc {
					args = append(args, "a"+strconv.Itoa(len(args)))
				}
				args = args[:argc]
				req := wire(args...)
				redis.SetDeadline(time.Now().Add(10 * time.Second))
				redis.Write(req)
				ours.Write(req)
				want, err1 := pctest.ReadReply(rr)
				got, err2 := pctest.ReadReply(or)
				if err1 != nil || err2 != nil || got != want {
					t.Errorf("%q: redis-server %q (%v), kv %q (%v)", args, want, err1, got, err2)
				}
				checked++
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d arity cases", checked)
	}
}

// TestClusterRules compares kv with a redis-server in cluster mode that
// holds every slot: the slot of each key (CLUSTER KEYSLOT), and the
// replies of multi-key commands over keys of one slot and of several.
func TestClusterRules(t *testing.T) {
	addr := startRedisCluster(t)
	redis, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer redis.Close()
	rr := bufio.NewReader(redis)
	ask := func(args ...string) string {
		t.Helper()
		redis.SetDeadline(time.Now().Add(10 * time.Second))
		redis.Write(wire(args...))
		got, err := pctest.ReadReply(rr)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	keys := []string{"", "a", "foo", "{user1000}.following", "{user1000}.followers", "foo{}{bar}", "foo{{bar}}zap",
		"foo{bar}{zap}", "{", "}", "{}", "}{a}", "{a", "a}", "kéy100", "\xff\x80{\x00}"}
	for i := range 100 {
		keys = append(keys, "key:"+strconv.Itoa(i), "{t"+strconv.Itoa(i%7)+"}k"+strconv.Itoa(i))
	}
	for _, k := range keys {
		want := ask("CLUSTER", "KEYSLOT", k)
		if got := ":" + strconv.Itoa(int(slotOf([]byte(k)))) + "\r\n"; got != want {
			t.Errorf("slot of %q: kv %q, redis-server %q", k, got, want)
		}
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ask("FLUSHALL")
		rt := serve(t, b, 2)
		ours := pctest.Dial(t, rt.Addr().String())
		or := bufio.NewReader(ours)
		for _, args := range [][]string{
			{"MSET", "a", "1", "b", "2"}, {"MSET", "{x}a", "1", "{x}b", "2"}, {"MGET", "a", "b"}, {"MGET", "{x}a", "{x}b", "{x}c"},
			{"DEL", "a", "b"}, {"EXISTS", "{x}a", "{x}b", "c"}, {"MSET", "a", "1", "b"}, {"MSET", "{x}a", "1", "{x}b"},
			{"DEL", "{x}a", "{x}b"}, {"EXISTS", "{x}a"}, {"MSET", "{x}a", "1", "{y}a", "1"}, {"GET", "{x}a"},
		} {
			want := ask(args...)
			ours.SetDeadline(time.Now().Add(10 * time.Second))
			ours.Write(wire(args...))
			got, err := pctest.ReadReply(or)
			if err != nil || got != want {
				t.Errorf("%q: redis-server in cluster mode %q, kv %q (%v)", args, want, got, err)
			}
		}
	})
}

// startRedisCluster starts a redis-server in cluster mode on a free
// loopback port, gives it every slot, and waits until the cluster is up;
// it skips when redis-server is not installed.
func startRedisCluster(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (Debian: apt-get install redis-server; scripts/ensure-tools.sh installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir,
		"--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + port
	var c net.Conn
	pctest.WaitFor(t, "redis-server in cluster mode to listen", func() bool {
		c, err = net.Dial("tcp", addr)
		return err == nil
	})
	defer c.Close()
	r := bufio.NewReader(c)
	do := func(args ...string) string {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write(wire(args...))
		got, err := pctest.ReadReply(r)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := do("CLUSTER", "ADDSLOTSRANGE", "0", strconv.Itoa(slots-1)); got != "+OK\r\n" {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %q", got)
	}
	pctest.WaitFor(t, "the one-node cluster to be up", func() bool {
		return strings.Contains(do("CLUSTER", "INFO"), "cluster_state:ok")
	})
	return addr
}

// TestTrickleIsLinear (issue 23, fault 5): a 210 KB command of 30,000
// one-byte arguments trickled in 7-byte writes is parsed with work linear
// in its size (INFO's percore_parsed_bytes: the bytes the request parsers
// examined), and a second client's PINGs are answered while it trickles.
// Parsed from the start at every read, the command costs the parser
// gigabytes.
func TestTrickleIsLinear(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 1)
		const args = 30000
		cmd := fmt.Appendf(nil, "*%d\r\n", args)
		for range args {
			cmd = append(cmd, "$1\r\nx\r\n"...)
		}
		c := pctest.Dial(t, rt.Addr().String())
		c.SetNoDelay(true)
		pinger := pctest.Dial(t, rt.Addr().String())
		pr := bufio.NewReader(pinger)
		before := infoField(t, roundTrip(t, pinger, wire("INFO")), "percore_parsed_bytes")
		for i := 0; i < len(cmd); i += 7 {
			if _, err := c.Write(cmd[i:min(i+7, len(cmd))]); err != nil {
				t.Fatal(err)
			}
			if i%(7*3000) == 0 { // now and then, a PING from the other client
				pinger.SetDeadline(time.Now().Add(10 * time.Second))
				pinger.Write(wire("PING"))
				if got, err := pctest.ReadReply(pr); err != nil || got != "+PONG\r\n" {
					t.Fatalf("PING while the command trickles: %q, %v", got, err)
				}
			}
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		got, err := pctest.ReadReply(bufio.NewReader(c))
		if err != nil || !strings.HasPrefix(got, "-ERR unknown command 'x'") {
			t.Fatalf("the trickled command's reply: %q, %v", got, err)
		}
		parsed := infoField(t, roundTrip(t, pinger, wire("INFO")), "percore_parsed_bytes") - before
		if limit := 3*int64(len(cmd)) + 4096; parsed > limit {
			t.Fatalf("%d bytes examined by the parsers for a %d-byte command (and a few PINGs): over %d, the parse is not linear", parsed, len(cmd), limit)
		}
		t.Logf("%d bytes examined for a %d-byte command", parsed, len(cmd))
	})
}
