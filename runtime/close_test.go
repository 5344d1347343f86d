package runtime_test

import (
	"bytes"
	"io"

	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// answerAndClose answers the first input with answer and closes, with
// CloseLinger when linger is set, else Close.
type answerAndClose struct {
	answer []byte
	linger bool
}

func (h answerAndClose) OnData(c *percore.Conn, _ []byte) {
	if c.Closed() {
		return
	}
	c.Write(h.answer)
	if h.linger {
		c.CloseLinger()
	} else {
		c.Close()
	}
}

// A Close with input unread (more arrived than the first read took)
// closes the connection cleanly on both backends: the peer reads the
// answer and the end of the stream, not a reset (epoll used to close the
// socket with the input still in it; io_uring's receive had taken it).
func TestCloseWithUnreadInputEndsCleanly(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b}, answerAndClose{answer: []byte("bye\n")})
		for range 3 {
			c := pctest.Dial(t, rt.Addr().String())
			// 40 KB in one write: one segment on loopback, more than
			// one 16 KiB read.
			if _, err := c.Write(make([]byte, 40<<10)); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil || string(got) != "bye\n" {
				t.Fatalf("read %q, %v; want the answer, then the end of the stream", got, err)
			}
		}
	})
}

// CloseLinger lets the answer arrive while the peer is still sending: the
// peer reads the answer and the end of the stream, goes on sending (the
// server discards it), and the server closes once the peer ends.
func TestCloseLingerLetsTheAnswerArrive(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		answer := []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n")
		rt := start(t, percore.Config{Backend: b}, answerAndClose{answer: answer, linger: true})
		c := pctest.Dial(t, rt.Addr().String())
		if _, err := c.Write(make([]byte, 30<<10)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(answer))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, answer) {
			t.Fatalf("read %q, %v; want the answer", got, err)
		}
		var one [1]byte
		if n, err := c.Read(one[:]); n != 0 || err != io.EOF {
			t.Fatalf("after the answer: %d, %v; want the end of the stream", n, err)
		}
		// Still sending: the server reads and drops it.
		if _, err := c.Write(make([]byte, 200<<10)); err != nil {
			t.Fatalf("a write after the answer: %v", err)
		}
		pctest.WaitFor(t, "the server to discard what followed", func() bool {
			return rt.Stats().LingerDiscarded >= 200<<10
		})
		if rt.Stats().Open != 1 {
			t.Fatal("the lingering connection closed before the peer ended its stream")
		}
		c.CloseWrite()
		pctest.WaitFor(t, "the lingering connection to close", func() bool { return rt.Stats().Open == 0 })
	})
}

// A lingering close whose peer neither ends its stream nor stops sending
// ends at its bounds: LingerInput, LingerInputBytes.
func TestCloseLingerBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  percore.Config
		send int
	}{
		{"time", percore.Config{LingerInput: 50 * time.Millisecond}, 0},
		{"bytes", percore.Config{LingerInputBytes: 64 << 10}, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				cfg := tc.cfg
				cfg.Backend = b
				rt := start(t, cfg, answerAndClose{answer: []byte("no\n"), linger: true})
				c := pctest.Dial(t, rt.Addr().String())
				if _, err := c.Write([]byte("?")); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, 3)
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatal(err)
				}
				if tc.send > 0 {
					go func() { _, _ = c.Write(make([]byte, tc.send)) }() // cut short by the close
				}
				pctest.WaitFor(t, "the lingering connection to close", func() bool { return rt.Stats().Open == 0 })
				if d := rt.Stats().LingerDiscarded; tc.send > 0 && d < 64<<10 {
					t.Fatalf("closed after discarding %d bytes, before its bound", d)
				}
			})
		})
	}
}
