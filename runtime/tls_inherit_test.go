package runtime_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// childTLSEnv, set for a child server (childServer), gives it a
// Config.TLS of its own: the PKI's other certificate ("other.test"), so a
// client can tell the new process's configuration from the old one's.
const childTLSEnv = "PERCORE_TEST_CHILD_TLS"

// childTLS is the child server's Config.TLS: nil unless childTLSEnv is set.
func childTLS() *tls.Config {
	if os.Getenv(childTLSEnv) == "" {
		return nil
	}
	return &tls.Config{Certificates: []tls.Certificate{pctest.TestPKI().Other}}
}

// tlsDialName dials addr over TLS, verifying the server as name.
func tlsDialName(t *testing.T, addr, name string) *tls.Conn {
	t.Helper()
	cfg := pctest.TestPKI().ClientTLS()
	cfg.ServerName = name
	c := tlsDial(t, addr, cfg)
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c
}

// The restart of examples/multi, with a TLS listener: the old process
// hands its sockets to a new one (ListenerFiles, HandoverEnv, ListenFiles
// in the child) and shuts down; the new process serves the tls://
// listener as TLS, with its own Config.TLS (its certificate is what a
// client sees), and the plain listener beside it stays plain.
func TestTLSRestartKeepsScheme(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		old, err := percore.New(percore.Config{Backend: b, Listen: []string{"tls://127.0.0.1:0", "tcp://127.0.0.1:0"},
			TLS: pctest.TestPKI().ServerTLS(), Cores: allCores(t)[:1], Logger: pctest.QuietLogger(t)}, echoHandler{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { old.Close() })
		lns := old.Listeners()
		tlsAddr, plainAddr := lns[0].Addr.String(), lns[1].Addr.String()
		c := tlsDialName(t, tlsAddr, "example.test")
		echoOnce(t, c, "before the restart")
		c.Close()

		files, err := old.ListenerFiles()
		if err != nil {
			t.Fatal(err)
		}
		ready, stop := child(t, b, files, append(percore.HandoverEnv(files), childTLSEnv+"=1"), false)
		for _, f := range files {
			f.Close()
		}
		if want := "=tls://" + tlsAddr; !strings.Contains(ready, want) {
			t.Fatalf("the new process's listeners %q: no %q", ready, want)
		}
		if want := "=tcp://" + plainAddr; !strings.Contains(ready, want) {
			t.Fatalf("the new process's listeners %q: no %q", ready, want)
		}
		if err := old.Shutdown(shutdownCtx(t, 20*time.Second)); err != nil {
			t.Fatalf("the old process's shutdown: %v", err)
		}
		// Only the new process serves now: several handshakes, each
		// presenting the new process's certificate. The child made its
		// own test PKI (another CA, unknown here), so the client checks
		// the name and that the certificate is none of this process's.
		ccfg := &tls.Config{InsecureSkipVerify: true, ServerName: "other.test"}
		for i := range 4 {
			c := tlsDial(t, tlsAddr, ccfg)
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			leaf := c.ConnectionState().PeerCertificates[0]
			if leaf.Subject.CommonName != "other.test" || leaf.Equal(pctest.TestPKI().Other.Leaf) {
				t.Fatalf("after the restart the server presented %q (ours: %v), want the new process's other.test",
					leaf.Subject.CommonName, leaf.Equal(pctest.TestPKI().Other.Leaf))
			}
			echoOnce(t, c, fmt.Sprint("after the restart ", i))
			c.Close()
		}
		pc := pctest.Dial(t, plainAddr)
		echoOnce(t, pc, "plain after the restart")
		pc.Close()
		if err := stop(); err != nil {
			t.Fatalf("child: %v", err)
		}
	})
}

// renamed returns a duplicate of f's socket under another name (as
// ListenFiles names what systemd or a parent passed).
func renamed(t *testing.T, f *os.File, name string) *os.File {
	t.Helper()
	sc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var d int
	var derr error
	if err := sc.Control(func(fd uintptr) { d, derr = syscall.Dup(int(fd)) }); err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	syscall.CloseOnExec(d)
	nf := os.NewFile(uintptr(d), name)
	t.Cleanup(func() { nf.Close() })
	return nf
}

// In-process: an inherited socket is TLS when its name says so, in each
// of the forms a name arrives in (ListenerFiles's, HandoverEnv's, a
// systemd FileDescriptorName=), and plain otherwise; a TLS socket without
// Config.TLS, or a TLS name on a socket that is not TCP, fails New and
// says why.
func TestInheritedTLSNames(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tf, err := tcp.(*net.TCPListener).File()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tf.Close() })
		tcp.Close() // the file keeps the socket
		addr := tcp.Addr().String()
		for _, tc := range []struct {
			name string
			tls  bool
		}{
			{"tls://" + addr, true},
			{"tls_//" + strings.ReplaceAll(addr, ":", "_"), true},
			{"tls4_//" + strings.ReplaceAll(addr, ":", "_"), true},
			{"tls", true},
			{"tls-web", true},
			{"tls-proxy.socket", false}, // systemd's default name: the unit's
			{"tcp_//" + strings.ReplaceAll(addr, ":", "_"), false},
			{"web", false},
			{"LISTEN_FD_3", false},
			{"tlsweb", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cfg := percore.Config{Backend: b, Inherited: []*os.File{renamed(t, tf, tc.name)}, Cores: allCores(t)[:1], Logger: discard}
				if tc.tls {
					cfg.TLS = pctest.TestPKI().ServerTLS()
				}
				rt := start(t, cfg, echoHandler{})
				ln := rt.Listeners()[0]
				if ln.TLS != tc.tls || !ln.Inherited {
					t.Fatalf("listener %+v: TLS %v, want %v", ln, ln.TLS, tc.tls)
				}
				if tc.tls {
					c := tlsDialName(t, addr, "example.test")
					echoOnce(t, c, "inherited TLS")
					c.Close()
					if want := "tls://" + addr; ln.String() != want {
						t.Fatalf("listener %q, want %q (what ListenerFiles names it, for the next restart)", ln, want)
					}
				} else {
					echoOnce(t, pctest.Dial(t, addr), "inherited plain")
				}
				if err := rt.Shutdown(shutdownCtx(t, 10*time.Second)); err != nil {
					t.Fatal(err)
				}
			})
		}

		// A TLS socket needs Config.TLS.
		_, err = percore.New(percore.Config{Backend: b, Inherited: []*os.File{renamed(t, tf, "tls-web")},
			Cores: allCores(t)[:1], Logger: discard}, echoHandler{})
		if err == nil || !strings.Contains(err.Error(), "Config.TLS is nil") {
			t.Fatalf("New with a TLS socket and no Config.TLS: %v", err)
		}
		// TLS is for TCP: a UDP socket named TLS is refused.
		udp, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		uf, err := udp.(*net.UDPConn).File()
		udp.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { uf.Close() })
		_, err = percore.New(percore.Config{Backend: b, Inherited: []*os.File{renamed(t, uf, "tls-dns")}, TLS: pctest.TestPKI().ServerTLS(),
			PacketHandler: packetEcho{}, Cores: allCores(t)[:1], Logger: discard}, echoHandler{})
		if err == nil || !strings.Contains(err.Error(), "TLS is served on TCP listeners only") {
			t.Fatalf("New with a UDP socket named TLS: %v", err)
		}
	})
}

// Certificate reload without a restart: GetCertificate reads the current
// certificate, which is swapped while the runtime serves. A handshake
// after the swap sees the new certificate; a connection established
// before it keeps its session (its certificate, its keys) and goes on
// echoing.
func TestTLSCertificateReload(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		pki := pctest.TestPKI()
		var current atomic.Pointer[tls.Certificate]
		current.Store(&pki.Server)
		cfg := &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return current.Load(), nil }}
		h := &tlsEcho{}
		rt, addr, _ := startTLS(t, b, percore.Config{TLS: cfg}, h)

		before := tlsDialName(t, addr, "example.test")
		defer before.Close()
		echoOnce(t, before, "before the reload")

		current.Store(&pki.Other) // the reload: no restart, no new Config

		for i := range 3 {
			c := tlsDialName(t, addr, "other.test")
			if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "other.test" {
				t.Fatalf("a handshake after the reload saw %q", cn)
			}
			echoOnce(t, c, fmt.Sprint("after the reload ", i))
			c.Close()
		}
		// The connection from before still has its session and works.
		if cn := before.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "example.test" {
			t.Fatalf("the established connection's certificate is %q", cn)
		}
		for i := range 3 {
			echoOnce(t, before, fmt.Sprint("established, after the reload ", i))
		}
		s := waitStats(t, rt, "four handshakes", func(s percore.Stats) bool { return s.TLSHandshakes == 4 })
		if s.TLSHandshakeErrors != 0 {
			t.Fatalf("stats %+v", s)
		}
		// Back: the next handshake sees the first certificate again.
		current.Store(&pki.Server)
		c := tlsDialName(t, addr, "example.test")
		echoOnce(t, c, "reloaded back")
		c.Close()
	})
}
