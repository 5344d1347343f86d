package runtime_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// shortDir returns a temporary directory with a short path: a Unix socket
// path holds 107 bytes, and TMPDIR may be long.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "pc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// dialUnix connects to the Unix socket at path with deadlines.
func dialUnix(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c.(*net.UnixConn)
}

func echoOnce(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	got, err := roundTrip(c, []byte(msg))
	if err != nil || string(got) != msg {
		t.Fatalf("echo %q: got %q, %v", msg, got, err)
	}
}

func startUnix(t *testing.T, b percore.Backend, path string, cfg percore.Config, h percore.Handler) *percore.Runtime {
	t.Helper()
	cfg.Backend = b
	cfg.Listen = append(cfg.Listen, "unix://"+path)
	return start(t, cfg, h)
}

func TestUnixEcho(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		path := filepath.Join(shortDir(t), "echo.sock")
		rt := startUnix(t, b, path, percore.Config{}, echoHandler{})
		ln := rt.Listeners()[0]
		if ln.Network != "unix" || !ln.Shared || ln.Addr.String() != path {
			t.Fatalf("listener %+v", ln)
		}
		c := dialUnix(t, path)
		echoOnce(t, c, "hello over a unix socket")
		// 1 MiB each way, concurrently.
		p := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
		got, err := roundTrip(c, p)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("1 MiB echo: %v", err)
		}
	})
}

// A stale socket file (its server gone) is removed and served; a live one
// is refused with a clear error and left alone.
func TestUnixStaleSocket(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		dir := shortDir(t)
		stale := filepath.Join(dir, "stale.sock")
		old, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		old.SetUnlinkOnClose(false)
		old.Close()
		if _, err := os.Stat(stale); err != nil {
			t.Fatalf("the stale file is not there: %v", err)
		}
		startUnix(t, b, stale, percore.Config{}, echoHandler{})
		echoOnce(t, dialUnix(t, stale), "served after the stale file")

		live := filepath.Join(dir, "live.sock")
		other, err := net.Listen("unix", live)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		_, err = percore.New(percore.Config{Backend: b, Cores: allCores(t)[:1], Logger: discard,
			Listen: []string{"unix://" + live}}, echoHandler{})
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), "another socket is bound") {
			t.Fatalf("New on a live socket: %v; want EADDRINUSE naming the other socket", err)
		}
		// Nothing removed: the other server still answers.
		go func() {
			// The first connection may be the probe that found the
			// socket live: answer every one.
			for {
				c, err := other.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("still here"))
				c.Close()
			}
		}()
		c := dialUnix(t, live)
		got, _ := io.ReadAll(c)
		if string(got) != "still here" {
			t.Fatalf("the other server: %q", got)
		}
	})
}

func TestUnixAbstract(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		name := fmt.Sprintf("@percore-test-%d-%d", os.Getpid(), time.Now().UnixNano())
		rt := startUnix(t, b, name, percore.Config{}, echoHandler{})
		if got := rt.Listeners()[0].Addr.String(); got != name {
			t.Fatalf("address %q, want %q", got, name)
		}
		echoOnce(t, dialUnix(t, name), "abstract")
	})
}

func TestUnixMode(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, mode := range []os.FileMode{0o600, 0o660} {
			path := filepath.Join(shortDir(t), "mode.sock")
			rt := startUnix(t, b, path, percore.Config{UnixMode: mode}, echoHandler{})
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != mode || fi.Mode().Type() != os.ModeSocket {
				t.Fatalf("socket file mode %v, want %v", fi.Mode(), mode)
			}
			rt.Close()
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the socket file is left after Close: %v", err)
			}
		}
	})
}

// halfClose answers "bye" when the peer shuts its write side down.
type halfClose struct{ echoHandler }

func (halfClose) OnEOF(c *percore.Conn) {
	c.Write([]byte("bye"))
	c.Close()
}

// The TCP conformance on a Unix socket: half-close, a reset while the loop
// writes, 300 connections, limits (a cap), and stats.
func TestUnixConformance(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		t.Run("half-close", func(t *testing.T) {
			path := filepath.Join(shortDir(t), "h.sock")
			startUnix(t, b, path, percore.Config{}, halfClose{})
			c := dialUnix(t, path)
			echoOnce(t, c, "ping")
			if err := c.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil || string(got) != "bye" {
				t.Fatalf("after CloseWrite: %q, %v", got, err)
			}
		})
		t.Run("reset mid-write", func(t *testing.T) {
			path := filepath.Join(shortDir(t), "r.sock")
			rt := startUnix(t, b, path, percore.Config{}, echoHandler{})
			c := dialUnix(t, path)
			// Write far more than the socket buffers hold without
			// reading the echo, then close: the loop's writes fail.
			p := make([]byte, 256<<10)
			for range 8 {
				if _, err := c.Write(p); err != nil {
					break
				}
				if rt.Stats().Paused > 0 {
					break
				}
			}
			c.Close()
			pctest.WaitFor(t, "the connection closed", func() bool { return rt.Stats().Closes == 1 })
			echoOnce(t, dialUnix(t, path), "still serving")
		})
		t.Run("300 connections", func(t *testing.T) {
			path := filepath.Join(shortDir(t), "m.sock")
			rt := startUnix(t, b, path, percore.Config{}, echoHandler{})
			conns := make([]*net.UnixConn, 300)
			for i := range conns {
				conns[i] = dialUnix(t, path)
			}
			for i, c := range conns {
				echoOnce(t, c, fmt.Sprintf("conn %d", i))
			}
			if s := rt.Stats(); s.Accepts != 300 || s.Open != 300 {
				t.Fatalf("accepts %d, open %d; want 300", s.Accepts, s.Open)
			}
		})
		t.Run("cap", func(t *testing.T) {
			path := filepath.Join(shortDir(t), "c.sock")
			rt := startUnix(t, b, path, percore.Config{MaxConns: 1}, echoHandler{})
			first := dialUnix(t, path)
			echoOnce(t, first, "first")
			second := dialUnix(t, path) // waits in the backlog
			if _, err := second.Write([]byte("second")); err != nil {
				t.Fatal(err)
			}
			pctest.WaitFor(t, "the cap's hold", func() bool { return rt.Stats().CapHolds == 1 })
			first.Close()
			buf := make([]byte, 6)
			if _, err := io.ReadFull(second, buf); err != nil || string(buf) != "second" {
				t.Fatalf("after the first closed: %q, %v", buf, err)
			}
		})
		t.Run("idle timeout", func(t *testing.T) {
			path := filepath.Join(shortDir(t), "i.sock")
			rt := startUnix(t, b, path, percore.Config{IdleTimeout: 50 * time.Millisecond}, echoHandler{})
			c := dialUnix(t, path)
			if _, err := io.ReadAll(c); err != nil {
				t.Fatalf("read until the idle close: %v", err)
			}
			pctest.WaitFor(t, "the idle timeout counted", func() bool { return rt.Stats().IdleTimeouts == 1 })
		})
	})
}

// Loop.Dial reaches a Unix socket, by path and by abstract name.
func TestDialUnix(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, name := range []string{filepath.Join(shortDir(t), "up.sock"), fmt.Sprintf("@percore-dial-%d", time.Now().UnixNano())} {
			up, err := net.Listen("unix", name)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				c, err := up.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				io.Copy(c, c)
			}()
			rt := start(t, percore.Config{Backend: b}, nil)
			got := make(chan string, 1)
			h := percore.HandlerFunc(func(c *percore.Conn, data []byte) {
				got <- string(data)
				c.Close()
			})
			pctest.OnLoop(t, rt.Loops()[0], func() {
				err := rt.Loops()[0].Dial("unix://"+name, h, func(c *percore.Conn, err error) {
					if err != nil {
						got <- "dial: " + err.Error()
						return
					}
					if c.Listener() != nil || c.RemoteAddr().String() != name {
						got <- fmt.Sprintf("dialed conn: listener %v, remote %v", c.Listener(), c.RemoteAddr())
						return
					}
					c.Write([]byte("via unix"))
				})
				if err != nil {
					got <- "dial: " + err.Error()
				}
			})
			if s := pctest.Recv(t, got, "the echo"); s != "via unix" {
				t.Fatalf("%s: %s", name, s)
			}
			up.Close()
			rt.Close()
		}
		rt := start(t, percore.Config{Backend: b}, nil)
		pctest.OnLoop(t, rt.Loops()[0], func() {
			if err := rt.Loops()[0].Dial("unix://"+strings.Repeat("x", 200), echoHandler{}, func(*percore.Conn, error) {}); err == nil {
				t.Error("Dial to a path longer than sun_path succeeded")
			}
			if err := rt.Loops()[0].Dial("sctp://1.2.3.4:5", echoHandler{}, func(*percore.Conn, error) {}); err == nil {
				t.Error("Dial to an unknown network succeeded")
			}
		})
	})
}

// listenerTag answers every connection with the index of its listener.
type listenerTag struct{}

func (listenerTag) OnData(c *percore.Conn, data []byte) {
	fmt.Fprintf(writerOf{c}, "%d:%s", c.Listener().Index, data)
}

func (listenerTag) OnPacket(p *percore.PacketConn, data []byte, from netip.AddrPort) {
	_ = p.WriteTo(fmt.Appendf(nil, "%d:%s", p.Listener().Index, data), from)
}

type writerOf struct{ c *percore.Conn }

func (w writerOf) Write(p []byte) (int, error) { return w.c.Write(p) }

// One runtime on TCP (twice), UDP and Unix at once: each connection or
// datagram reaches its handler with its own listener; Shutdown closes
// every listener first.
func TestSeveralListeners(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		path := filepath.Join(shortDir(t), "multi.sock")
		held := make(chan *percore.Conn, 1)
		h := &holdFirst{held: held}
		rt := start(t, percore.Config{Backend: b, Addr: "127.0.0.1:0", Cores: allCores(t),
			Listen:        []string{"tcp4://127.0.0.1:0", "udp://127.0.0.1:0", "unix://" + path},
			PacketHandler: listenerTag{}}, h)
		lns := rt.Listeners()
		if len(lns) != 4 || lns[0].Network != "tcp" || lns[1].Network != "tcp4" || lns[2].Network != "udp" || lns[3].Network != "unix" {
			t.Fatalf("listeners %v", lns)
		}
		if rt.Addr() != lns[0].Addr {
			t.Fatalf("Addr %v, want the first listener's %v", rt.Addr(), lns[0].Addr)
		}
		for i, ln := range lns {
			if ln.Index != i {
				t.Fatalf("listener %d has index %d", i, ln.Index)
			}
		}
		// The first connection is held open (a request in flight), so
		// that Shutdown waits while the test checks the listeners.
		keep := pctest.Dial(t, lns[0].Addr.String())
		keep.Write([]byte("hold"))
		hc := pctest.Recv(t, held, "the held connection")
		_ = hc
		for _, i := range []int{0, 1} {
			c := pctest.Dial(t, lns[i].Addr.String())
			echoTag(t, c, i)
		}
		echoTag(t, dialUnix(t, path), 3)
		u, err := net.DialUDP("udp", nil, lns[2].Addr.(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		_ = u.SetDeadline(time.Now().Add(20 * time.Second))
		echoTag(t, u, 2)

		shut := make(chan error, 1)
		go func() { shut <- rt.Shutdown(shutdownCtx(t, 20*time.Second)) }()
		pctest.WaitFor(t, "every stream listener closed", func() bool {
			for _, a := range []string{lns[0].Addr.String(), lns[1].Addr.String()} {
				if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
					c.Close()
					return false
				}
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				return false
			}
			return true
		})
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned (%v) with a request in flight", err)
		default:
		}
		pctest.OnLoop(t, hc.Loop(), func() { hc.EndRequest() })
		if err := pctest.Recv(t, shut, "Shutdown"); err != nil {
			t.Fatal(err)
		}
	})
}

// holdFirst begins a request on the first connection's first data and
// hands the connection over; it tags every other one.
type holdFirst struct {
	listenerTag
	once sync.Once
	held chan *percore.Conn
}

func (h *holdFirst) OnData(c *percore.Conn, data []byte) {
	if string(data) == "hold" {
		h.once.Do(func() {
			c.BeginRequest()
			h.held <- c
		})
		return
	}
	h.listenerTag.OnData(c, data)
}

func echoTag(t *testing.T, c net.Conn, index int) {
	t.Helper()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if want := fmt.Sprintf("%d:x", index); err != nil || string(buf[:n]) != want {
		t.Fatalf("reply %q, %v; want %q", buf[:n], err, want)
	}
}

// Bad listen addresses are clear errors from New.
func TestListenAddrErrors(t *testing.T) {
	for _, a := range []string{"sctp://1.2.3.4:5", "udp://", "unix://", "tcp://no-port"} {
		_, err := percore.New(percore.Config{Listen: []string{a}, Cores: allCores(t)[:1], Logger: discard,
			PacketHandler: packetEcho{}}, echoHandler{})
		if err == nil {
			t.Errorf("New with %q succeeded", a)
		}
	}
	for _, c := range []struct{ in, network, address string }{
		{"127.0.0.1:1", "tcp", "127.0.0.1:1"},
		{"udp6://[::1]:53", "udp6", "[::1]:53"},
		{"unix:///run/x.sock", "unix", "/run/x.sock"},
		{"unix://@name", "unix", "@name"},
	} {
		n, a, err := percore.ParseListenAddr(c.in)
		if err != nil || n != c.network || a != c.address {
			t.Errorf("ParseListenAddr(%q) = %q, %q, %v", c.in, n, a, err)
		}
	}
}

// The connections of a burst on one Unix socket shared by every loop all
// reach a loop and are served; the test logs how they spread.
func TestUnixBurstSpread(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		path := filepath.Join(shortDir(t), "burst.sock")
		rt := startUnix(t, b, path, percore.Config{Cores: allCores(t)}, echoHandler{})
		const n = 200
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("unix", path, 5*time.Second)
				if err != nil {
					failed.Add(1)
					return
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				msg := []byte(fmt.Sprint(i))
				if got, err := roundTrip(c, msg); err != nil || !bytes.Equal(got, msg) {
					failed.Add(1)
				}
			}()
		}
		wg.Wait()
		if failed.Load() != 0 {
			t.Fatalf("%d of %d connections failed", failed.Load(), n)
		}
		var spread []uint64
		for _, l := range rt.Loops() {
			spread = append(spread, l.Stats().Accepts)
		}
		t.Logf("accepts per loop: %v", spread)
	})
}
