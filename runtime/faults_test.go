package runtime_test

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// openSilent opens n connections to addr that send nothing, 64 at a time,
// and closes them at cleanup.
func openSilent(t testing.TB, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	var failed atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int)
	for range 64 {
		wg.Go(func() {
			for i := range next {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				conns[i] = c
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of %d connections failed to open", f, n)
	}
	return conns
}

// awaitEOF waits until the server has closed every connection in conns (a
// read returns EOF or a reset), and fails the test after 20 seconds.
func awaitEOF(t *testing.T, conns []net.Conn) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var open atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(deadline)
			var b [16]byte
			if _, err := c.Read(b[:]); errors.Is(err, os.ErrDeadlineExceeded) {
				open.Add(1)
			}
		})
	}
	wg.Wait()
	if n := open.Load(); n > 0 {
		t.Fatalf("%d of %d connections were not closed by the server within 20s", n, len(conns))
	}
}

// pinger round-trips one byte on an echo connection until stop is closed
// and reports the first error.
func pinger(c net.Conn, stop <-chan struct{}) <-chan error {
	done := make(chan error, 1)
	go func() {
		var b [1]byte
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte{'p'}); err != nil {
				done <- err
				return
			}
			if _, err := io.ReadFull(c, b[:]); err != nil {
				done <- err
				return
			}
		}
	}()
	return done
}

// TestThousandsExpireTogether: connections that opened together reach their
// idle timeout together; every one is closed, in slices across turns, while
// a live connection keeps being served.
func TestThousandsExpireTogether(t *testing.T) {
	const n = 3000
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b, IdleTimeout: time.Second}, echoHandler{})
		live := dial(t, rt)
		stop := make(chan struct{})
		pinged := pinger(live, stop)
		conns := openSilent(t, rt.Addr().String(), n)
		awaitEOF(t, conns)
		close(stop)
		if err := pctest.Recv(t, pinged, "end of the pings"); err != nil {
			t.Fatalf("the live connection failed while the others expired: %v", err)
		}
		pctest.WaitFor(t, "the idle timeouts counted", func() bool { return rt.Stats().IdleTimeouts == n })
		if st := rt.Stats(); st.Open != 1 {
			t.Errorf("%d connections open, want the live one", st.Open)
		}
	})
}

// TestShutdownWithThousands: a graceful shutdown closes thousands of idle
// connections without running into its deadline.
func TestShutdownWithThousands(t *testing.T) {
	const n = 3000
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b}, echoHandler{})
		conns := openSilent(t, rt.Addr().String(), n)
		pctest.WaitFor(t, "every connection accepted", func() bool { return rt.Stats().Open == n })
		if err := rt.Shutdown(shutdownCtx(t, 20*time.Second)); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		awaitEOF(t, conns)
		if st := rt.Stats(); st.Closes != n || st.Open != 0 {
			t.Errorf("after shutdown: %d closes, %d open; want %d and 0", st.Closes, st.Open, n)
		}
	})
}

// flood answers every OnData with one reply and never looks at Paused, as
// a plain request/response handler would; it records what the runtime let
// it do.
type flood struct {
	reply                   []byte
	calls, whilePaused, max int
}

func (h *flood) OnData(c *percore.Conn, data []byte) {
	h.calls++
	if c.Backpressured() {
		h.whilePaused++
	}
	c.Write(h.reply)
	h.max = max(h.max, c.Buffered())
}

// TestPausedConnectionGetsNoData: once the outbound cap pauses a
// connection, its handler hears nothing more until it resumes, so a
// handler that never checks Paused cannot queue past the cap (plus the one
// reply that reached it).
func TestPausedConnectionGetsNoData(t *testing.T) {
	const limit, reply = 256 << 10, 16 << 10
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, budget := range []int{0, -1} { // the default turn budget, and none
			h := &flood{reply: make([]byte, reply)}
			rt := start(t, percore.Config{Backend: b, MaxOutbound: limit, TurnBudget: budget}, h)
			pausedFlood(t, rt, h, limit, reply)
		}
	})
}

// pausedFlood pipelines requests on a new connection to rt and never reads
// the replies, until the server stops reading and the socket buffers are
// full, then checks what h was let do.
func pausedFlood(t *testing.T, rt *percore.Runtime, h *flood, limit, reply int) {
	t.Helper()
	c := dial(t, rt)
	chunk := make([]byte, 64<<10)
	for {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(chunk); err != nil {
			break
		}
	}
	pctest.WaitFor(t, "the connection paused", func() bool { return rt.Stats().Paused == 1 })
	var calls, whilePaused, most int
	pctest.OnLoop(t, rt.Loops()[0], func() { calls, whilePaused, most = h.calls, h.whilePaused, h.max })
	if whilePaused > 0 {
		t.Errorf("%d of %d OnData calls came while the connection was paused", whilePaused, calls)
	}
	if most > limit+reply {
		t.Errorf("%d bytes queued, over the cap %d plus one reply", most, limit)
	}
}

// closeErrs is a handler that records why each connection closed.
type closeErrs struct {
	errs   *pctest.Inbox[error]
	onData func(c *percore.Conn, data []byte)
}

func (h *closeErrs) OnData(c *percore.Conn, data []byte) {
	if h.onData != nil {
		h.onData(c, data)
	}
}
func (h *closeErrs) OnClose(c *percore.Conn, err error) { h.errs.Put(err) }

// bulk writes n bytes on c in 64 KiB writes.
func bulk(c *percore.Conn, n int) {
	chunk := make([]byte, 64<<10)
	for ; n > 0; n -= len(chunk) {
		c.Write(chunk[:min(n, len(chunk))])
	}
}

func TestWriteTimeout(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		t.Run("peer that stopped reading", func(t *testing.T) {
			h := &closeErrs{errs: pctest.NewInbox[error](), onData: func(c *percore.Conn, _ []byte) { bulk(c, 8<<20) }}
			rt := start(t, percore.Config{Backend: b, WriteTimeout: 300 * time.Millisecond, MaxOutbound: -1}, h)
			c := dial(t, rt)
			c.Write([]byte("go"))
			err := h.errs.Next(t, "close of the stalled connection")
			if !errors.Is(err, percore.ErrWriteTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("closed with %v, want ErrWriteTimeout", err)
			}
			pctest.WaitFor(t, "the write timeout counted", func() bool { return rt.Stats().WriteTimeouts == 1 })
		})
		t.Run("slow but steady reader", func(t *testing.T) {
			const total = 2 << 20
			h := &closeErrs{errs: pctest.NewInbox[error](), onData: func(c *percore.Conn, _ []byte) { bulk(c, total) }}
			rt := start(t, percore.Config{Backend: b, WriteTimeout: time.Second, MaxOutbound: -1}, h)
			c := dial(t, rt)
			c.(*net.TCPConn).SetReadBuffer(64 << 10)
			c.Write([]byte("go"))
			// 64 KiB every 100 ms: the whole queue takes about three
			// write timeouts to read, but it always moves.
			buf := make([]byte, 64<<10)
			for got := 0; got < total; {
				n, err := io.ReadFull(c, buf[:min(len(buf), total-got)])
				if err != nil {
					t.Fatalf("after %d of %d bytes: %v", got, total, err)
				}
				got += n
				time.Sleep(100 * time.Millisecond) // pacing the reader, not synchronisation
			}
			if st := rt.Stats(); st.WriteTimeouts != 0 || st.Open != 1 {
				t.Errorf("a reader that kept reading was cut off: %d write timeouts, %d open", st.WriteTimeouts, st.Open)
			}
		})
	})
}

func TestLingerBoundsAClosingConnection(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &closeErrs{errs: pctest.NewInbox[error](), onData: func(c *percore.Conn, _ []byte) {
			bulk(c, 8<<20)
			c.Close()
		}}
		rt := start(t, percore.Config{Backend: b, Linger: 300 * time.Millisecond, WriteTimeout: -1, MaxOutbound: -1}, h)
		c := dial(t, rt)
		c.Write([]byte("go"))
		err := h.errs.Next(t, "close of the lingering connection")
		if !errors.Is(err, percore.ErrLingerTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("closed with %v, want ErrLingerTimeout", err)
		}
		pctest.WaitFor(t, "the linger timeout counted", func() bool { return rt.Stats().LingerTimeouts == 1 })
	})
}

func TestPostQueueIsBounded(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b, MaxPosted: 4}, nil)
		l := rt.Loops()[0]
		release := pctest.HoldLoop(t, l)
		var ran atomic.Int64
		for i := range 4 {
			if err := l.Post(func() { ran.Add(1) }); err != nil {
				t.Fatalf("post %d of 4: %v", i+1, err)
			}
		}
		err := l.Post(func() { ran.Add(1) })
		if !errors.Is(err, percore.ErrLoopBusy) {
			t.Fatalf("a fifth post: %v, want ErrLoopBusy", err)
		}
		release()
		pctest.WaitFor(t, "the four posted functions", func() bool { return ran.Load() == 4 })
		if st := l.Stats(); st.PostRejects != 1 {
			t.Errorf("PostRejects %d, want 1", st.PostRejects)
		}
	})
}

func TestGoIsBounded(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b, MaxGo: 2}, nil)
		l := rt.Loops()[0]
		let := make(chan struct{})
		thens := pctest.NewInbox[int]()
		for i := range 2 {
			if err := l.Go(func() func() { <-let; return func() { thens.Put(i) } }); err != nil {
				t.Fatalf("Go %d of 2: %v", i+1, err)
			}
		}
		if err := l.Go(func() func() { return nil }); !errors.Is(err, percore.ErrLoopBusy) {
			t.Fatalf("a third Go: %v, want ErrLoopBusy", err)
		}
		if st := l.Stats(); st.GoRunning != 2 || st.GoRejects != 1 {
			t.Errorf("GoRunning %d, GoRejects %d; want 2 and 1", st.GoRunning, st.GoRejects)
		}
		close(let)
		thens.Next(t, "first continuation")
		thens.Next(t, "second continuation")
		pctest.WaitFor(t, "the goroutines done", func() bool { return l.Stats().GoRunning == 0 })
	})
}

func TestGoAfterStopIsCounted(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b}, nil)
		l := rt.Loops()[0]
		let := make(chan struct{})
		if err := l.Go(func() func() { <-let; return func() { t.Error("a continuation ran on a stopped loop") } }); err != nil {
			t.Fatal(err)
		}
		rt.Close()
		close(let)
		pctest.WaitFor(t, "the dropped continuation counted", func() bool { return l.Stats().GoDropped == 1 })
		if err := l.Go(func() func() { return nil }); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Go on a stopped loop: %v, want net.ErrClosed", err)
		}
	})
}

// TestCloseErrorsNameTheAddresses: the *net.OpError a connection closes
// with carries both addresses though the handler never asked for them.
func TestCloseErrorsNameTheAddresses(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &closeErrs{errs: pctest.NewInbox[error]()}
		rt := start(t, percore.Config{Backend: b, IdleTimeout: 200 * time.Millisecond}, h)
		c := dial(t, rt)
		err := h.errs.Next(t, "idle close")
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Fatalf("closed with %T %v, want a *net.OpError", err, err)
		}
		if op.Source == nil || op.Source.String() != rt.Addr().String() {
			t.Errorf("Source %v, want %v", op.Source, rt.Addr())
		}
		if op.Addr == nil || op.Addr.String() != c.LocalAddr().String() {
			t.Errorf("Addr %v, want %v", op.Addr, c.LocalAddr())
		}
	})
}

// TestBurstMemoryGoesBack: outbound queues of slow consumers are given back
// once they disconnect, and the pooled buffers within seconds after.
func TestBurstMemoryGoesBack(t *testing.T) {
	const consumers, limit = 16, 1 << 20
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		reply := make([]byte, 64<<10)
		h := &closeErrs{errs: pctest.NewInbox[error](), onData: func(c *percore.Conn, _ []byte) { c.Write(reply) }}
		rt := start(t, percore.Config{Backend: b, MaxOutbound: limit}, h)
		var conns []net.Conn
		for range consumers {
			c := dial(t, rt)
			c.Write([]byte("go"))
			conns = append(conns, c)
		}
		// Each sends until the server pauses it.
		for _, c := range conns {
			for {
				_ = c.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
				if _, err := c.Write(reply); err != nil {
					break
				}
			}
		}
		pctest.WaitFor(t, "every consumer paused", func() bool { return rt.Stats().Paused == consumers })
		if st := rt.Stats(); st.MappedBytes < consumers*limit/2 {
			t.Errorf("only %d bytes mapped for %d full queues of %d", st.MappedBytes, consumers, limit)
		}
		for _, c := range conns {
			c.Close()
		}
		for range consumers {
			h.errs.Next(t, "close of a consumer")
		}
		pctest.WaitFor(t, "outbound memory given back", func() bool {
			st := rt.Stats()
			return st.MappedBytes == 0 && st.PooledBytes == 0
		})
	})
}

// TestDialStateOutlivesAClose: a dial closed before its connect completes
// keeps its socket address referenced until the kernel is done with it.
func TestDialStateOutlivesAClose(t *testing.T) {
	pctest.NeedURing(t)
	rt := start(t, percore.Config{Backend: percore.IOURing}, nil)
	l := rt.Loops()[0]
	up := pctest.Serve(t, pctest.LineEcho)
	var c *percore.Conn
	dialed := pctest.NewInbox[error]()
	pctest.OnLoop(t, l, func() {
		if err := l.Dial(up.Addr(), echoHandler{}, func(_ *percore.Conn, err error) { dialed.Put(err) }); err != nil {
			t.Fatal(err)
		}
		// In the same turn: the connect is not even submitted yet.
		c = percore.Dialing(l)
		c.Abort()
		if !percore.DialStateHeld(c) {
			t.Error("the dial state was dropped while the connect was in flight")
		}
	})
	if err := dialed.Next(t, "end of the dial"); !errors.Is(err, net.ErrClosed) {
		t.Errorf("dial ended with %v, want net.ErrClosed", err)
	}
	pctest.WaitFor(t, "the slot given back", func() bool {
		freed := false
		pctest.OnLoop(t, l, func() { freed = percore.SlotFreed(c) })
		return freed
	})
	pctest.OnLoop(t, l, func() {
		if percore.DialStateHeld(c) {
			t.Error("the dial state outlived the slot")
		}
	})
}

// TestReceiveWithoutBuffer: a receive completion with data but no provided
// buffer fails the connection instead of handing over (and recycling)
// buffer 0.
func TestReceiveWithoutBuffer(t *testing.T) {
	pctest.NeedURing(t)
	opened := pctest.NewInbox[*percore.Conn]()
	var got atomic.Int64
	h := &openClose{opened: opened, errs: pctest.NewInbox[error](), data: &got}
	rt := start(t, percore.Config{Backend: percore.IOURing}, h)
	dial(t, rt)
	c := opened.Next(t, "open")
	pctest.OnLoop(t, rt.Loops()[0], func() {
		if !percore.InjectRecvWithoutBuffer(c) {
			t.Fatal("not an io_uring loop")
		}
	})
	err := h.errs.Next(t, "close")
	if err == nil || !strings.Contains(err.Error(), "without a provided buffer") {
		t.Errorf("closed with %v, want the missing buffer named", err)
	}
	if got.Load() != 0 {
		t.Errorf("the handler got %d bytes from no buffer", got.Load())
	}
}

type openClose struct {
	opened *pctest.Inbox[*percore.Conn]
	errs   *pctest.Inbox[error]
	data   *atomic.Int64
}

func (h *openClose) OnOpen(c *percore.Conn)              { h.opened.Put(c) }
func (h *openClose) OnData(c *percore.Conn, data []byte) { h.data.Add(int64(len(data))) }
func (h *openClose) OnClose(c *percore.Conn, err error)  { h.errs.Put(err) }
