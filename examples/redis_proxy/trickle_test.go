//go:build linux

package main

import (
	"bufio"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/resp"
)

// parsedBytes sums, over the proxy's loops, the bytes the request parsers
// examined.
func parsedBytes(t *testing.T, s *server) int64 {
	t.Helper()
	var sum int64
	for _, l := range s.rt.Loops() {
		ch := make(chan int64, 1)
		if err := l.Post(func() { ch <- *s.p.parsed.Get(l) }); err != nil {
			t.Fatal(err)
		}
		sum += pctest.Recv(t, ch, "the loop's parsed bytes")
	}
	return sum
}

// TestTrickleIsLinear (issue 23, fault 5, as examples/kv has it): a 210 KB
// command of 30,000 one-byte arguments trickled in 7-byte writes is parsed
// with work linear in its size, and a second client's PINGs are answered
// while it trickles. Parsed from the start at every read (resp.Parse, as
// the proxy did), the parsers examined 10-15 MB for it here, 50-70 times
// its size, and more the finer the reads.
func TestTrickleIsLinear(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		// Neither an unknown command nor PING reaches a server: the
		// address is never dialed.
		s := startProxy(t, b, 1, 10*time.Second, 4, "127.0.0.1:1")
		const args = 30000
		cmd := fmt.Appendf(nil, "*%d\r\n", args)
		for range args {
			cmd = append(cmd, "$1\r\nx\r\n"...)
		}
		c := pctest.Dial(t, s.rt.Addr().String())
		c.SetNoDelay(true)
		pinger := pctest.Dial(t, s.rt.Addr().String())
		pr := bufio.NewReader(pinger)
		before := parsedBytes(t, s)
		for i := 0; i < len(cmd); i += 7 {
			if _, err := c.Write(cmd[i:min(i+7, len(cmd))]); err != nil {
				t.Fatal(err)
			}
			if i%(7*3000) == 0 { // now and then, a PING from the other client
				pinger.SetDeadline(time.Now().Add(10 * time.Second))
				pinger.Write(resp.AppendCommand(nil, "PING"))
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
		parsed := parsedBytes(t, s) - before
		if limit := 3*int64(len(cmd)) + 4096; parsed > limit {
			t.Fatalf("%d bytes examined by the parsers for a %d-byte command (and a few PINGs): over %d, the parse is not linear", parsed, len(cmd), limit)
		}
		t.Logf("%d bytes examined for a %d-byte command", parsed, len(cmd))
	})
}
