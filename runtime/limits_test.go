package runtime_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"golang.org/x/sys/unix"
)

// slowServer answers each request after 100 ms of timer work, tracking
// how many connections it serves at once.
type slowServer struct {
	mu         sync.Mutex
	open, peak int
}

func (s *slowServer) OnOpen(c *percore.Conn) {
	s.mu.Lock()
	s.open++
	s.peak = max(s.peak, s.open)
	s.mu.Unlock()
}

func (s *slowServer) OnData(c *percore.Conn, data []byte) {
	c.BeginRequest()
	reply := append([]byte("done:"), data...)
	c.Loop().AfterFunc(100*time.Millisecond, func() {
		c.Write(reply)
		c.EndRequest()
	})
}

func (s *slowServer) OnClose(c *percore.Conn, err error) {
	s.mu.Lock()
	s.open--
	s.mu.Unlock()
}

func TestConnectionCap(t *testing.T) {
	const clients, limit = 5, 2
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		s := &slowServer{}
		rt := start(t, percore.Config{Backend: b, MaxConns: limit}, s)
		// Every connect succeeds at once: the kernel completes the
		// handshake into the backlog while the loop is at its cap.
		conns := make([]net.Conn, clients)
		for i := range conns {
			conns[i] = dial(t, rt)
		}
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for i, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := []byte{byte('a' + i)}
				if _, err := c.Write(req); err != nil {
					errs <- err
					return
				}
				got := make([]byte, 6)
				if _, err := io.ReadFull(c, got); err != nil {
					errs <- err
					return
				}
				if string(got) != "done:"+string(req) {
					errs <- errors.New("reply " + string(got))
				}
				c.Close() // frees the server's slot
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("a capped client was not answered: %v", err)
		}
		s.mu.Lock()
		peak := s.peak
		s.mu.Unlock()
		if peak > limit {
			t.Fatalf("%d connections served at once, cap %d", peak, limit)
		}
		st := rt.Stats()
		if st.Accepts != clients || st.CapHolds == 0 {
			t.Fatalf("accepts %d (want %d), cap pauses %d (want > 0)", st.Accepts, clients, st.CapHolds)
		}
	})
}

// closeRecorder echoes and reports why connections closed.
type closeRecorder struct {
	echoHandler
	closed *pctest.Inbox[error]
}

func (h *closeRecorder) OnClose(c *percore.Conn, err error) { h.closed.Put(err) }

func TestIdleTimeout(t *testing.T) {
	// Long enough that a stall of the test process on a busy machine
	// does not look like silence between the talker's messages.
	const idle = time.Second
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &closeRecorder{closed: pctest.NewInbox[error]()}
		rt := start(t, percore.Config{Backend: b, IdleTimeout: idle}, h)

		// A client that keeps talking, for two idle periods, is never
		// cut off.
		talker := dial(t, rt)
		buf := make([]byte, 1)
		for end := time.Now().Add(2 * idle); time.Now().Before(end); {
			if _, err := talker.Write([]byte{'x'}); err != nil {
				t.Fatalf("talking client: %v", err)
			}
			if _, err := io.ReadFull(talker, buf); err != nil {
				t.Fatalf("talking client cut off: %v", err)
			}
			time.Sleep(idle / 20) // the workload's pace, not synchronisation
		}
		// Then it falls silent and is closed, with the reason.
		if _, err := talker.Read(buf); err != io.EOF {
			t.Fatalf("silent client: read %v, want EOF", err)
		}
		err := h.closed.Next(t, "OnClose")
		if !errors.Is(err, percore.ErrIdleTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("OnClose: %v, want ErrIdleTimeout", err)
		}
		// Stats are published once per loop turn.
		pctest.WaitFor(t, "the idle timeout counted", func() bool { return rt.Stats().IdleTimeouts == 1 })
	})
}

// lifetimeSetter gives every connection its own, shorter, idle timeout
// and a maximum lifetime from OnOpen.
type lifetimeSetter struct{ closeRecorder }

func (h *lifetimeSetter) OnOpen(c *percore.Conn) {
	c.SetIdleTimeout(0) // the handler turns the runtime's default off
	c.SetMaxLifetime(200 * time.Millisecond)
}

func TestMaxLifetimeSetByHandler(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &lifetimeSetter{closeRecorder{closed: pctest.NewInbox[error]()}}
		rt := start(t, percore.Config{Backend: b, IdleTimeout: 50 * time.Millisecond}, h)
		c := dial(t, rt)
		// Busy or not, the connection is closed at its lifetime and not
		// by the (disabled) idle timeout.
		if _, err := io.ReadAll(c); err != nil {
			t.Fatal(err)
		}
		err := h.closed.Next(t, "OnClose")
		if !errors.Is(err, percore.ErrMaxLifetime) {
			t.Fatalf("OnClose: %v, want ErrMaxLifetime", err)
		}
		pctest.WaitFor(t, "the lifetime close counted", func() bool { return rt.Stats().LifetimeCloses == 1 })
		if st := rt.Stats(); st.IdleTimeouts != 0 {
			t.Fatalf("stats %+v: an idle timeout fired", st)
		}
	})
}

// producer answers every byte with a 16 KiB reply. It respects
// backpressure the way a handler should: while its connection is paused it
// only counts the requests, and answers them when OnDrain says the queue
// has drained. It records the largest queue it saw.
type producer struct {
	reply  []byte
	maxQ   atomic.Int64
	drains atomic.Int64
	closed *pctest.Inbox[error]
}

type backlog struct{ pending int }

func (p *producer) OnOpen(c *percore.Conn) { c.SetValue(&backlog{}) }

func (p *producer) OnData(c *percore.Conn, data []byte) {
	b := c.Value().(*backlog)
	b.pending += len(data)
	p.produce(c, b)
}

func (p *producer) produce(c *percore.Conn, b *backlog) {
	for b.pending > 0 && !c.Backpressured() && !c.Closed() {
		b.pending--
		c.Write(p.reply)
		if q := int64(c.Buffered()); q > p.maxQ.Load() {
			p.maxQ.Store(q)
		}
	}
}

func (p *producer) OnDrain(c *percore.Conn) {
	p.drains.Add(1)
	p.produce(c, c.Value().(*backlog))
}

func (p *producer) OnClose(c *percore.Conn, err error) { p.closed.Put(err) }

func TestSlowConsumerPaused(t *testing.T) {
	// 2000 replies of 16 KiB: 32 MB, far more than the kernel's socket
	// buffers hold, so the queue reaches the cap on either backend.
	const maxOut, requests = 256 << 10, 2000
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := &producer{reply: bytes.Repeat([]byte("r"), 16<<10), closed: pctest.NewInbox[error]()}
		rt := start(t, percore.Config{Backend: b, MaxOutbound: maxOut}, p)
		slow := dial(t, rt)
		// The slow client sends every request and reads nothing.
		if _, err := slow.Write(bytes.Repeat([]byte("q"), requests)); err != nil {
			t.Fatal(err)
		}
		pctest.WaitFor(t, "reading paused", func() bool { return rt.Stats().Paused == 1 })
		// Others on the same loop are served normally meanwhile.
		other := dial(t, rt)
		if _, err := roundTrip(other, []byte("x")); err != nil {
			t.Fatalf("other client while one is paused: %v", err)
		}
		if q := p.maxQ.Load(); q > maxOut+int64(len(p.reply)) {
			t.Fatalf("queued %d bytes, cap %d plus one reply", q, maxOut)
		}
		// Now it reads: the queue drains, reading resumes, and every
		// reply arrives.
		n, err := io.CopyN(io.Discard, slow, requests*int64(len(p.reply)))
		if err != nil {
			t.Fatalf("slow client got %d bytes: %v", n, err)
		}
		st := rt.Stats()
		if st.Pauses == 0 || p.drains.Load() == 0 {
			t.Fatalf("pauses %d drains %d, want both > 0", st.Pauses, p.drains.Load())
		}
		pctest.WaitFor(t, "no connection paused", func() bool { return rt.Stats().Paused == 0 })
	})
}

func TestSlowConsumerClosed(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := &producer{reply: bytes.Repeat([]byte("r"), 16<<10), closed: pctest.NewInbox[error]()}
		rt := start(t, percore.Config{Backend: b, MaxOutbound: 128 << 10, OutboundPolicy: percore.CloseSlowConsumer}, p)
		slow := dial(t, rt)
		if _, err := slow.Write(bytes.Repeat([]byte("q"), 2000)); err != nil {
			t.Fatal(err)
		}
		err := p.closed.Next(t, "OnClose")
		if !errors.Is(err, percore.ErrSlowConsumer) {
			t.Fatalf("OnClose: %v, want ErrSlowConsumer", err)
		}
		pctest.WaitFor(t, "the slow consumer counted", func() bool { return rt.Stats().SlowConsumers == 1 })
		other := dial(t, rt)
		if _, err := roundTrip(other, []byte("x")); err != nil {
			t.Fatalf("other client: %v", err)
		}
	})
}

// lineCounter answers every line with one byte and records, when the
// light connection's line arrives, how many lines the heavy one had
// answered.
type lineCounter struct {
	heavy, light atomic.Pointer[percore.Conn]
	answered     int // heavy lines answered; loop thread only
	atLight      *pctest.Inbox[int]
}

func (h *lineCounter) OnData(c *percore.Conn, data []byte) {
	n := bytes.Count(data, []byte{'\n'})
	if c == h.light.Load() {
		h.atLight.Put(h.answered)
	} else {
		h.answered += n
	}
	c.Write(bytes.Repeat([]byte{'k'}, n))
}

func (h *lineCounter) OnOpen(c *percore.Conn) {
	if !h.heavy.CompareAndSwap(nil, c) {
		h.light.Store(c)
	}
}

// TestFairnessBudget makes the pipelined-neighbour case deterministic: the
// loop is held while a heavy client's 64 KiB of lines and a light
// client's one line land in the server's sockets, then released. With a
// 4 KiB turn budget the light line is answered before the heavy pipeline is.
func TestFairnessBudget(t *testing.T) {
	const lines, lineLen = 1024, 64
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &lineCounter{atLight: pctest.NewInbox[int]()}
		rt := start(t, percore.Config{Backend: b, TurnBudget: 4 << 10}, h)
		heavy := dial(t, rt)
		pctest.WaitFor(t, "heavy connection open", func() bool { return h.heavy.Load() != nil })
		light := dial(t, rt)
		pctest.WaitFor(t, "light connection open", func() bool { return h.light.Load() != nil })

		// The descriptors, asked for on the loop (Conn.Fd makes one for a
		// direct descriptor: UringDirectDescriptors).
		var hfd, lfd int
		pctest.OnLoop(t, rt.Loops()[0], func() { hfd, lfd = h.heavy.Load().Fd(), h.light.Load().Fd() })
		release := pctest.HoldLoop(t, rt.Loops()[0])
		line := append(bytes.Repeat([]byte("h"), lineLen-1), '\n')
		if _, err := heavy.Write(bytes.Repeat(line, lines)); err != nil {
			t.Fatal(err)
		}
		if _, err := light.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		pctest.WaitFor(t, "both requests queued in the server's sockets", func() bool {
			hq, _ := unix.IoctlGetInt(hfd, unix.SIOCINQ)
			lq, _ := unix.IoctlGetInt(lfd, unix.SIOCINQ)
			return hq == lines*lineLen && lq == 5
		})
		release()
		answered := h.atLight.Next(t, "line from the light client")
		if answered >= lines {
			t.Fatalf("the light line waited for all %d heavy lines", lines)
		}
		if _, err := io.ReadFull(light, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(heavy, make([]byte, lines)); err != nil {
			t.Fatal(err)
		}
		t.Logf("light answered after %d of %d heavy lines; deferrals %d", answered, lines, rt.Stats().Deferrals)
	})
}

// shortIdle shortens the runtime's idle timeout for its connections.
type shortIdle struct{ closeRecorder }

func (h *shortIdle) OnOpen(c *percore.Conn) { c.SetIdleTimeout(50 * time.Millisecond) }

// TestSetIdleTimeoutShortens sets a shorter idle timeout than the
// runtime's from OnOpen: the connection is closed at the shorter one (the
// runtime's, a minute, would outlast the test's deadline).
func TestSetIdleTimeoutShortens(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &shortIdle{closeRecorder{closed: pctest.NewInbox[error]()}}
		rt := start(t, percore.Config{Backend: b, IdleTimeout: time.Minute}, h)
		c := dial(t, rt)
		if _, err := io.ReadAll(c); err != nil {
			t.Fatal(err)
		}
		if err := h.closed.Next(t, "OnClose"); !errors.Is(err, percore.ErrIdleTimeout) {
			t.Fatalf("OnClose: %v, want ErrIdleTimeout", err)
		}
	})
}
