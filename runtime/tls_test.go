package runtime_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/tlsconn"
)

// tlsEcho echoes plaintext and records what its connections saw.
type tlsEcho struct {
	mu     sync.Mutex
	states []tls.ConnectionState // from OnOpen
	plain  []bool                // OnOpen's c.TLS() == nil, by connection
	closes []error
	closed chan error
}

func (h *tlsEcho) OnData(c *percore.Conn, data []byte) { c.Write(data) }

func (h *tlsEcho) OnOpen(c *percore.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := c.TLS(); st != nil {
		h.states = append(h.states, *st)
	} else {
		h.plain = append(h.plain, true)
	}
}

func (h *tlsEcho) OnClose(c *percore.Conn, err error) {
	h.mu.Lock()
	h.closes = append(h.closes, err)
	h.mu.Unlock()
	if h.closed != nil {
		h.closed <- err
	}
}

// startTLS starts a runtime with a TLS listener and a plain one on
// loopback; it returns their addresses.
func startTLS(t *testing.T, b percore.Backend, cfg percore.Config, h percore.Handler) (rt *percore.Runtime, tlsAddr, plainAddr string) {
	t.Helper()
	cfg.Backend = b
	cfg.Listen = []string{"tls://127.0.0.1:0", "tcp://127.0.0.1:0"}
	if cfg.TLS == nil {
		cfg.TLS = pctest.TestPKI().ServerTLS()
	}
	rt = start(t, cfg, h)
	lns := rt.Listeners()
	return rt, lns[0].Addr.String(), lns[1].Addr.String()
}

func tlsDial(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	nc := pctest.Dial(t, addr)
	c := tls.Client(nc, cfg)
	if err := c.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return c
}

// waitStats waits until ok holds for rt's counters.
func waitStats(t *testing.T, rt *percore.Runtime, what string, ok func(percore.Stats) bool) percore.Stats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := rt.Stats()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: stats %+v", what, s)
		}
		time.Sleep(time.Millisecond) // polling a counter, not synchronising
	}
}

func TestTLSEcho(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &tlsEcho{}
		rt, addr, plainAddr := startTLS(t, b, percore.Config{}, h)
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			cfg := pctest.TestPKI().ClientTLS()
			cfg.MinVersion, cfg.MaxVersion = v, v
			cfg.NextProtos = []string{"h2", "http/1.1"}
			c := tlsDial(t, addr, cfg)
			if got := c.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
				t.Errorf("ALPN %q, want http/1.1", got)
			}
			for _, n := range []int{1, 100, 16 << 10, 16<<10 + 1, 1 << 20} {
				p := bytes.Repeat([]byte{byte(n)}, n)
				got, err := roundTrip(c, p)
				if err != nil || !bytes.Equal(got, p) {
					t.Fatalf("version %x: echo of %d bytes: %v (got %d bytes)", v, n, err, len(got))
				}
			}
			c.Close()
		}
		// The plain listener next to it stays plain.
		pc := pctest.Dial(t, plainAddr)
		if got, err := roundTrip(pc, []byte("plain")); err != nil || string(got) != "plain" {
			t.Fatalf("plain listener: %q, %v", got, err)
		}
		pc.Close()
		s := waitStats(t, rt, "two handshakes", func(s percore.Stats) bool { return s.TLSHandshakes == 2 && s.Closes == 3 })
		if s.TLSHandshakeErrors != 0 || s.TLSHandshaking != 0 {
			t.Errorf("stats %+v", s)
		}
		if ps := rt.TLSPoolStats(); ps.Succeeded != 2 || ps.Running != 0 {
			t.Errorf("pool stats %+v", ps)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.states) != 2 || h.states[0].Version != tls.VersionTLS12 || h.states[1].Version != tls.VersionTLS13 {
			t.Errorf("OnOpen saw %d TLS states: %+v", len(h.states), h.states)
		}
		if len(h.plain) == 0 {
			t.Error("the plain listener's OnOpen saw a TLS state")
		}
	})
}

// TestTLSConfigErrors: a TLS listener needs Config.TLS, and Config.TLS a
// TLS listener.
func TestTLSConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  percore.Config
		want string
	}{
		{"no config", percore.Config{Listen: []string{"tls://127.0.0.1:0"}}, "Config.TLS is nil"},
		{"no listener", percore.Config{Addr: "127.0.0.1:0", TLS: &tls.Config{}}, "no listener is TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Backend = percore.Epoll
			tc.cfg.Logger = discard
			rt, err := percore.New(tc.cfg, echoHandler{})
			if err == nil {
				rt.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

// TestTLSGarbage: bytes that are not a ClientHello get an alert and a
// close, counted; the handler never sees the connection.
func TestTLSGarbage(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &tlsEcho{}
		rt, addr, _ := startTLS(t, b, percore.Config{}, h)
		c := pctest.Dial(t, addr)
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c)
		if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
			t.Fatal(err)
		}
		if len(got) < 7 || got[0] != 21 { // an alert record
			t.Fatalf("got %x, want an alert record", got)
		}
		waitStats(t, rt, "a handshake error", func(s percore.Stats) bool { return s.TLSHandshakeErrors == 1 && s.TLSHandshaking == 0 })
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.states)+len(h.plain)+len(h.closes) != 0 {
			t.Fatalf("the handler saw the connection: %d opens, %d closes", len(h.states)+len(h.plain), len(h.closes))
		}
	})
}

// TestTLSHandshakeTimeout: a client that never finishes its handshake is
// closed at the timeout, counted.
func TestTLSHandshakeTimeout(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		cfg := percore.Config{TLSPool: tlsconn.PoolConfig{Timeout: 200 * time.Millisecond}}
		rt, addr, _ := startTLS(t, b, cfg, &tlsEcho{})
		silent := pctest.Dial(t, addr) // sends nothing
		half := pctest.Dial(t, addr)   // half a ClientHello
		if _, err := half.Write([]byte{22, 3, 1, 0, 200, 1, 0}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []net.Conn{silent, half} {
			if _, err := io.ReadAll(c); err != nil && !strings.Contains(err.Error(), "reset") {
				t.Fatal(err)
			}
		}
		waitStats(t, rt, "two timeouts", func(s percore.Stats) bool { return s.TLSHandshakeTimeouts == 2 && s.TLSHandshaking == 0 })
	})
}

// recordReader remembers the content type of the last record read from
// the peer (TLS 1.2 shows an alert as one).
type recordReader struct {
	net.Conn
	mu   sync.Mutex
	seen []byte
}

func (r *recordReader) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.mu.Lock()
	r.seen = append(r.seen, p[:n]...)
	r.mu.Unlock()
	return n, err
}

// lastRecordType walks the records seen and returns the last one's type.
func (r *recordReader) lastRecordType() byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, last := r.seen, byte(0)
	for len(b) >= 5 {
		n := 5 + (int(b[3])<<8 | int(b[4]))
		if n > len(b) {
			break
		}
		last, b = b[0], b[n:]
	}
	return last
}

type closeAfterReply struct{}

func (closeAfterReply) OnData(c *percore.Conn, data []byte) {
	c.Write(data)
	c.Close()
}

// TestTLSCloseNotify: Close sends close_notify after the reply; the
// peer's close_notify ends the stream (OnClose with nil).
func TestTLSCloseNotify(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		t.Run("sent", func(t *testing.T) {
			_, addr, _ := startTLS(t, b, percore.Config{}, closeAfterReply{})
			rr := &recordReader{Conn: pctest.Dial(t, addr)}
			cfg := pctest.TestPKI().ClientTLS()
			cfg.MaxVersion = tls.VersionTLS12
			c := tls.Client(rr, cfg)
			if _, err := c.Write([]byte("bye")); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil || string(got) != "bye" {
				t.Fatalf("read %q, %v", got, err)
			}
			if typ := rr.lastRecordType(); typ != 21 {
				t.Fatalf("last record of type %d, want an alert (close_notify)", typ)
			}
		})
		t.Run("honoured", func(t *testing.T) {
			h := &tlsEcho{closed: make(chan error, 1)}
			_, addr, _ := startTLS(t, b, percore.Config{}, h)
			c := tlsDial(t, addr, pctest.TestPKI().ClientTLS())
			if got, err := roundTrip(c, []byte("hi")); err != nil || string(got) != "hi" {
				t.Fatal(got, err)
			}
			if err := c.CloseWrite(); err != nil { // close_notify, the socket stays open
				t.Fatal(err)
			}
			select {
			case err := <-h.closed:
				if err != nil {
					t.Fatalf("OnClose(%v), want nil", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no OnClose after the peer's close_notify")
			}
			if _, err := io.ReadAll(c); err != nil {
				t.Fatalf("read after close_notify: %v", err)
			}
		})
	})
}

// TestTLSHandshakeCap: at Config.MaxHandshakes connections in their
// handshake a loop stops accepting; the others wait in the backlog and are
// accepted as handshakes end (here at their timeout).
func TestTLSHandshakeCap(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		cfg := percore.Config{MaxHandshakes: 2, TLSPool: tlsconn.PoolConfig{Timeout: 300 * time.Millisecond}}
		rt, addr, _ := startTLS(t, b, cfg, &tlsEcho{})
		var conns []net.Conn
		for range 4 {
			conns = append(conns, pctest.Dial(t, addr)) // silent: each holds a handshake
		}
		s := waitStats(t, rt, "two handshakes in flight", func(s percore.Stats) bool { return s.TLSHandshaking == 2 })
		if s.Accepts != 2 {
			t.Fatalf("%d accepted at the cap of 2", s.Accepts)
		}
		waitStats(t, rt, "all four timed out", func(s percore.Stats) bool {
			return s.Accepts == 4 && s.TLSHandshakeTimeouts == 4 && s.TLSHandshaking == 0
		})
		// Accepting resumed: a real client gets through.
		c := tlsDial(t, addr, pctest.TestPKI().ClientTLS())
		if got, err := roundTrip(c, []byte("after")); err != nil || string(got) != "after" {
			t.Fatal(got, err)
		}
		c.Close()
		for _, c := range conns {
			c.Close()
		}
	})
}

// TestKernelTLSReport: the start-up report says what New found of kernel
// TLS; it is never in use (the hand-over is not written), and
// Config.NoKernelTLS says so when the kernel has it.
func TestKernelTLSReport(t *testing.T) {
	ok, err := tlsconn.KernelTLS()
	if err != nil {
		t.Skipf("cannot read tcp_available_ulp: %v", err)
	}
	for _, off := range []bool{false, true} {
		rt := start(t, percore.Config{Backend: percore.Epoll, NoKernelTLS: off}, nil)
		k := rt.Report().KernelTLS
		if k.Available != ok || k.Used || k.Reason == "" || k.Off != off {
			t.Fatalf("NoKernelTLS %v: %+v, the kernel's tls ULP: %v", off, k, ok)
		}
		if !strings.Contains(rt.Report().String(), "tls:      kernel TLS") {
			t.Fatalf("the report lacks its tls line:\n%s", rt.Report())
		}
		if ok && off && k.Reason != "Config.NoKernelTLS" {
			t.Fatalf("reason %q with Config.NoKernelTLS", k.Reason)
		}
	}
	if !ok {
		t.Log("no tls ULP here: the kTLS hand-over cannot be tested (and is not written)")
	}
}

// TestTLSClientCertAndSNI: crypto/tls's own settings work through a
// listener: a required client certificate (refused without one, seen in
// OnOpen's state with one), and GetConfigForClient, which runs on the
// handshake pool and sees the server name the client asked for.
func TestTLSClientCertAndSNI(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := pctest.TestPKI()
		var asked atomic.Value
		cfg := &tls.Config{GetConfigForClient: func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			asked.Store(hi.ServerName)
			c := p.ServerTLS()
			c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, p.Pool
			return c, nil
		}}
		h := &tlsEcho{}
		rt, addr, _ := startTLS(t, b, percore.Config{TLS: cfg}, h)

		// Without a certificate: the handshake fails (TLS 1.3: the client
		// learns it at its first read).
		nc := pctest.Dial(t, addr)
		c := tls.Client(nc, p.ClientTLS())
		_, err := roundTrip(c, []byte("x"))
		if err == nil {
			t.Fatal("a client without a certificate was served")
		}
		c.Close()

		cc := p.ClientTLS()
		cc.Certificates = []tls.Certificate{p.Client}
		c = tlsDial(t, addr, cc)
		if got, err := roundTrip(c, []byte("with")); err != nil || string(got) != "with" {
			t.Fatal(got, err)
		}
		c.Close()
		if s, _ := asked.Load().(string); s != "example.test" {
			t.Errorf("GetConfigForClient saw server name %q", s)
		}
		waitStats(t, rt, "one handshake each way", func(s percore.Stats) bool {
			return s.TLSHandshakes == 1 && s.TLSHandshakeErrors == 1
		})
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.states) != 1 || len(h.states[0].PeerCertificates) != 1 || h.states[0].PeerCertificates[0].Subject.CommonName != "client.test" {
			t.Fatalf("OnOpen's states: %+v", h.states)
		}
	})
}

// TestTLSBadRecord: a record that does not authenticate, after the
// handshake, gets an alert and closes the connection; OnClose has the
// TLS error.
func TestTLSBadRecord(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &tlsEcho{closed: make(chan error, 1)}
		_, addr, _ := startTLS(t, b, percore.Config{}, h)
		rr := &recordReader{Conn: pctest.Dial(t, addr)}
		cfg := pctest.TestPKI().ClientTLS()
		cfg.MaxVersion = tls.VersionTLS12
		c := tls.Client(rr, cfg)
		if got, err := roundTrip(c, []byte("ok")); err != nil || string(got) != "ok" {
			t.Fatal(got, err)
		}
		// An application data record of 40 bytes of noise, on the raw socket.
		bad := append([]byte{23, 3, 3, 0, 40}, bytes.Repeat([]byte{0x5a}, 40)...)
		if _, err := rr.Conn.Write(bad); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-h.closed:
			var te *tlsconn.Error
			if !errors.As(err, &te) || te.AlertName() != "bad_record_mac" {
				t.Fatalf("OnClose(%v), want the bad_record_mac error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no OnClose after a bad record")
		}
		io.Copy(io.Discard, rr) // the rest, to the end of the stream
		if typ := rr.lastRecordType(); typ != 21 {
			t.Fatalf("last record of type %d, want an alert", typ)
		}
	})
}
