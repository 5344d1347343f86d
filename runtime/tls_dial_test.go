package runtime_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// TestTLSDial: Loop.DialTLS to a crypto/tls server, verified; a server
// whose certificate does not verify fails done with the error; a client
// with a session cache and no ServerName keeps the ticket read on the loop.
func TestTLSDial(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := pctest.TestPKI()
		ln, err := tls.Listen("tcp", "127.0.0.1:0", p.ServerTLS())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { defer c.Close(); io.Copy(c, c) }()
			}
		}()
		rt := start(t, percore.Config{Backend: b}, nil)
		l := rt.Loops()[0]
		tickets := &keyedCache{ClientSessionCache: tls.NewLRUClientSessionCache(4), keys: make(chan string, 4)}
		for _, tc := range []struct {
			name string
			cfg  *tls.Config
			ok   bool
		}{
			{"verified by IP", &tls.Config{RootCAs: p.Pool}, true},
			{"verified by name", p.ClientTLS(), true},
			{"unknown authority", &tls.Config{}, false},
			// No ServerName: crypto/tls keys the session ticket it reads
			// after the handshake, on the loop, by the remote address.
			{"session cache, no server name", &tls.Config{InsecureSkipVerify: true, ClientSessionCache: tickets}, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := make(chan string, 1)
				opened := make(chan error, 1)
				h := percore.HandlerFunc(func(c *percore.Conn, data []byte) {
					got <- string(data)
					c.Close()
				})
				err := l.Post(func() {
					err := l.DialTLS(ln.Addr().String(), tc.cfg, h, func(c *percore.Conn, err error) {
						if err == nil {
							if st := c.TLS(); st == nil || !st.HandshakeComplete {
								err = fmt.Errorf("no TLS state after the handshake")
							} else {
								c.Write([]byte("ping"))
							}
						}
						opened <- err
					})
					if err != nil {
						opened <- err
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				err = <-opened
				if !tc.ok {
					var ve *tls.CertificateVerificationError
					if err == nil || !errors.As(err, &ve) {
						t.Fatalf("done(%v), want a verification error", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if s := <-got; s != "ping" {
					t.Fatalf("echo %q", s)
				}
			})
		}
		if k := pctest.Recv(t, tickets.keys, "the session ticket"); k != ln.Addr().String() {
			t.Errorf("the ticket is kept under %q, want the server's address %s", k, ln.Addr())
		}
		waitStats(t, rt, "dials", func(s percore.Stats) bool {
			return s.TLSHandshakes == 3 && s.TLSHandshakeErrors == 1 && s.Dials == 3 && s.Open == 0
		})
	})
}

// keyedCache is a ClientSessionCache that says under which keys tickets
// are put.
type keyedCache struct {
	tls.ClientSessionCache
	keys chan string
}

func (c *keyedCache) Put(key string, cs *tls.ClientSessionState) {
	if cs != nil {
		select {
		case c.keys <- key:
		default:
		}
	}
	c.ClientSessionCache.Put(key, cs)
}
