package runtime_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/ring"
	percore "github.com/percore/percore/runtime"
	"golang.org/x/sys/unix"
)

func TestEchoPayloadSizes(t *testing.T) {
	sizes := []struct {
		name string
		n    int
	}{
		{"1B", 1}, {"64B", 64}, {"4KiB", 4 << 10}, {"64KiB", 64 << 10},
		{"1MiB", 1 << 20}, // spans many completions and the socket buffers
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b}, echoHandler{})
		c := dial(t, rt)
		// A zero-byte write sends nothing and must not disturb what follows.
		if _, err := c.Write(nil); err != nil {
			t.Fatal(err)
		}
		for _, sz := range sizes {
			t.Run(sz.name, func(t *testing.T) {
				p := make([]byte, sz.n)
				for i := range p {
					p[i] = byte(rand.IntN(256))
				}
				got, err := roundTrip(c, p)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, p) {
					t.Fatalf("echo of %d bytes differs (first difference at %d)", sz.n, firstDiff(got, p))
				}
			})
		}
	})
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestThousandConnections(t *testing.T) {
	const conns, trips = 1000, 100
	// Both ends of every connection are in this process (Go raises the
	// soft limit to the hard one at start).
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < 2*conns+200 {
		t.Skipf("needs %d descriptors; RLIMIT_NOFILE is %d here", 2*conns+200, lim.Cur)
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		cores := allCores(t)
		rt := start(t, percore.Config{Backend: b, Cores: cores}, echoHandler{})
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", rt.Addr().String(), 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(60 * time.Second))
				msg := []byte("connection 0000 trip 000 ")
				copy(msg[11:15], []byte{byte('0' + i/1000%10), byte('0' + i/100%10), byte('0' + i/10%10), byte('0' + i%10)})
				got := make([]byte, len(msg))
				for trip := range trips {
					copy(msg[21:24], []byte{byte('0' + trip/100), byte('0' + trip/10%10), byte('0' + trip%10)})
					if _, err := c.Write(msg); err != nil {
						errs <- err
						return
					}
					if _, err := io.ReadFull(c, got); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, msg) {
						errs <- errors.New("echo mismatch: " + string(got) + " != " + string(msg))
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		pctest.WaitFor(t, "every connection closed", func() bool { return rt.Stats().Closes == conns })
		s := rt.Stats()
		if s.Accepts != conns || s.BytesIn != s.BytesOut || s.BytesIn != conns*trips*25 {
			t.Fatalf("stats: %+v", s)
		}
		if len(cores) > 1 {
			accepting := 0
			for _, l := range rt.Loops() {
				if l.Stats().Accepts > 0 {
					accepting++
				}
			}
			if accepting < 2 {
				t.Fatalf("only %d of %d loops accepted connections", accepting, len(cores))
			}
		}
	})
}

// halfCloser echoes, and when the peer shuts its write side it sends a
// goodbye and closes.
type halfCloser struct {
	eof    chan struct{}
	closed *pctest.Inbox[error]
}

func (h *halfCloser) OnData(c *percore.Conn, data []byte) { c.Write(data) }
func (h *halfCloser) OnEOF(c *percore.Conn) {
	close(h.eof)
	c.Write([]byte("goodbye"))
	c.Close()
}
func (h *halfCloser) OnClose(c *percore.Conn, err error) { h.closed.Put(err) }

func TestHalfClose(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &halfCloser{eof: make(chan struct{}), closed: pctest.NewInbox[error]()}
		rt := start(t, percore.Config{Backend: b}, h)
		c := dial(t, rt).(*net.TCPConn)
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c) // until the server's FIN
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "pinggoodbye" {
			t.Fatalf("read %q, want %q", got, "pinggoodbye")
		}
		<-h.eof
		if err := h.closed.Next(t, "OnClose"); err != nil {
			t.Fatalf("OnClose error %v, want nil for a clean close", err)
		}
	})
}

// writeShutter answers end of stream by shutting its own write side, and
// keeps the connection.
type writeShutter struct {
	echoHandler
	eof *pctest.Inbox[struct{}]
}

func (h writeShutter) OnEOF(c *percore.Conn) {
	c.CloseWrite()
	h.eof.Put(struct{}{})
}

// keeper keeps a connection past the peer's end of stream.
type keeper struct {
	echoHandler
	eof *pctest.Inbox[struct{}]
}

func (h keeper) OnEOF(*percore.Conn) { h.eof.Put(struct{}{}) }

// TestLoopRestsAfterPeerIsGone keeps a connection open after both sides
// are done with it (half-closed both ways, or reset by the peer) and checks
// that the loop does not spin on it: a loop with nothing to do turns only
// for its timers. A socket left in an epoll set after its peer is gone is
// reported ready on every wait (epoll always reports hang-ups and errors).
func TestLoopRestsAfterPeerIsGone(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, tc := range []struct {
			name string
			h    func(eof *pctest.Inbox[struct{}]) percore.Handler
			end  func(t *testing.T, c *net.TCPConn)
		}{
			{"both halves closed", func(eof *pctest.Inbox[struct{}]) percore.Handler { return writeShutter{eof: eof} },
				func(t *testing.T, c *net.TCPConn) {
					c.CloseWrite()
					if _, err := io.ReadAll(c); err != nil {
						t.Fatalf("read to the server's end of stream: %v", err)
					}
				}},
			{"reset after end of stream", func(eof *pctest.Inbox[struct{}]) percore.Handler { return keeper{eof: eof} },
				func(t *testing.T, c *net.TCPConn) {
					c.CloseWrite()
				}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				eof := pctest.NewInbox[struct{}]()
				rt := start(t, percore.Config{Backend: b}, tc.h(eof))
				c := dial(t, rt).(*net.TCPConn)
				if got, err := roundTrip(c, []byte("x")); err != nil || string(got) != "x" {
					t.Fatalf("round trip: %q %v", got, err)
				}
				tc.end(t, c)
				eof.Next(t, "OnEOF")
				if tc.name == "reset after end of stream" {
					c.SetLinger(0)
					c.Close()
				}
				pctest.WaitFor(t, "the connection counted open", func() bool { return rt.Stats().Open == 1 })
				// A spinning loop turns about a million times a second;
				// a resting one a few times. The window only measures.
				before := rt.Stats().Turns
				time.Sleep(200 * time.Millisecond)
				if turns := rt.Stats().Turns - before; turns > 1000 {
					t.Fatalf("the loop turned %d times in 200 ms with nothing to do", turns)
				}
			})
		}
	})
}

// flooder answers any input with a large reply and reports close errors.
type flooder struct {
	reply  []byte
	closed *pctest.Inbox[error]
}

func (f *flooder) OnData(c *percore.Conn, data []byte) {
	if string(data) == "flood" {
		c.Write(f.reply)
		return
	}
	c.Write(data)
}
func (f *flooder) OnClose(c *percore.Conn, err error) { f.closed.Put(err) }

func TestPeerResetMidWrite(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		f := &flooder{reply: make([]byte, 32<<20), closed: pctest.NewInbox[error]()}
		rt := start(t, percore.Config{Backend: b}, f)
		c := dial(t, rt).(*net.TCPConn)
		if _, err := c.Write([]byte("flood")); err != nil {
			t.Fatal(err)
		}
		// Read a little so the server is surely mid-write, then reset.
		if _, err := io.ReadFull(c, make([]byte, 1024)); err != nil {
			t.Fatal(err)
		}
		c.SetLinger(0)
		c.Close()
		err := f.closed.Next(t, "OnClose after a reset mid-write")
		if err == nil {
			t.Fatal("OnClose got nil, want the reset reported as an error")
		}
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("OnClose error %v, want ECONNRESET or EPIPE", err)
		}
		var op *net.OpError
		if !errors.As(err, &op) {
			t.Fatalf("OnClose error %T, want *net.OpError", err)
		}
		// The loop keeps serving others.
		c2 := dial(t, rt)
		got, err := roundTrip(c2, []byte("still here"))
		if err != nil || string(got) != "still here" {
			t.Fatalf("after reset: %q, %v", got, err)
		}
	})
}

func TestPostFromManyGoroutines(t *testing.T) {
	const posters, each = 16, 500
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b, Cores: allCores(t)}, nil)
		loops := rt.Loops()
		tids := make([]int, len(loops))
		counts := make([]int, len(loops)) // each written only by its loop
		for i, l := range loops {
			pctest.OnLoop(t, l, func() { tids[i] = unix.Gettid() })
		}
		var wrong atomic.Int64
		var wg sync.WaitGroup
		for range posters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					for i, l := range loops {
						err := l.Post(func() {
							if unix.Gettid() != tids[i] {
								wrong.Add(1)
							}
							counts[i]++
						})
						if err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		for i, l := range loops {
			var n int
			pctest.OnLoop(t, l, func() { n = counts[i] })
			if n != posters*each {
				t.Errorf("loop %d ran %d posted functions, want %d", i, n, posters*each)
			}
		}
		if wrong.Load() != 0 {
			t.Fatalf("%d functions ran on the wrong thread", wrong.Load())
		}
	})
}

func TestLoopsArePinned(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		cores := allCores(t)
		rt := start(t, percore.Config{Backend: b, Cores: cores}, echoHandler{})
		if len(rt.Loops()) != len(cores) {
			t.Fatalf("%d loops for %d cores", len(rt.Loops()), len(cores))
		}
		for i, l := range rt.Loops() {
			if l.CPU() != cores[i] || l.Backend() != b {
				t.Fatalf("loop %d: cpu %d backend %v, want cpu %d backend %v", i, l.CPU(), l.Backend(), cores[i], b)
			}
			var got []int
			var err error
			pctest.OnLoop(t, l, func() { got, err = cpu.Thread() })
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, []int{l.CPU()}) {
				t.Fatalf("loop %d thread affinity %v, want [%d]", i, got, l.CPU())
			}
		}
	})
}

func TestCoreOutsideAffinityFails(t *testing.T) {
	_, err := percore.New(percore.Config{Cores: []int{4095}, Logger: pctest.QuietLogger(t)}, nil)
	if !errors.Is(err, cpu.ErrNotAllowed) {
		t.Fatalf("New on cpu 4095: %v, want cpu.ErrNotAllowed", err)
	}
}

func TestAutoFallsBackToEpoll(t *testing.T) {
	// A host whose seccomp filter refuses io_uring_setup, through ring's
	// own hook (the runtime has none of its own).
	restore := ring.SetOpenHook(func() error { return syscall.EPERM })
	t.Cleanup(restore)

	logger, logs := pctest.LogInbox()
	rt := start(t, percore.Config{Cores: allCores(t), Logger: logger}, echoHandler{})
	if p := rt.Report(); p.Backend != percore.Epoll || !strings.Contains(p.Reason, "EPERM") && !strings.Contains(p.Reason, "operation not permitted") {
		t.Fatalf("probe %+v, want epoll with the EPERM reason", p)
	}
	for _, l := range rt.Loops() {
		if l.Backend() != percore.Epoll {
			t.Fatalf("loop %d runs %v", l.ID(), l.Backend())
		}
	}
	if n := countMessages(logs.Drain(), "io_uring unavailable"); n != 1 {
		t.Fatalf("fallback logged %d times, want once", n)
	}
	got, err := roundTrip(dial(t, rt), []byte("works"))
	if err != nil || string(got) != "works" {
		t.Fatalf("echo over the fallback: %q %v", got, err)
	}

	_, err = percore.New(percore.Config{Backend: percore.IOURing, Addr: "127.0.0.1:0", Logger: logger}, echoHandler{})
	if !errors.Is(err, ring.ErrUnavailable) || !errors.Is(err, syscall.EPERM) {
		t.Fatalf("explicit IOURing: %v, want the unavailable error", err)
	}
}

// dialResult is what a loop's Dial reported.
type dialResult struct {
	c   *percore.Conn
	err error
}

// collector gathers what a dialed connection receives.
type collector struct {
	got    *pctest.Inbox[[]byte]
	closed *pctest.Inbox[error]
}

func (h *collector) OnData(c *percore.Conn, data []byte) { h.got.Put(bytes.Clone(data)) }
func (h *collector) OnClose(c *percore.Conn, err error)  { h.closed.Put(err) }

func TestDial(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		server := start(t, percore.Config{Backend: b}, echoHandler{})
		client := start(t, percore.Config{Backend: b}, nil)
		l := client.Loops()[0]

		h := &collector{got: pctest.NewInbox[[]byte](), closed: pctest.NewInbox[error]()}
		res := make(chan dialResult, 1)
		pctest.OnLoop(t, l, func() {
			err := l.Dial(server.Addr().String(), h, func(c *percore.Conn, err error) {
				if err == nil {
					c.Write([]byte("hello over dial"))
				}
				res <- dialResult{c, err}
			})
			if err != nil {
				res <- dialResult{nil, err}
			}
		})
		r := pctest.Recv(t, res, "dial result")
		if r.err != nil {
			t.Fatalf("dial: %v", r.err)
		}
		var got []byte
		for len(got) < len("hello over dial") {
			got = append(got, h.got.Next(t, "data on the dialed connection")...)
		}
		if string(got) != "hello over dial" {
			t.Fatalf("got %q", got)
		}
		pctest.OnLoop(t, l, func() { r.c.Close() })
		if err := h.closed.Next(t, "OnClose"); err != nil {
			t.Fatalf("close: %v", err)
		}

		// A refused dial is reported, not hung.
		refused := pctest.DeadAddr(t)
		pctest.OnLoop(t, l, func() {
			if err := l.Dial(refused, h, func(c *percore.Conn, err error) { res <- dialResult{c, err} }); err != nil {
				res <- dialResult{nil, err}
			}
		})
		if r := pctest.Recv(t, res, "end of the refused dial"); r.c != nil || !errors.Is(r.err, syscall.ECONNREFUSED) {
			t.Fatalf("refused dial: %v, %v; want ECONNREFUSED", r.c, r.err)
		}

		// An address the loop cannot use fails at once.
		pctest.OnLoop(t, l, func() {
			if err := l.Dial("localhost:80", h, func(*percore.Conn, error) {}); err == nil {
				t.Error("dial of a host name: no error (the loop must not resolve names)")
			}
		})
	})
}

func TestCloseReleasesEverything(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt, err := percore.New(percore.Config{Backend: b, Addr: "127.0.0.1:0", Cores: allCores(t), Logger: pctest.QuietLogger(t)}, echoHandler{})
		if err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		for range 20 {
			c := dial(t, rt)
			if _, err := roundTrip(c, []byte("x")); err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		if err := rt.Close(); err != nil {
			t.Fatal(err)
		}
		if err := rt.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		for _, c := range conns {
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatal("connection still open after Close")
			}
		}
		if _, err := net.DialTimeout("tcp", rt.Addr().String(), time.Second); err == nil {
			t.Fatal("listener still accepting after Close")
		}
		if err := rt.Loops()[0].Post(func() {}); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Post after Close: %v, want net.ErrClosed", err)
		}
	})
}

// TestWaitBatch runs echo traffic with batched waits: a lone request must
// still be answered (after at most WaitMin more), and many must be.
func TestWaitBatch(t *testing.T) {
	pctest.NeedURing(t)
	rt, err := percore.New(percore.Config{Backend: percore.IOURing, WaitBatch: 16, WaitMin: 50 * time.Microsecond,
		Addr: "127.0.0.1:0", Cores: allCores(t)[:1], Logger: pctest.QuietLogger(t)}, echoHandler{})
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("batched waits unavailable here (IORING_FEAT_MIN_TIMEOUT, 6.12+): %v", err)
	}
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	c := dial(t, rt)
	for i := range 100 {
		msg := []byte{byte(i)}
		if got, err := roundTrip(c, msg); err != nil || got[0] != msg[0] {
			t.Fatalf("round trip %d: %v %v", i, got, err)
		}
	}
	// Epoll has no batched wait and ignores the setting.
	rt2 := start(t, percore.Config{Backend: percore.Epoll, WaitBatch: 16}, echoHandler{})
	if _, err := roundTrip(dial(t, rt2), []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// TestCQOverflowLosesNothing holds a loop with a tiny completion queue
// (32 entries) while 100 clients send, so that releasing it posts far more
// completions than the queue holds: every echo must still arrive, and the
// overflow is counted.
func TestCQOverflowLosesNothing(t *testing.T) {
	const clients = 100
	rt := start(t, percore.Config{Backend: percore.IOURing, RingEntries: 8}, echoHandler{})
	conns := make([]net.Conn, clients)
	for i := range conns {
		conns[i] = dial(t, rt)
	}
	pctest.WaitFor(t, "every connection open", func() bool { return rt.Stats().Open == clients })
	release := pctest.HoldLoop(t, rt.Loops()[0])
	for i, c := range conns {
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	release()
	for i, c := range conns {
		got := make([]byte, 1)
		if _, err := io.ReadFull(c, got); err != nil || got[0] != byte(i) {
			t.Fatalf("client %d: %v %v", i, got, err)
		}
	}
	pctest.WaitFor(t, "the overflow counted", func() bool { return rt.Stats().CQOverflows > 0 })
}

// TestLoopsFollowGOMAXPROCS: by default no more loops start than there are
// Ps (GOMAXPROCS also follows a cgroup CPU quota, which the affinity mask
// does not show), and explicit Cores beyond it start with a warning.
func TestLoopsFollowGOMAXPROCS(t *testing.T) {
	cores := allCores(t)
	if len(cores) < 2 {
		t.Skip("needs two CPUs in the affinity mask to be above GOMAXPROCS=1")
	}
	old := goruntime.GOMAXPROCS(1)
	defer func() {
		// Setting GOMAXPROCS stops Go from following the CPU quota;
		// give the default back where it was the default.
		if os.Getenv("GOMAXPROCS") == "" && old == goruntime.NumCPU() {
			goruntime.SetDefaultGOMAXPROCS()
		} else {
			goruntime.GOMAXPROCS(old)
		}
	}()
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		logger, logs := pctest.LogInbox()
		// Empty, not nil: start's nil means "the first CPU".
		rt := start(t, percore.Config{Backend: b, Cores: []int{}, Logger: logger}, echoHandler{})
		if n := len(rt.Loops()); n != 1 {
			t.Fatalf("%d loops at GOMAXPROCS=1, want 1", n)
		}
		if cpus := rt.Report().CPUs; !slices.Equal(cpus, cores[:1]) {
			t.Fatalf("loop on cpus %v, want the first of the mask, %v", cpus, cores[:1])
		}
		if n := countMessages(logs.Drain(), "one loop per P"); n != 1 {
			t.Fatalf("%d notes that the loops were capped, want 1", n)
		}
		if _, err := roundTrip(dial(t, rt), []byte("x")); err != nil {
			t.Fatal(err)
		}

		rt2 := start(t, percore.Config{Backend: b, Cores: cores, Logger: logger}, echoHandler{})
		if n := len(rt2.Loops()); n != len(cores) {
			t.Fatalf("%d loops for %d explicit cores", n, len(cores))
		}
		if n := countMessages(logs.Drain(), "more loops than GOMAXPROCS"); n != 1 {
			t.Fatalf("%d warnings about more loops than GOMAXPROCS, want 1", n)
		}
	})
}

func countMessages(records []slog.Record, s string) int {
	n := 0
	for _, r := range records {
		if strings.Contains(r.Message, s) {
			n++
		}
	}
	return n
}
