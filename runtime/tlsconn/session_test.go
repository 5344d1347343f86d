package tlsconn_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/runtime/tlsconn"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func echo(c *lconn, p []byte) {
	if err := c.write(p); err != nil {
		c.fail(err)
	}
}

// startServer serves a Session with cfg on the loop end of a pipe and
// returns the peer's end.
func startServer(t *testing.T, cfg *tls.Config, pool *tlsconn.Pool, onData func(*lconn, []byte)) (*lconn, net.Conn) {
	t.Helper()
	l := newLoop(t)
	le, pe := pipe()
	t.Cleanup(func() { pe.Close() })
	c := serve(t, l, le, func(o tlsconn.Options) *tlsconn.Session {
		o.Pool = pool
		return tlsconn.Server(cfg, o)
	}, onData)
	return c, pe
}

func roundTrip(t *testing.T, tc *tls.Conn, msg []byte) {
	t.Helper()
	if err := exchange(tc, msg); err != nil {
		t.Fatal(err)
	}
}

// exchange writes msg and reads back its echo.
func exchange(tc *tls.Conn, msg []byte) error {
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	errc := make(chan error, 1)
	go func() { _, err := tc.Write(msg); errc <- err }()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(tc, got); err != nil {
		return fmt.Errorf("read echo of %d bytes: %w", len(msg), err)
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo of %d bytes differs", len(msg))
	}
	return nil
}

func TestEchoAgainstCryptoTLSClient(t *testing.T) {
	cases := []struct {
		name  string
		vers  uint16
		suite uint16
	}{
		{"tls13-aes128", tls.VersionTLS13, tls.TLS_AES_128_GCM_SHA256},
		{"tls13-default", tls.VersionTLS13, 0},
		{"tls12-ecdhe-aes128", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		{"tls12-ecdhe-aes256", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384},
		{"tls12-chacha", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t, tlsconn.PoolConfig{})
			srv, peer := startServer(t, serverConfig(t), pool, echo)
			ccfg := clientConfig(t)
			ccfg.MaxVersion = tc.vers
			if tc.suite != 0 && tc.vers == tls.VersionTLS12 {
				ccfg.CipherSuites = []uint16{tc.suite}
			}
			cl := tls.Client(peer, ccfg)
			defer cl.Close()
			for _, n := range []int{1, 100, 1500, 16384, 16385, 100_000, 300_000} {
				msg := bytes.Repeat([]byte{byte(n)}, n)
				for i := range msg {
					msg[i] = byte(i * 7)
				}
				roundTrip(t, cl, msg)
			}
			st := cl.ConnectionState()
			if st.Version != tc.vers {
				t.Errorf("version %x, want %x", st.Version, tc.vers)
			}
			if tc.suite != 0 && st.CipherSuite != tc.suite {
				t.Errorf("suite %x, want %x", st.CipherSuite, tc.suite)
			}
			var sst tls.ConnectionState
			srv.l.do(func() { sst = srv.s.ConnectionState() })
			if !sst.HandshakeComplete || sst.Version != tc.vers || sst.CipherSuite != st.CipherSuite || sst.ServerName != "example.test" {
				t.Errorf("server state %+v", sst)
			}
		})
	}
}

// TestCloseNotifyBothWays: the session's close_notify is the peer's
// io.EOF, and the peer's close_notify is Decrypt's io.EOF.
func TestCloseNotifyBothWays(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{})
	t.Run("from-session", func(t *testing.T) {
		srv, peer := startServer(t, serverConfig(t), pool, func(c *lconn, p []byte) {
			c.write(p)
			c.close(true)
		})
		cl := tls.Client(peer, clientConfig(t))
		cl.SetDeadline(time.Now().Add(10 * time.Second))
		go cl.Write([]byte("bye"))
		got, err := io.ReadAll(cl)
		if err != nil || string(got) != "bye" {
			t.Fatalf("ReadAll = %q, %v; want \"bye\" and a clean EOF", got, err)
		}
		srv.waitEnd(t)
	})
	t.Run("from-peer", func(t *testing.T) {
		srv, peer := startServer(t, serverConfig(t), pool, echo)
		cl := tls.Client(peer, clientConfig(t))
		roundTrip(t, cl, []byte("hello"))
		if err := cl.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "io.EOF on the session", func() bool {
			_, _, err := srv.state()
			return err != nil
		})
		if _, _, err := srv.state(); err != io.EOF {
			t.Fatalf("session read error %v, want io.EOF", err)
		}
		// The write side is still open after the peer's close_notify.
		srv.l.do(func() {
			if err := srv.write([]byte("after")); err != nil {
				t.Errorf("write after peer close_notify: %v", err)
			}
		})
		cl.SetReadDeadline(time.Now().Add(10 * time.Second))
		got := make([]byte, 5)
		if _, err := io.ReadFull(cl, got); err != nil || string(got) != "after" {
			t.Fatalf("read %q, %v", got, err)
		}
		cl.Close()
	})
}

// TestClientSessionAgainstCryptoTLSServer runs the client side: SNI and
// verification as crypto/tls does them.
func TestClientSessionAgainstCryptoTLSServer(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{})
	for _, vers := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(vers), func(t *testing.T) {
			l := newLoop(t)
			le, pe := pipe()
			defer pe.Close()
			scfg := serverConfig(t)
			scfg.MaxVersion = vers
			srv := tls.Server(pe, scfg)
			go func() { // an echo server
				buf := make([]byte, 32<<10)
				for {
					n, err := srv.Read(buf)
					if err != nil {
						srv.Close()
						return
					}
					srv.Write(buf[:n])
				}
			}()
			got := make(chan []byte, 64)
			c := serve(t, l, le, func(o tlsconn.Options) *tlsconn.Session {
				o.Pool = pool
				cfg := clientConfig(t)
				cfg.NextProtos = []string{"http/1.1"}
				return tlsconn.Client(cfg, o)
			}, func(c *lconn, p []byte) { got <- p })
			waitFor(t, "handshake", func() bool { est, hsErr, _ := c.state(); return est || hsErr != nil })
			if _, hsErr, _ := c.state(); hsErr != nil {
				t.Fatal(hsErr)
			}
			msg := bytes.Repeat([]byte("percore "), 5000)
			l.do(func() {
				if err := c.write(msg); err != nil {
					t.Error(err)
				}
			})
			var all []byte
			for len(all) < len(msg) {
				select {
				case p := <-got:
					all = append(all, p...)
				case <-time.After(10 * time.Second):
					t.Fatalf("got %d of %d bytes", len(all), len(msg))
				}
			}
			if !bytes.Equal(all, msg) {
				t.Fatal("echo differs")
			}
			var st tls.ConnectionState
			l.do(func() { st = c.s.ConnectionState() })
			if st.Version != vers || st.NegotiatedProtocol != "http/1.1" || len(st.PeerCertificates) == 0 ||
				st.PeerCertificates[0].Subject.CommonName != "example.test" || len(st.VerifiedChains) == 0 {
				t.Fatalf("client state: version %x alpn %q verified %d", st.Version, st.NegotiatedProtocol, len(st.VerifiedChains))
			}
		})
	}
	t.Run("wrong-name", func(t *testing.T) {
		l := newLoop(t)
		le, pe := pipe()
		defer pe.Close()
		go tls.Server(pe, serverConfig(t)).Handshake()
		c := serve(t, l, le, func(o tlsconn.Options) *tlsconn.Session {
			o.Pool = pool
			cfg := clientConfig(t)
			cfg.ServerName = "wrong.test"
			return tlsconn.Client(cfg, o)
		}, nil)
		waitFor(t, "handshake end", func() bool { _, hsErr, _ := c.state(); return hsErr != nil })
		_, hsErr, _ := c.state()
		var e *tlsconn.Error
		if !errors.As(hsErr, &e) || e.Op != "handshake" || !e.Sent || e.AlertName() != "bad_certificate" {
			t.Fatalf("handshake error %v, want a sent bad_certificate", hsErr)
		}
	})
}

// TestGarbageInsteadOfClientHello: an HTTP request to the TLS port fails at
// once, not at the timeout.
func TestGarbageInsteadOfClientHello(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{Timeout: time.Hour})
	srv, peer := startServer(t, serverConfig(t), pool, nil)
	go peer.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	srv.waitEnd(t)
	_, hsErr, _ := srv.state()
	var rh tls.RecordHeaderError
	if !errors.As(hsErr, &rh) || !strings.Contains(rh.Msg, "does not look like a TLS handshake") {
		t.Fatalf("handshake error %v, want a RecordHeaderError", hsErr)
	}
	if st := pool.Stats(); st.Failed != 1 || st.Running != 0 {
		t.Fatalf("pool stats %+v", st)
	}
}

// TestHandshakeTimeout: a ClientHello that never completes ends at the
// pool's timeout, running or not yet begun.
func TestHandshakeTimeout(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{Timeout: 50 * time.Millisecond})
	t.Run("partial-hello", func(t *testing.T) {
		srv, peer := startServer(t, serverConfig(t), pool, nil)
		go peer.Write([]byte{22, 3, 1, 0, 200, 1, 0}) // a header and two bytes of 200
		srv.waitEnd(t)
		if _, hsErr, _ := srv.state(); !errors.Is(hsErr, os.ErrDeadlineExceeded) {
			t.Fatalf("handshake error %v, want os.ErrDeadlineExceeded", hsErr)
		}
	})
	t.Run("silent", func(t *testing.T) {
		srv, _ := startServer(t, serverConfig(t), pool, nil)
		srv.waitEnd(t)
		if _, hsErr, _ := srv.state(); !errors.Is(hsErr, os.ErrDeadlineExceeded) {
			t.Fatalf("handshake error %v, want os.ErrDeadlineExceeded", hsErr)
		}
	})
	waitFor(t, "pool idle", func() bool { st := pool.Stats(); return st.Running == 0 })
	if st := pool.Stats(); st.TimedOut != 2 {
		t.Fatalf("pool stats %+v, want 2 timed out", st)
	}
}
