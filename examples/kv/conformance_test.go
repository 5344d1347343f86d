//go:build linux

package main

import (
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// conformance is the table: each command, as redis-cli reads it from its
// input, in order, from an empty keyspace. Keys are spread so that both
// loops own some; every reply must be the same from redis-server and from
// kv, as redis-cli prints it.
var conformance = []string{
	"PING", "PING hello", `ECHO "a b"`, "GET missing", "SET k v", "GET k", "SET k v2 XX", "GET k",
	"SET k v3 NX", "GET k", "SET fresh v NX", "SET nokey v XX", "GET nokey",
	"SET k v NX XX", "SET k v EX", "SET k v EX 0", "SET k v EX -5", "SET k v EX abc", "SET k v PX 100 EX 100",
	"SET k v KEEPTTL EX 10", "SET k v BOGUS", "SET k v GET", "SET newk v GET", "SET k v4 NX GET",
	"SET e v EX 100", "TTL e", "SET e v2 KEEPTTL", "TTL e", "SET e v3", "TTL e", "PTTL missing", "TTL k",
	"SET p v PX 100000", "TTL p",
	"EXPIRE k 100", "TTL k", "EXPIRE k 200 NX", "EXPIRE k 200 XX", "TTL k", "EXPIRE k 50 GT", "EXPIRE k 50 LT", "TTL k",
	"EXPIRE k 10 NX XX", "EXPIRE k 10 GT LT", "EXPIRE k 10 FOO", "EXPIRE k abc", "EXPIRE missing 10",
	"EXPIRE k -1", "EXISTS k", "GET k",
	"INCR n", "INCR n", "INCRBY n 10", "INCRBY n -3", "DECR n", "DECRBY n 5", "GET n", "INCRBY n abc",
	"INCR s", "SET s abc", "INCR s", "SET s 007", "INCR s", "SET s ' 1'", "INCR s",
	"SET big 9223372036854775807", "INCR big", "SET small -9223372036854775808", "DECR small",
	"DECRBY n -9223372036854775808",
	"MSET {m}a 1 {m}b 2 {m}c 3 {m}d 4 {m}e 5 {m}f 6", "MGET {m}a {m}b {m}c {m}d {m}e {m}f {m}nothere", "MGET nothere",
	"MSET a", "MSET {m}a 1 {m}b", "DEL {m}a {m}b {m}nothere", "EXISTS {m}a {m}b {m}c {m}c", "DEL", "EXISTS", "MGET",
	"DBSIZE", "FLUSHALL", "DBSIZE", "MGET {m}a {m}c", "FLUSHALL BOGUS",
	"SET z -0", "INCR z", "SET z -05", "INCR z", "SET z 0", "INCR z", "SET z -7", "INCR z", "INCRBY z -0", "INCRBY z 05",
	"EXPIRE k abc FOO", "EXPIRE k abc NX XX", "PEXPIRE k abc GT LT", "EXPIRE k abc GT", "SET k v", "EXPIRE k 10 FOO",
	"CONFIG", "CONFIG NOPE", "CONFIG GET", "COMMAND NOPE", "CLIENT", "HELLO 3 4",
	"GET", "GET a b", "SET a", "INCR", "TTL", "ECHO", "PING a b", "DBSIZE x",
	"FOO", "FOO bar baz", "SELECT 0", "HELLO 4", "HELLO abc",
	"CLIENT SETNAME conformance", "CONFIG GET appendonly",
}

// runCLI feeds lines to one redis-cli against port, as redis-cli would
// read a script, and returns its output lines.
func runCLI(t *testing.T, cli, port string, lines []string) []string {
	t.Helper()
	cmd := exec.Command(cli, "-h", "127.0.0.1", "-p", port, "--no-raw")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli against port %s: %v\n%s", port, err, out)
	}
	var got []string
	for _, ln := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		// redis-cli adds "(0.88s)" after a reply that took it more
		// than half a second to get: its timing, not a reply (seen
		// under make test's load).
		if !elapsed.MatchString(ln) {
			got = append(got, ln)
		}
	}
	return got
}

var elapsed = regexp.MustCompile(`^\([0-9]+\.[0-9]+s\)$`)

// TestConformance runs the table with real redis-cli against a real
// redis-server and against kv with two loops, on both backends, and
// compares the output, reply for reply.
func TestConformance(t *testing.T) {
	cli := redisCLI(t)
	redisPort := pctest.StartRedis(t).Port()
	want := runCLI(t, cli, redisPort, conformance)
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		_, port, _ := net.SplitHostPort(rt.Addr().String())
		got := runCLI(t, cli, port, conformance)
		if len(got) != len(want) {
			t.Fatalf("%d lines of output from kv, %d from redis-server:\nkv:\n%s\nredis-server:\n%s",
				len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// Output lines follow commands; a multi-line reply (MGET) takes
		// several, in both.
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("output line %d: kv %q, redis-server %q", i+1, got[i], want[i])
			}
		}
		if st := rt.Stats(); st.CallsMade == 0 {
			t.Error("the table made no cross-loop call: the keys all landed on one loop")
		}
	})
}
