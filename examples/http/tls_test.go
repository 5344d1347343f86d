//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// TLS interop: examples/http with -tls-cert and -tls-key, against clients
// no one here wrote: Go's crypto/tls (net/http's client), openssl s_client
// and curl. The tools' tests skip where the tool is missing
// (scripts/ensure-tools.sh installs them).

func startTLSServer(t *testing.T, b percore.Backend) (r *running, ca string) {
	t.Helper()
	ca, cert, key := pctest.TestPKI().PEMFiles(t)
	r = startServer(t, b, func(c *config) { c.tls.Cert, c.tls.Key = cert, key })
	return r, ca
}

func TestTLSGoClient(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r, _ := startTLSServer(t, b)
		addr := r.rt.Addr().String()
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			cfg := pctest.TestPKI().ClientTLS()
			cfg.MinVersion, cfg.MaxVersion = v, v
			cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			for i, wantResumed := range []bool{false, true} {
				tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
				cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
				resp, err := cl.Get("https://" + addr + "/plaintext")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				tr.CloseIdleConnections()
				if string(body) != "Hello, World!" || resp.Proto != "HTTP/1.1" {
					t.Fatalf("version %x: %s %q", v, resp.Proto, body)
				}
				if st := resp.TLS; st.Version != v || st.DidResume != wantResumed || st.NegotiatedProtocol != "http/1.1" {
					t.Fatalf("version %x, connection %d: version %x, resumed %v, ALPN %q", v, i, st.Version, st.DidResume, st.NegotiatedProtocol)
				}
			}
		}
	})
}

// opensslClient runs openssl s_client against addr with the commands on
// its input, and returns what it printed. -ign_eof keeps it reading after
// its input ends, until the server closes (or the context ends).
func opensslClient(t *testing.T, addr, ca, input string, args ...string) string {
	t.Helper()
	out, err := opensslRun(t, addr, ca, input, args...)
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func opensslRun(t *testing.T, addr, ca, input string, args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed (scripts/ensure-tools.sh installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all := append([]string{"s_client", "-connect", addr, "-CAfile", ca, "-servername", "example.test", "-ign_eof"}, args...)
	cmd := exec.CommandContext(ctx, "openssl", all...)
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("openssl %s: timed out:\n%s", strings.Join(all, " "), out)
	}
	return string(out), err
}

// lockedBuffer is a process's output, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const closeRequest = "GET /plaintext HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n"

func TestTLSOpenSSL(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r, ca := startTLSServer(t, b)
		addr := r.rt.Addr().String()
		for _, v := range []string{"-tls1_2", "-tls1_3"} {
			t.Run(v, func(t *testing.T) {
				sess := filepath.Join(t.TempDir(), "sess.pem")
				out := opensslClient(t, addr, ca, closeRequest, v, "-alpn", "http/1.1", "-sess_out", sess)
				for _, want := range []string{"Verify return code: 0 (ok)", "ALPN protocol: http/1.1", "Hello, World!"} {
					if !strings.Contains(out, want) {
						t.Fatalf("no %q in:\n%s", want, out)
					}
				}
				out = opensslClient(t, addr, ca, closeRequest, v, "-sess_in", sess)
				if !strings.Contains(out, "Reused, ") || !strings.Contains(out, "Hello, World!") {
					t.Fatalf("session not resumed:\n%s", out)
				}
			})
		}
		t.Run("h2 refused", func(t *testing.T) {
			out, _ := opensslRun(t, addr, ca, closeRequest, "-alpn", "h2") // fails, as it should
			if !strings.Contains(out, "no_application_protocol") && !strings.Contains(out, "alert number 120") {
				t.Fatalf("h2 only: want no_application_protocol:\n%s", out)
			}
		})
		t.Run("KeyUpdate", func(t *testing.T) {
			// k asks for a KeyUpdate (with update_requested); the request
			// after it is answered under the new keys.
			// s_client takes a command only as a line of its own, so the
			// input goes in steps, each after the output it waits for.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "openssl", "s_client", "-connect", addr, "-CAfile", ca, "-servername", "example.test", "-tls1_3")
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var out lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitOut := func(want string, n int) {
				for strings.Count(out.String(), want) < n {
					if ctx.Err() != nil {
						t.Fatalf("no %q (%d) in:\n%s", want, n, out.String())
					}
					time.Sleep(5 * time.Millisecond) // polling a process's output
				}
			}
			io.WriteString(in, "GET /plaintext HTTP/1.1\r\nHost: example.test\r\n\r\n")
			waitOut("Hello, World!", 1)
			io.WriteString(in, "k\n")
			waitOut("KEYUPDATE", 1)
			io.WriteString(in, closeRequest)
			waitOut("Hello, World!", 2)
			in.Close()
			_ = cmd.Wait()
		})
	})
}

func TestTLSCurl(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r, ca := startTLSServer(t, b)
		url := "https://example.test:" + portOf(r.rt.Addr().String()) + "/plaintext"
		resolve := "example.test:" + portOf(r.rt.Addr().String()) + ":127.0.0.1"
		for _, v := range []string{"--tlsv1.2", "--tlsv1.3"} {
			max := "--tls-max"
			ver := strings.TrimPrefix(v, "--tlsv")
			out := pctest.Curl(t, "-sS", "--http1.1", v, max, ver, "--cacert", ca, "--resolve", resolve, "-w", " %{http_version} %{ssl_verify_result}", url, url)
			if out != "Hello, World! 1.1 0Hello, World! 1.1 0" {
				t.Fatalf("curl %s: %q", v, out)
			}
		}
	})
}

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// TestTLSH2load: h2load --h1 over TLS, 4 connections of 50 requests each,
// pipelined 8 deep.
func TestTLSH2load(t *testing.T) {
	path, err := exec.LookPath("h2load")
	if err != nil {
		t.Skip("h2load is not installed (apt-get install -y nghttp2-client; scripts/ensure-tools.sh installs it)")
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r, _ := startTLSServer(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, path, "--h1", "-n", "200", "-c", "4", "-m", "8",
			"https://"+r.rt.Addr().String()+"/plaintext").CombinedOutput()
		if err != nil {
			t.Fatalf("h2load: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "200 succeeded, 0 failed, 0 errored") || !strings.Contains(string(out), "TLS Protocol: TLSv1.3") {
			t.Fatalf("h2load:\n%s", out)
		}
	})
}

// TestTLSNginxProxy: nginx's proxy_pass https:// as a client of
// examples/http, verifying its certificate, with upstream keep-alive.
func TestTLSNginxProxy(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r, ca := startTLSServer(t, b)
		// StartNginx puts its argument inside the server block: the
		// argument closes it and opens the upstream block, which the
		// helper's closing brace then ends.
		n := pctest.StartNginx(t, "    location / {\n"+
			"      proxy_pass https://up;\n      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n"+
			"      proxy_ssl_verify on;\n      proxy_ssl_trusted_certificate "+ca+";\n"+
			"      proxy_ssl_name example.test;\n      proxy_ssl_server_name on;\n    }\n  }\n"+
			"  upstream up {\n    server "+r.rt.Addr().String()+";\n    keepalive 4;")
		cl := client(t)
		for range 3 {
			resp, err := cl.Get("http://" + n.Addr() + "/plaintext")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "Hello, World!" {
				t.Fatalf("through nginx: %d %q", resp.StatusCode, body)
			}
		}
		if s := r.rt.Stats(); s.TLSHandshakes != 1 {
			t.Errorf("%d handshakes for three proxied requests over a keep-alive upstream, want 1", s.TLSHandshakes)
		}
	})
}
