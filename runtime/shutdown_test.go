package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// graceful starts a request on any data and leaves it to the test to
// finish (on the loop), and says goodbye at shutdown. It reports each
// close with the client's address: a test that probes the listener opens
// connections of its own.
type graceful struct {
	started *pctest.Inbox[*percore.Conn]
	closed  *pctest.Inbox[closeReport]
}

type closeReport struct {
	client string
	err    error
}

func newGraceful() *graceful {
	return &graceful{started: pctest.NewInbox[*percore.Conn](), closed: pctest.NewInbox[closeReport]()}
}

// closeOf waits for the close of the connection from client.
func (g *graceful) closeOf(t *testing.T, client net.Conn) error {
	t.Helper()
	for {
		if r := g.closed.Next(t, "OnClose of "+client.LocalAddr().String()); r.client == client.LocalAddr().String() {
			return r.err
		}
	}
}

func (g *graceful) OnData(c *percore.Conn, data []byte) {
	c.BeginRequest()
	g.started.Put(c)
}

func (g *graceful) OnShutdown(c *percore.Conn) { c.Write([]byte("goodbye;")) }

// OnOpen keeps the client's address: by OnClose the descriptor is gone.
func (g *graceful) OnOpen(c *percore.Conn) { c.SetValue(fmt.Sprint(c.RemoteAddr())) }

func (g *graceful) OnClose(c *percore.Conn, err error) {
	g.closed.Put(closeReport{c.Value().(string), err})
}

// readN reads exactly n bytes from c.
func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: got %q, %v", n, b, err)
	}
	return string(b)
}

func TestGracefulShutdown(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		g := newGraceful()
		rt := start(t, percore.Config{Backend: b}, g)
		busy, idle := dial(t, rt), dial(t, rt)
		if _, err := busy.Write([]byte("request")); err != nil {
			t.Fatal(err)
		}
		inFlight := g.started.Next(t, "request")
		done := make(chan error, 1)
		go func() { done <- rt.Shutdown(shutdownCtx(t, 10*time.Second)) }()

		// New clients are refused once the listener is closed.
		pctest.WaitFor(t, "new connections refused", func() bool {
			c, err := net.DialTimeout("tcp", rt.Addr().String(), time.Second)
			if err == nil {
				c.Close()
				return false
			}
			return errors.Is(err, syscall.ECONNREFUSED)
		})
		// The idle client hears goodbye and is closed; the busy one hears
		// goodbye and stays open while its request is in flight.
		if got, err := io.ReadAll(idle); err != nil || string(got) != "goodbye;" {
			t.Fatalf("idle client read %q, %v", got, err)
		}
		if got := readN(t, busy, len("goodbye;")); got != "goodbye;" {
			t.Fatalf("busy client read %q, want goodbye", got)
		}
		// The request finishes: its reply goes out, then the close.
		pctest.OnLoop(t, inFlight.Loop(), func() {
			inFlight.Write([]byte("done;"))
			inFlight.EndRequest()
		})
		if got, err := io.ReadAll(busy); err != nil || string(got) != "done;" {
			t.Fatalf("busy client read %q, %v after goodbye, want the reply and the close", got, err)
		}
		if err := pctest.Recv(t, done, "return from Shutdown"); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		for _, c := range []net.Conn{idle, busy} {
			if err := g.closeOf(t, c); err != nil {
				t.Fatalf("graceful close of %s reported %v", c.LocalAddr(), err)
			}
		}
	})
}

// TestShutdownDeadline ends Shutdown's context with a request still in
// flight (the test cancels it once goodbye has arrived, rather than race a
// timer): what is left is closed with ErrShutdown.
func TestShutdownDeadline(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		g := newGraceful()
		rt := start(t, percore.Config{Backend: b}, g)
		stuck := dial(t, rt)
		if _, err := stuck.Write([]byte("never finished")); err != nil {
			t.Fatal(err)
		}
		g.started.Next(t, "request")
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() { done <- rt.Shutdown(ctx) }()
		if got := readN(t, stuck, len("goodbye;")); got != "goodbye;" {
			t.Fatalf("stuck client read %q, want goodbye", got)
		}
		cancel()
		if err := pctest.Recv(t, done, "return from Shutdown"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Shutdown: %v, want its context's error", err)
		}
		if got, err := io.ReadAll(stuck); err != nil || len(got) != 0 {
			t.Fatalf("stuck client read %q, %v after goodbye, want the close", got, err)
		}
		if err := g.closeOf(t, stuck); !errors.Is(err, percore.ErrShutdown) {
			t.Fatalf("OnClose: %v, want ErrShutdown", err)
		}
	})
}

// panicky panics on "boom" and echoes anything else.
type panicky struct{ closed *pctest.Inbox[error] }

func (p *panicky) OnData(c *percore.Conn, data []byte) {
	if string(data) == "boom" {
		panic("handler bug")
	}
	c.Write(data)
}

func (p *panicky) OnClose(c *percore.Conn, err error) { p.closed.Put(err) }

func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := &panicky{closed: pctest.NewInbox[error]()}
		rt := start(t, percore.Config{Backend: b, Logger: discard}, p)
		good, bad := dial(t, rt), dial(t, rt)
		if _, err := roundTrip(good, []byte("before")); err != nil {
			t.Fatal(err)
		}
		if _, err := bad.Write([]byte("boom")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(bad); err != nil {
			t.Fatalf("panicking connection: %v", err)
		}
		if err := p.closed.Next(t, "OnClose"); !errors.Is(err, percore.ErrHandlerPanic) {
			t.Fatalf("OnClose: %v, want ErrHandlerPanic", err)
		}
		if got, err := roundTrip(good, []byte("after")); err != nil || string(got) != "after" {
			t.Fatalf("the other connection after the panic: %q %v", got, err)
		}
		pctest.WaitFor(t, "the panic counted", func() bool { return rt.Stats().Panics == 1 })
	})
}

// TestPanicInLoopCallbacks panics in a timer, a dial's done function and an
// OnStop function: each is recovered and counted, and the loop goes on.
func TestPanicInLoopCallbacks(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b}, echoHandler{})
		l := rt.Loops()[0]
		fired := make(chan struct{})
		pctest.OnLoop(t, l, func() {
			l.AfterFunc(0, func() { close(fired); panic("timer") })
			if err := l.Dial(pctest.DeadAddr(t), echoHandler{}, func(*percore.Conn, error) { panic("dial done") }); err != nil {
				t.Errorf("dial: %v", err)
			}
			l.OnStop(func() { panic("on stop") })
		})
		pctest.Recv(t, fired, "timer")
		pctest.WaitFor(t, "two panics counted", func() bool { return rt.Stats().Panics == 2 })
		if got, err := roundTrip(dial(t, rt), []byte("still serving")); err != nil || string(got) != "still serving" {
			t.Fatalf("after the panics: %q %v", got, err)
		}
		// A failed dial never opened: it is counted neither as a dial
		// nor as a close.
		if st := rt.Stats(); st.Dials != 0 || st.Closes != 0 {
			t.Fatalf("stats %+v: a failed dial was counted", st)
		}
		rt.Close()
		if st := rt.Stats(); st.Panics != 3 {
			t.Fatalf("after Close, %d panics counted, want 3 (the OnStop one too)", st.Panics)
		}
	})
}

// TestStopNamesHeldLoops holds every loop's thread (a posted function that
// waits, as a handler stuck in a call would), then stops the runtime:
// Shutdown and Close each keep waiting, and name every loop they wait for,
// until the loops are let go.
func TestStopNamesHeldLoops(t *testing.T) {
	t.Cleanup(percore.SetStopWarnEvery(20 * time.Millisecond))
	for _, stop := range []struct {
		name, warning string
		do            func(rt *percore.Runtime) error
	}{
		{"Shutdown", "shutdown still waiting for loop", func(rt *percore.Runtime) error { return rt.Shutdown(context.Background()) }},
		{"Close", "loop has not stopped", func(rt *percore.Runtime) error { return rt.Close() }},
	} {
		t.Run(stop.name, func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				logger, logs := pctest.LogInbox()
				rt := start(t, percore.Config{Backend: b, Cores: allCores(t), Logger: logger}, echoHandler{})
				var releases []func()
				for _, l := range rt.Loops() {
					releases = append(releases, pctest.HoldLoop(t, l))
				}
				stopped := make(chan error, 1)
				go func() { stopped <- stop.do(rt) }()
				named := map[int64]bool{}
				deadline := time.Now().Add(10 * time.Second)
				for len(named) < len(rt.Loops()) {
					if time.Now().After(deadline) {
						t.Fatalf("warnings named loops %v of %d in 10s", named, len(rt.Loops()))
					}
					r := logs.Next(t, "warning naming every held loop")
					if !strings.Contains(r.Message, stop.warning) {
						continue
					}
					r.Attrs(func(a slog.Attr) bool {
						if a.Key == "loop" {
							named[a.Value.Int64()] = true
						}
						return true
					})
				}
				for _, release := range releases {
					release()
				}
				if err := pctest.Recv(t, stopped, stop.name+" return once the loops were let go"); err != nil {
					t.Fatalf("%s: %v", stop.name, err)
				}
			})
		})
	}
}
