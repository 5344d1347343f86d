package runtime_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// bulkWriter answers each byte it receives with 4 MiB, more than the
// socket takes at once, so that the queue holds bytes across several
// sends; it hands its connection to the test.
type bulkWriter struct {
	conns chan *percore.Conn
	reply []byte
}

func (h bulkWriter) OnData(c *percore.Conn, data []byte) {
	for range data {
		c.Write(h.reply)
	}
	select {
	case h.conns <- c:
	default:
	}
}

// TestOutQueueGivenBackOnBackends checks, on each backend, that a
// connection whose queue held megabytes across many sends holds no queue
// once the peer has read them all (decision 0072): the send that drains
// it gives it back, whatever path sent it.
func TestOutQueueGivenBackOnBackends(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		reply := bytes.Repeat([]byte("0123456789abcdef"), 1<<18)
		h := bulkWriter{conns: make(chan *percore.Conn, 1), reply: reply}
		rt := start(t, percore.Config{Backend: b}, h)
		nc := dial(t, rt)
		for round := range 3 {
			if _, err := nc.Write([]byte{'x'}); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(reply))
			if _, err := io.ReadFull(nc, got); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if !bytes.Equal(got, reply) {
				t.Fatalf("round %d: the reply differs", round)
			}
			c := <-h.conns
			// The loop may see the last send complete after the peer
			// has read it: ask the loop, once a turn (each Post waits
			// for one), until it does, with a deadline.
			deadline := time.Now().Add(10 * time.Second)
			for {
				held := make(chan bool)
				if err := c.Loop().Post(func() { held <- percore.HoldsOutQueue(c) }); err != nil {
					t.Fatal(err)
				}
				if !<-held {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("round %d: the connection still holds its queue 10 s after the peer read everything", round)
				}
			}
		}
	})
}
