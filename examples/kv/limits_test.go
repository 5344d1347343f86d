//go:build linux

package main

import (
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// readAllReplies reads until the server closes the connection.
func readToClose(t *testing.T, c interface {
	io.Reader
	SetReadDeadline(time.Time) error
}) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read to the server's close: %q, %v", b, err)
	}
	return string(b)
}

// TestProtocolLimits: a bulk over -max-request, an array over Redis's
// 1024*1024 arguments, a nested array and an inline line over 64 KiB each
// get Redis's protocol error, after the replies before them, and then the
// close.
func TestProtocolLimits(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		for _, tc := range []struct{ name, req, want string }{
			{"bulk", "PING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
			{"args", "*2000000\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
			{"nested", "*1\r\n*1\r\n$1\r\nx\r\n", "-ERR Protocol error: expected '$', got '*'\r\n"},
			{"inline", "PING " + strings.Repeat("x", 70<<10), "-ERR Protocol error: too big inline request\r\n"},
			{"negative bulk", "*1\r\n$-3\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		} {
			c := pctest.Dial(t, rt.Addr().String())
			if _, err := c.Write([]byte(tc.req)); err != nil {
				t.Fatal(err)
			}
			if got := readToClose(t, c); got != tc.want {
				t.Errorf("%s: %q, want %q then the close", tc.name, got, tc.want)
			}
		}
		// The server goes on serving.
		exchange(t, pctest.Dial(t, rt.Addr().String()), wire("PING"), "+PONG\r\n")
	})
}

// TestResp3: HELLO 3 switches a connection to RESP3: a map for HELLO, and
// null as "_" for a missing key, also when another loop owns it.
func TestResp3(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, 2)
		c := pctest.Dial(t, rt.Addr().String())
		exchange(t, c, wire("HELLO", "3"), string(hello3))
		if !strings.HasPrefix(string(hello3), "%7\r\n") {
			t.Fatalf("HELLO 3 is not a RESP3 map: %q", hello3)
		}
		var req []byte
		var want string
		for i := range 10 {
			req = append(req, wire("GET", "none"+strconv.Itoa(i))...)
			want += "_\r\n"
		}
		req = append(req, wire("MGET", "{n}none1", "{n}none2")...)
		want += "*2\r\n_\r\n_\r\n"
		exchange(t, c, req, want)
		exchange(t, c, wire("HELLO", "2"), string(hello2))
		exchange(t, c, wire("GET", "none1"), "$-1\r\n")
	})
}

// TestMaxMemory: under noeviction, writes once memory is over the limit
// get Redis's OOM error and nothing is lost; under allkeys-random, writes
// go on and random keys are evicted, the accounted memory staying within
// the limit and the write that passed it.
func TestMaxMemory(t *testing.T) {
	val := strings.Repeat("v", 1000)
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		use := cpusFor(t, 2)
		rt := serveWith(t, b, use, config{maxRequest: 1 << 20, policy: "noeviction", maxMemory: 64 << 10})
		c := pctest.Dial(t, rt.Addr().String())
		stored := 0
		for i := range 200 {
			got := roundTrip(t, c, wire("SET", "k"+strconv.Itoa(i), val))
			switch got {
			case "+OK\r\n":
				stored++
			case string(replyOOM):
			default:
				t.Fatalf("SET %d: %q", i, got)
			}
		}
		// 64 KiB over two loops of 1.1 KB keys: about 55 fit.
		if stored < 30 || stored > 64 {
			t.Fatalf("noeviction stored %d keys of 1 KB in 64 KiB", stored)
		}
		if got := roundTrip(t, c, wire("DBSIZE")); got != ":"+strconv.Itoa(stored)+"\r\n" {
			t.Fatalf("DBSIZE %q, want %d: a refused write lost or kept a key", got, stored)
		}
		// Reads and deletes still work, and free room.
		exchange(t, c, wire("GET", "k0"), "$1000\r\n"+val+"\r\n")

		rt2 := serveWith(t, b, use, config{maxRequest: 1 << 20, policy: "allkeys-random", maxMemory: 64 << 10})
		c2 := pctest.Dial(t, rt2.Addr().String())
		for i := range 200 {
			exchange(t, c2, wire("SET", "k"+strconv.Itoa(i), val), "+OK\r\n")
		}
		info := roundTrip(t, c2, wire("INFO"))
		used := infoField(t, info, "used_memory")
		// As in Redis, memory is checked before a write: each loop may
		// pass its share by the one write that took it over.
		if over := int64(64<<10 + 2*(entryOverhead+4+len(val))); used > over || infoField(t, info, "evicted_keys") < 100 {
			t.Fatalf("allkeys-random: used_memory %d over 64 KiB and a write per loop (%d), or too few evicted:\n%s", used, over, info)
		}
		exchange(t, c2, wire("GET", "k199"), "$1000\r\n"+val+"\r\n") // the last write is kept
	})
}

// TestActiveExpiry: keys with an expiry that nobody reads are deleted by
// the loops' sweeps; a key without one stays.
func TestActiveExpiry(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serveWith(t, b, cpusFor(t, 2), config{maxRequest: 1 << 20, policy: "noeviction", sweep: time.Millisecond})
		c := pctest.Dial(t, rt.Addr().String())
		var req []byte
		var want string
		for i := range 100 {
			req = append(req, wire("SET", "x"+strconv.Itoa(i), "v", "PX", "1")...)
			want += "+OK\r\n"
		}
		req = append(req, wire("SET", "stays", "v")...)
		exchange(t, c, req, want+"+OK\r\n")
		pctest.WaitFor(t, "the sweeps to delete 100 expired keys", func() bool {
			return roundTrip(t, c, wire("DBSIZE")) == ":1\r\n"
		})
		if n := infoField(t, roundTrip(t, c, wire("INFO")), "expired_keys"); n != 100 {
			t.Fatalf("expired_keys %d, want 100", n)
		}
	})
}

func cpusFor(t *testing.T, loops int) []int {
	t.Helper()
	rt := serve(t, percore.Epoll, loops) // the CPUs serve picks
	var use []int
	for _, l := range rt.Loops() {
		use = append(use, l.CPU())
	}
	rt.Close()
	return use
}

// roundTrip sends req and reads one reply.
func roundTrip(t *testing.T, c interface {
	io.ReadWriter
	SetReadDeadline(time.Time) error
}, req []byte) string {
	t.Helper()
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := newReader(c)
	got, err := pctest.ReadReply(r)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	if r.Buffered() > 0 {
		t.Fatalf("%q: more than one reply", req)
	}
	return got
}

// infoField returns an integer field of an INFO reply.
func infoField(t *testing.T, info, name string) int64 {
	t.Helper()
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %q", name, v)
			}
			return n
		}
	}
	t.Fatalf("INFO has no %s:\n%s", name, info)
	return 0
}
