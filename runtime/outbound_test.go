package runtime_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// refuser writes count messages of 16 KiB to its connection when asked (one
// byte of input), the way a pub/sub server fans out to a subscriber that
// may not read, and reports what the runtime took and refused. write is
// the call under test.
type refuser struct {
	msg     []byte
	count   int
	every   time.Duration // the rounds repeat on a timer until the connection closes (0: once per input)
	large   []byte        // the message of a round asked with '2'
	write   func(c *percore.Conn, p []byte) error
	rounds  *pctest.Inbox[refuserRound]
	drained *pctest.Inbox[int]
	closed  *pctest.Inbox[error]
}

type refuserRound struct {
	taken, refused, maxQueued int
	other                     error // any error but ErrOutboundFull
}

func newRefuser(count int, write func(c *percore.Conn, p []byte) error) *refuser {
	return &refuser{msg: bytes.Repeat([]byte("m"), 16<<10), count: count, write: write,
		rounds: pctest.NewInbox[refuserRound](), drained: pctest.NewInbox[int](), closed: pctest.NewInbox[error]()}
}

// OnData runs a round; an input of '2' asks for one message larger than
// the cap instead (large), decided on the loop so that the test's
// goroutine never writes what the loop reads.
func (f *refuser) OnData(c *percore.Conn, data []byte) {
	if data[len(data)-1] == '2' {
		f.round(c, f.large, 1)
		return
	}
	f.round(c, f.msg, f.count)
}

func (f *refuser) round(c *percore.Conn, msg []byte, count int) {
	if c.Closed() {
		return
	}
	var r refuserRound
	for range count {
		err := f.write(c, msg)
		switch {
		case err == nil:
			r.taken++
		case errors.Is(err, percore.ErrOutboundFull):
			r.refused++
		default:
			r.other = err
		}
		r.maxQueued = max(r.maxQueued, c.Buffered())
	}
	f.rounds.Put(r)
	if f.every > 0 {
		c.Loop().AfterFunc(f.every, func() { f.round(c, msg, count) })
	}
}

func (f *refuser) OnDrain(c *percore.Conn) { f.drained.Put(c.Buffered()) }

func (f *refuser) OnClose(c *percore.Conn, err error) { f.closed.Put(err) }

const refuseCap = 256 << 10

func checkRound(t *testing.T, r refuserRound, count int) {
	t.Helper()
	if r.other != nil {
		t.Fatalf("a write failed with %v, want nil or ErrOutboundFull", r.other)
	}
	if r.taken+r.refused != count || r.refused == 0 && r.maxQueued < refuseCap-16<<10 {
		t.Fatalf("%d writes taken, %d refused of %d: want the rest refused", r.taken, r.refused, count)
	}
	if r.maxQueued > refuseCap {
		t.Fatalf("%d bytes queued, over the cap of %d", r.maxQueued, refuseCap)
	}
}

// TestDropWritesBoundsAPeerThatNeverReads is the pub/sub server
// (a subscriber that never reads, Write called for every message, a
// publish every millisecond): under DropWrites the queue stays under
// MaxOutbound, every refusal is counted, reading is never paused, and
// WriteTimeout closes the peer once the kernel takes nothing more.
func TestDropWritesBoundsAPeerThatNeverReads(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		const count = 100 // 1.6 MiB a round
		f := newRefuser(count, func(c *percore.Conn, p []byte) error { _, err := c.Write(p); return err })
		f.every = time.Millisecond
		rt := start(t, percore.Config{Backend: b, MaxOutbound: refuseCap, OutboundPolicy: percore.DropWrites,
			WriteTimeout: 200 * time.Millisecond}, f)
		c := dial(t, rt)
		if _, err := c.Write([]byte("1")); err != nil {
			t.Fatal(err)
		}
		if err := f.closed.Next(t, "OnClose"); !errors.Is(err, percore.ErrWriteTimeout) {
			t.Fatalf("OnClose: %v, want ErrWriteTimeout", err)
		}
		refused, stalled := 0, 0
		for _, r := range f.rounds.Drain() {
			checkRound(t, r, count)
			refused += r.refused
			if r.taken == 0 {
				stalled++
			}
		}
		if stalled == 0 {
			t.Fatalf("closed before a round found the queue full")
		}
		want := uint64(refused)
		pctest.WaitFor(t, "the refusals and the write timeout counted", func() bool {
			st := rt.Stats()
			return st.WritesRefused == want && st.WriteTimeouts == 1
		})
		if st := rt.Stats(); st.Pauses != 0 {
			t.Fatalf("%d pauses: DropWrites does not pause reading", st.Pauses)
		}
	})
}

// TestTryWriteRefusesAndDrains: under the default policy, TryWrite and
// TryReserve refuse what does not fit, what they took arrives whole and
// in order, and OnDrain says when to go on.
func TestTryWriteRefusesAndDrains(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		const count = 400
		seq := 0
		f := newRefuser(count, nil)
		f.write = func(c *percore.Conn, p []byte) error {
			seq++
			if seq%2 == 0 {
				_, err := c.TryWrite(p)
				return err
			}
			room, err := c.TryReserve(len(p))
			if err != nil {
				return err
			}
			return c.Commit(copy(room, p))
		}
		f.large = bytes.Repeat([]byte("L"), refuseCap+1)
		rt := start(t, percore.Config{Backend: b, MaxOutbound: refuseCap}, f)
		c := dial(t, rt)
		if _, err := c.Write([]byte("1")); err != nil {
			t.Fatal(err)
		}
		r := f.rounds.Next(t, "the round")
		checkRound(t, r, count)
		got, err := io.ReadAll(io.LimitReader(c, int64(r.taken*len(f.msg))))
		if err != nil || !bytes.Equal(got, bytes.Repeat(f.msg, r.taken)) {
			t.Fatalf("read %d bytes (%v), want the %d messages taken", len(got), err, r.taken)
		}
		if q := f.drained.Next(t, "OnDrain"); q > refuseCap/4 {
			t.Fatalf("OnDrain with %d bytes queued, over the low-water mark", q)
		}
		pctest.WaitFor(t, "the refusals counted", func() bool { return rt.Stats().WritesRefused == uint64(r.refused) })
		// Empty again: a message larger than the cap fits an empty queue.
		if _, err := c.Write([]byte("2")); err != nil {
			t.Fatal(err)
		}
		if r := f.rounds.Next(t, "the large one"); r.taken != 1 {
			t.Fatalf("a message over the cap on an empty queue: %+v, want it taken", r)
		}
		if _, err := io.ReadFull(c, make([]byte, refuseCap+1)); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if err := f.closed.Next(t, "OnClose"); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			t.Logf("OnClose: %v", err)
		}
	})
}
