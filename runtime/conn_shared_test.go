package runtime_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// sharedMixer writes, for each byte of input, a seeded random sequence of
// writes (Write, WriteShared, Reserve and Commit, Writev) of slices of
// frame, a buffer shared by every connection and never written to, and
// records the bytes it wrote in order: the oracle the peer's stream is
// checked against.
type sharedMixer struct {
	rng   *rand.Rand
	frame []byte // frame[:len(frame)-guard] is written; the guard bytes past it must never change
	want  []byte // what the current input byte's writes wrote
	errs  *pctest.Inbox[error]
	done  *pctest.Inbox[[]byte] // want, for each input byte
}

const sharedGuard = 64

func (m *sharedMixer) OnData(c *percore.Conn, data []byte) {
	for range data {
		m.want = m.want[:0]
		for range 1 + m.rng.IntN(40) {
			if err := m.writeOne(c); err != nil {
				m.errs.Put(err)
				break
			}
		}
		m.done.Put(bytes.Clone(m.want))
	}
}

func (m *sharedMixer) writeOne(c *percore.Conn) error {
	body := m.frame[:len(m.frame)-sharedGuard]
	// A piece of the shared frame; its capacity runs into the guard (and
	// further pieces), so that a queue that appended to it would show.
	i := m.rng.IntN(len(body))
	j := i + 1 + m.rng.IntN(len(body)-i)
	if m.rng.IntN(8) == 0 {
		j = len(body) // sometimes large: the socket fills and sends stay in flight
	}
	p := body[i:j]
	var err error
	switch m.rng.IntN(6) {
	case 0, 1, 2:
		_, err = c.WriteShared(p)
	case 3:
		_, err = c.Write(p)
	case 4:
		room := c.Reserve(len(p))
		err = c.Commit(copy(room, p))
	default:
		_, err = c.Writev(p[:len(p)/2], p[len(p)/2:])
	}
	if err == nil {
		m.want = append(m.want, p...)
	}
	return err
}

// TestWriteSharedKeepsOrderSeeded mixes WriteShared with every other kind
// of write, in random order and sizes over many turns (some large enough
// to fill the socket, so that shared slices wait in flight or behind other
// bytes): the peer receives exactly the bytes written, in order, and the
// shared buffer, past what was written too, is never changed.
func TestWriteSharedKeepsOrderSeeded(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		seed := rand.Uint64()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 27))
		frame := make([]byte, 200<<10+sharedGuard)
		for i := range frame {
			frame[i] = byte(rng.Uint32())
		}
		orig := bytes.Clone(frame)
		m := &sharedMixer{rng: rng, frame: frame, errs: pctest.NewInbox[error](), done: pctest.NewInbox[[]byte]()}
		rt := start(t, percore.Config{Backend: b}, m)
		c := dial(t, rt)
		for round := range 30 {
			k := 1 + round%3
			if _, err := c.Write(bytes.Repeat([]byte("x"), k)); err != nil {
				t.Fatal(err)
			}
			var want []byte
			for range k {
				want = append(want, m.done.Next(t, "an input byte's writes")...)
			}
			got := make([]byte, len(want))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("round %d: read: %v", round, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("round %d (seed %d): the stream differs from what was written", round, seed)
			}
		}
		if errs := m.errs.Drain(); len(errs) > 0 {
			t.Fatalf("a write failed: %v", errs[0])
		}
		if !bytes.Equal(frame, orig) {
			t.Fatalf("seed %d: the shared buffer was written to", seed)
		}
	})
}

// TestTryWriteSharedRefusesAtTheCap: TryWriteShared refuses what would
// take the queue past MaxOutbound, counted, queues what it takes whole and
// in order, and a message larger than the cap fits an empty queue.
func TestTryWriteSharedRefusesAtTheCap(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		const count = 400
		f := newRefuser(count, func(c *percore.Conn, p []byte) error { _, err := c.TryWriteShared(p); return err })
		f.large = bytes.Repeat([]byte("L"), refuseCap+1)
		rt := start(t, percore.Config{Backend: b, MaxOutbound: refuseCap}, f)
		c := dial(t, rt)
		if _, err := c.Write([]byte("1")); err != nil {
			t.Fatal(err)
		}
		r := f.rounds.Next(t, "the round")
		checkRound(t, r, count)
		if r.refused == 0 {
			t.Fatalf("%+v: want writes refused at the cap", r)
		}
		got, err := io.ReadAll(io.LimitReader(c, int64(r.taken*len(f.msg))))
		if err != nil || !bytes.Equal(got, bytes.Repeat(f.msg, r.taken)) {
			t.Fatalf("read %d bytes (%v), want the %d messages taken", len(got), err, r.taken)
		}
		pctest.WaitFor(t, "the refusals counted", func() bool { return rt.Stats().WritesRefused == uint64(r.refused) })
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
		if err := f.closed.Next(t, "OnClose"); err != nil && !errors.Is(err, io.EOF) {
			t.Logf("OnClose: %v", err)
		}
	})
}

// holder answers each input with big, more than the socket takes at
// once, and keeps its connection for the test.
type holder struct {
	big   []byte
	conns *pctest.Inbox[*percore.Conn]
}

func (h *holder) OnData(c *percore.Conn, data []byte) {
	c.Write(h.big)
	h.conns.Put(c)
}

// TestDrainedConnLetsItsWriteTimerGo: a connection with bytes queued holds
// a write timer; once its queue has drained it gives the timer up within
// about a second (writeCheckEvery), not a whole WriteTimeout later, so
// that idle connections hold none; the next queued write arms one again.
func TestDrainedConnLetsItsWriteTimerGo(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &holder{big: bytes.Repeat([]byte("b"), 16<<20), conns: pctest.NewInbox[*percore.Conn]()}
		rt := start(t, percore.Config{Backend: b, WriteTimeout: time.Hour}, h)
		c := dial(t, rt)
		held := func(pc *percore.Conn) bool {
			ch := make(chan bool, 1)
			if err := pc.Loop().Post(func() { ch <- percore.WriteTimerHeld(pc) }); err != nil {
				t.Fatal(err)
			}
			return <-ch
		}
		for range 2 {
			if _, err := c.Write([]byte("go")); err != nil {
				t.Fatal(err)
			}
			pc := h.conns.Next(t, "the answer")
			// Nothing read yet: 16 MiB cannot all be in the socket.
			if !held(pc) {
				t.Fatal("no write timer while 16 MiB wait to be sent")
			}
			if _, err := io.ReadFull(c, make([]byte, len(h.big))); err != nil {
				t.Fatal(err)
			}
			pctest.WaitFor(t, "the drained connection's write timer to go", func() bool { return !held(pc) })
		}
	})
}
