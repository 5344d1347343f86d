package httpd_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// whoServer answers every request with its name.
func whoServer(name string) *httpd.Server {
	return httpd.New(httpd.Config{}, httpd.HandlerFunc(func(w *httpd.Response, r *httpd.Request) {
		w.Write([]byte(name))
	}))
}

// A restart's hand-over: an idle keep-alive connection moves to the new
// process at once; one with half a request head waits, is answered by the
// old process once the head is whole (keep-alive, not Connection: close),
// and then moves. The next request of each is answered by the new process.
func TestHandoverKeepAlive(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		old := pctest.Start(t, percore.Config{Backend: b}, whoServer("A").Handler())
		idle, partial := pctest.Dial(t, old.Addr().String()), pctest.Dial(t, old.Addr().String())
		ri, rp := bufio.NewReader(idle), bufio.NewReader(partial)
		get := func(c io.Writer, rd *bufio.Reader, want string) {
			t.Helper()
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			expectBody(t, rd, want)
		}
		get(idle, ri, "A")
		get(partial, rp, "A")

		files, err := old.ListenerFiles()
		if err != nil {
			t.Fatal(err)
		}
		next := pctest.Start(t, percore.Config{Backend: b, Inherited: files}, whoServer("B").Handler())
		for _, f := range files {
			f.Close()
		}
		oldEnd, nextEnd, err := percore.HandoverSockets()
		if err != nil {
			t.Fatal(err)
		}
		defer oldEnd.Close()
		defer nextEnd.Close()
		if err := next.Adopt(nextEnd); err != nil {
			t.Fatal(err)
		}
		partial.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n"))
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done <- old.HandOver(ctx, oldEnd)
		}()
		pctest.WaitFor(t, "the idle connection handed over", func() bool { return old.Stats().HandedOff == 1 })
		partial.Write([]byte("\r\n"))
		expectBody(t, rp, "A")
		if err := pctest.Recv(t, done, "the hand-over"); err != nil {
			t.Fatal(err)
		}
		get(idle, ri, "B")
		get(partial, rp, "B")
		if st := old.Stats(); st.HandedOff != 2 || st.HandoffDeclined != 0 {
			t.Fatalf("handed %d, declined %d", st.HandedOff, st.HandoffDeclined)
		}
	})
}

// expectBody reads one response and checks its body, and that it keeps the
// connection.
func expectBody(t *testing.T, rd *bufio.Reader, body string) {
	t.Helper()
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != body || resp.Close {
		t.Fatalf("response %q, %v, close %v; want %q kept alive", got, err, resp.Close, body)
	}
}

// tagged is an upgraded protocol for the hand-over test: each input is
// echoed behind its name and what it was adopted with.
type tagged struct{ name, state string }

func (u *tagged) OnView(c *percore.Conn, in []byte) (int, error) {
	if len(in) == 0 {
		return 0, nil
	}
	c.Write([]byte(u.name + u.state + ":" + string(in)))
	return len(in), nil
}

func (u *tagged) OnHandover(c *percore.Conn) ([]byte, error) {
	if u.state == "decline" {
		return nil, percore.ErrHandoverDeclined
	}
	return []byte("+" + u.name), nil
}

func upgradeServer(name string, adopt bool) *httpd.Server {
	cfg := httpd.Config{}
	if adopt {
		cfg.AdoptUpgraded = func(c *percore.Conn, state []byte) (httpd.UpgradeHandler, error) {
			return &tagged{name: name, state: string(state)}, nil
		}
	}
	return httpd.New(cfg, httpd.HandlerFunc(func(w *httpd.Response, r *httpd.Request) {
		u := &tagged{name: name}
		if q, _ := r.Query("decline"); len(q) > 0 {
			u.state = "decline"
		}
		w.WriteHeader(101)
		w.AddHeader("Upgrade", "tagged")
		w.AddHeader("Connection", "Upgrade")
		w.Upgrade(u)
	}))
}

// An upgraded connection moves with its handler's state behind httpd's
// tag, and is made again by Config.AdoptUpgraded: one that spoke after its
// upgrade and one that did not both; one whose handler declines stays and
// gets its OnShutdown; to a server without AdoptUpgraded, upgraded ones
// are closed.
func TestHandoverUpgraded(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, adopt := range []bool{true, false} {
			old := pctest.Start(t, percore.Config{Backend: b}, upgradeServer("A", true).Handler())
			up := func(q string) (io.ReadWriter, *bufio.Reader) {
				c := pctest.Dial(t, old.Addr().String())
				c.Write([]byte("GET /?" + q + " HTTP/1.1\r\nHost: x\r\nUpgrade: tagged\r\nConnection: Upgrade\r\n\r\n"))
				rd := bufio.NewReader(c)
				resp, err := http.ReadResponse(rd, nil)
				if err != nil || resp.StatusCode != 101 {
					t.Fatalf("upgrade: %v %v", resp, err)
				}
				return c, rd
			}
			echo := func(c io.ReadWriter, rd *bufio.Reader, send, want string) {
				t.Helper()
				c.Write([]byte(send))
				got := make([]byte, len(want))
				if _, err := io.ReadFull(rd, got); err != nil || string(got) != want {
					t.Fatalf("got %q, %v; want %q", got, err, want)
				}
			}
			spoke, rs := up("")
			echo(spoke, rs, "x", "A:x")
			silent, rq := up("")
			declined, rd := up("decline=1")

			files, err := old.ListenerFiles()
			if err != nil {
				t.Fatal(err)
			}
			next := pctest.Start(t, percore.Config{Backend: b, Inherited: files}, upgradeServer("B", adopt).Handler())
			for _, f := range files {
				f.Close()
			}
			oldEnd, nextEnd, err := percore.HandoverSockets()
			if err != nil {
				t.Fatal(err)
			}
			if err := next.Adopt(nextEnd); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			done := make(chan error, 1)
			go func() { done <- old.HandOver(ctx, oldEnd) }()
			// The declined one is closed once idle, as at a shutdown.
			if _, err := rd.ReadByte(); err != io.EOF {
				t.Fatalf("declined: %v, want EOF", err)
			}
			_ = declined
			if err := pctest.Recv(t, done, "the hand-over"); err != nil {
				t.Fatal(err)
			}
			cancel()
			oldEnd.Close()
			nextEnd.Close()
			if st := old.Stats(); st.HandedOff != 2 || st.HandoffDeclined != 1 {
				t.Fatalf("adopt %v: handed %d, declined %d", adopt, st.HandedOff, st.HandoffDeclined)
			}
			if adopt {
				echo(spoke, rs, "y", "B+A:y")
				echo(silent, rq, "z", "B+A:z")
				continue
			}
			for _, r := range []*bufio.Reader{rs, rq} {
				if _, err := r.ReadByte(); err == nil {
					t.Fatal("an upgraded connection to a server without AdoptUpgraded was served")
				}
			}
		}
	})
}
