package tlsconn_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/runtime/tlsconn"
)

// dialPipe runs a crypto/tls client with cfg against a server session with
// scfg and returns both ends after the client's handshake (or its error).
func dialPipe(t *testing.T, pool *tlsconn.Pool, scfg, ccfg *tls.Config) (*lconn, *tls.Conn, error) {
	t.Helper()
	srv, peer := startServer(t, scfg, pool, echo)
	cl := tls.Client(peer, ccfg)
	cl.SetDeadline(time.Now().Add(10 * time.Second))
	err := cl.Handshake()
	if err == nil {
		err = exchange(cl, []byte("ping")) // reads the TLS 1.3 tickets too
	}
	return srv, cl, err
}

func TestALPN(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{})
	t.Run("http/1.1 chosen over h2", func(t *testing.T) {
		ccfg := clientConfig(t)
		ccfg.NextProtos = []string{"h2", "http/1.1"}
		srv, cl, err := dialPipe(t, pool, serverConfig(t), ccfg)
		if err != nil {
			t.Fatal(err)
		}
		if p := cl.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
			t.Fatalf("client negotiated %q", p)
		}
		srv.l.do(func() {
			if p := srv.s.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
				t.Errorf("server negotiated %q", p)
			}
		})
	})
	t.Run("h2 only is refused", func(t *testing.T) {
		ccfg := clientConfig(t)
		ccfg.NextProtos = []string{"h2"}
		srv, _, err := dialPipe(t, pool, serverConfig(t), ccfg)
		if err == nil {
			t.Fatal("an h2-only client was served")
		}
		srv.waitEnd(t)
		_, hsErr, _ := srv.state()
		var e *tlsconn.Error
		if !errors.As(hsErr, &e) || !e.Sent || e.AlertName() != "no_application_protocol" {
			t.Fatalf("server handshake error %v, want no_application_protocol sent", hsErr)
		}
	})
}

// TestSNI: GetCertificate and GetConfigForClient pick by server name, on
// the pool's goroutines; a certificate swapped in between handshakes (a
// reload) is what the next handshake presents.
func TestSNI(t *testing.T) {
	p := testPKI(t)
	pool := newPool(t, tlsconn.PoolConfig{})
	certFor := map[string]*tls.Certificate{"example.test": &p.server, "other.test": &p.other}
	byCert := &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c := certFor[h.ServerName]; c != nil {
			return c, nil
		}
		return nil, errors.New("no certificate for " + h.ServerName)
	}}
	byConfig := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		if h.Conn == nil || h.Conn.RemoteAddr() == nil {
			return nil, errors.New("ClientHelloInfo.Conn has no address")
		}
		return &tls.Config{Certificates: []tls.Certificate{*certFor[h.ServerName]}}, nil
	}}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
	}{{"GetCertificate", byCert}, {"GetConfigForClient", byConfig}} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{"example.test", "other.test"} {
				ccfg := clientConfig(t)
				ccfg.ServerName = name
				srv, cl, err := dialPipe(t, pool, tc.cfg, ccfg)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if cn := cl.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != name {
					t.Fatalf("asked for %s, got %s", name, cn)
				}
				srv.l.do(func() {
					if sn := srv.s.ConnectionState().ServerName; sn != name {
						t.Errorf("server saw SNI %q", sn)
					}
				})
			}
		})
	}
	t.Run("reload", func(t *testing.T) {
		var current *tls.Certificate = &p.server
		cfg := &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return current, nil }}
		ccfg := clientConfig(t)
		ccfg.InsecureSkipVerify = true
		_, cl, err := dialPipe(t, pool, cfg, ccfg)
		if err != nil || cl.ConnectionState().PeerCertificates[0].Subject.CommonName != "example.test" {
			t.Fatal(err)
		}
		current = &p.other // between handshakes, no restart
		_, cl, err = dialPipe(t, pool, cfg, ccfg)
		if err != nil || cl.ConnectionState().PeerCertificates[0].Subject.CommonName != "other.test" {
			t.Fatal("the reloaded certificate was not presented", err)
		}
	})
}

// TestResumption: tickets (TLS 1.2) and PSK (TLS 1.3) resume.
func TestResumption(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{})
	scfg := serverConfig(t) // one config: one set of ticket keys
	for _, vers := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(vers), func(t *testing.T) {
			ccfg := clientConfig(t)
			ccfg.MaxVersion = vers
			ccfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			for i, want := range []bool{false, true, true} {
				srv, cl, err := dialPipe(t, pool, scfg, ccfg)
				if err != nil {
					t.Fatal(err)
				}
				if got := cl.ConnectionState().DidResume; got != want {
					t.Fatalf("connection %d: DidResume %v, want %v", i, got, want)
				}
				srv.l.do(func() {
					if got := srv.s.ConnectionState().DidResume; got != want {
						t.Errorf("server %d: DidResume %v", i, got)
					}
				})
				cl.Close()
			}
		})
	}
}

// TestClientCertificates: RequireAndVerifyClientCert refuses a client
// without one and shows the server the one it verified.
func TestClientCertificates(t *testing.T) {
	p := testPKI(t)
	pool := newPool(t, tlsconn.PoolConfig{})
	scfg := serverConfig(t)
	scfg.ClientAuth = tls.RequireAndVerifyClientCert
	scfg.ClientCAs = p.pool
	for _, vers := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(vers), func(t *testing.T) {
			ccfg := clientConfig(t)
			ccfg.MaxVersion = vers
			ccfg.Certificates = []tls.Certificate{p.client}
			srv, _, err := dialPipe(t, pool, scfg, ccfg)
			if err != nil {
				t.Fatal(err)
			}
			var peers []*x509.Certificate
			srv.l.do(func() { peers = srv.s.ConnectionState().PeerCertificates })
			if len(peers) != 1 || peers[0].Subject.CommonName != "client.test" {
				t.Fatalf("server sees %d peer certificates", len(peers))
			}

			ccfg.Certificates = nil
			srv, cl, err := dialPipe(t, pool, scfg, ccfg)
			if err == nil {
				// TLS 1.3: the client's handshake ends before the server's
				// verdict; the verdict is the next read's error.
				_, err = cl.Read(make([]byte, 1))
			}
			if err == nil {
				t.Fatal("a client without a certificate was served")
			}
			// The alert (certificate_required in 1.3, bad_certificate in
			// 1.2) is encrypted in 1.3: the client's error shows it came.
			if !strings.Contains(err.Error(), "remote error: tls:") {
				t.Fatalf("client error %v, want the server's alert", err)
			}
			srv.waitEnd(t)
			if _, hsErr, _ := srv.state(); hsErr == nil {
				t.Fatal("server handshake succeeded")
			}
		})
	}
}
