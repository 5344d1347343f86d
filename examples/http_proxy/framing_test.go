//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// secretHandler is an upstream with a page no client asked for: /secret.
func secretHandler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/secret" {
		io.WriteString(w, "SECRET RESPONSE")
		return
	}
	io.Copy(io.Discard, r.Body)
	fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
}

// smuggle sends issue 31's request: a POST whose Connection names its
// Content-Length, with a body that is the start of another request. It
// returns what the proxy answered that client.
func smuggle(t *testing.T, proxyAddr string) string {
	t.Helper()
	c := pctest.Dial(t, proxyAddr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	body := "GET /secret HTTP/1.1\r\nX-Ignore: "
	fmt.Fprintf(c, "POST /post HTTP/1.1\r\nHost: x\r\nConnection: content-length\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the smuggling client's response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// TestSmugglingThroughConnection is issue 31's request smuggling: with one
// upstream connection (-max 1), a client whose Connection names
// Content-Length must not get its body read upstream as the next client's
// request. The request is refused (400) and reaches no upstream; the next
// client gets its own page.
func TestSmugglingThroughConnection(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := upstreamServer(t, secretHandler)
		s := startProxy(t, b, hostPort(up), func(c *config) { c.max = 1 })
		if got := smuggle(t, s.rt.Addr().String()); !strings.HasPrefix(got, "400 ") {
			t.Errorf("a request whose Connection names Content-Length: %q, want a 400", got)
		}
		if _, body := get(t, httpClient(t), "http://"+s.rt.Addr().String()+"/b"); body != "GET /b" {
			t.Fatalf("the next client's GET /b was answered %q", body)
		}
	})
}

// TestSmugglingThroughConnectionNginx: the same in front of a real nginx,
// as the issue found it (nginx served the next client's request as GET
// /secret).
func TestSmugglingThroughConnectionNginx(t *testing.T) {
	n := pctest.StartNginx(t, "    location = /secret { return 200 'SECRET RESPONSE'; }\n"+
		"    location / { return 200 '$request_method $uri'; }")
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		s := startProxy(t, b, n.Addr(), func(c *config) { c.max = 1 })
		if got := smuggle(t, s.rt.Addr().String()); !strings.HasPrefix(got, "400 ") {
			t.Errorf("a request whose Connection names Content-Length: %q, want a 400", got)
		}
		if out := pctest.Curl(t, "http://"+s.rt.Addr().String()+"/b"); out != "GET /b" {
			t.Fatalf("the next client's curl /b was answered %q (nginx's log:\n%s)", out, n.AccessLog(t))
		}
	})
	if log := n.AccessLog(t); strings.Contains(log, "/secret") {
		t.Errorf("nginx served /secret:\n%s", log)
	}
}

// framingSample is a message body framed by each framing field, with the
// field: what a test sends to name that field in Connection.
var framingSample = map[string]string{
	"Content-Length":    "Content-Length: 3\r\n\r\nabc",
	"Transfer-Encoding": "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
}

// TestConnectionNamesFramingField: for every field of the table that
// frames a message, a request whose Connection names it is refused with a
// 400 and never reaches the upstream, and a response whose Connection
// names it is answered 502 (not forwarded without its framing, which would
// leave a kept-alive client waiting for the end of a body it cannot find).
func TestConnectionNamesFramingField(t *testing.T) {
	var framing []string
	for _, f := range fieldTable {
		if f.rule == fieldFraming {
			framing = append(framing, f.name)
		}
	}
	if len(framing) == 0 {
		t.Fatal("the field table has no framing field")
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, name := range framing {
			sample, ok := framingSample[name]
			if !ok {
				t.Fatalf("no sample message framed by %s", name)
			}
			for _, conn := range []string{strings.ToLower(name), "keep-alive, " + strings.ToUpper(name)} {
				t.Run("request "+conn, func(t *testing.T) {
					up := upstreamServer(t, echoHandler)
					s := startProxy(t, b, hostPort(up), nil)
					c := pctest.Dial(t, s.rt.Addr().String())
					c.SetDeadline(time.Now().Add(10 * time.Second))
					fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nConnection: %s\r\n%s", conn, sample)
					out, _ := io.ReadAll(c)
					if !bytes.HasPrefix(out, []byte("HTTP/1.1 400 ")) {
						t.Fatalf("%q", out)
					}
					if st := s.rt.Stats(); st.Dials != 0 {
						t.Errorf("the refused request reached the upstream (%d dials)", st.Dials)
					}
				})
				t.Run("response "+conn, func(t *testing.T) {
					up := pctest.Serve(t, func(c net.Conn) {
						rd := bufio.NewReader(c)
						if _, err := http.ReadRequest(rd); err != nil {
							return
						}
						fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nConnection: %s\r\n%s", conn, sample)
						io.Copy(io.Discard, rd)
					})
					s := startProxy(t, b, up.Addr(), nil)
					resp, body := get(t, httpClient(t), "http://"+s.rt.Addr().String()+"/")
					if resp.StatusCode != 502 {
						t.Fatalf("%d %q, want 502", resp.StatusCode, body)
					}
				})
			}
		}
	})
}

// TestResponseLengthAndChunked: a response framed by both Content-Length
// and Transfer-Encoding reaches the client without the Content-Length
// (RFC 9112 6.3: Transfer-Encoding wins, and an intermediary removes the
// length before it forwards such a message).
func TestResponseLengthAndChunked(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := pctest.Serve(t, func(c net.Conn) {
			rd := bufio.NewReader(c)
			if _, err := http.ReadRequest(rd); err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
			io.Copy(io.Discard, rd)
		})
		s := startProxy(t, b, up.Addr(), nil)
		c := pctest.Dial(t, s.rt.Addr().String())
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
		out, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		head, body, _ := bytes.Cut(out, []byte("\r\n\r\n"))
		if bytes.Contains(bytes.ToLower(head), []byte("content-length")) {
			t.Errorf("the Content-Length was forwarded with the Transfer-Encoding:\n%s", head)
		}
		if !bytes.Contains(head, []byte("Transfer-Encoding: chunked")) || string(body) != "3\r\nabc\r\n0\r\n\r\n" {
			t.Errorf("%q", out)
		}
	})
}

// TestSlowClientDownload: a client that stops reading a large response for
// longer than -timeout gets all of it: the timeout measures the upstream's
// silence, and while the proxy holds the upstream back for the client it
// is the proxy that is silent, not the upstream.
func TestSlowClientDownload(t *testing.T) {
	const total = 16 << 20
	const timeout = 200 * time.Millisecond
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := upstreamServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(total))
			w.Write(bytes.Repeat([]byte("x"), total))
		})
		// -idle-timeout as short: the client sends nothing while it
		// downloads, and the proxy reads nothing from the upstream while
		// it holds it back; neither is idle.
		s := startProxy(t, b, hostPort(up), func(c *config) { c.timeout, c.idleTimeout = timeout, timeout })
		c := pctest.Dial(t, s.rt.Addr().String())
		c.SetReadBuffer(64 << 10)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		c.Write([]byte("GET /big HTTP/1.1\r\nHost: x\r\n\r\n"))
		pctest.WaitFor(t, "the proxy to hold the upstream back", func() bool { return s.rt.Stats().Pauses > 0 })
		// The stall is the stimulus, not a synchronisation: the client
		// reads nothing for several timeouts.
		time.Sleep(4 * timeout)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || n != total {
			t.Fatalf("the client got %d of %d bytes (%v)", n, total, err)
		}
	})
}

// TestIdleTimeoutOnlyWhenListening: -idle-timeout measures a client's
// silence while the proxy waits for its next request, not while the
// client waits for its response, nor while the proxy holds its upload
// back for a slow upstream; and it is not applied to upstream connections,
// whose silence -timeout measures once the request is sent.
func TestIdleTimeoutOnlyWhenListening(t *testing.T) {
	const idle = 200 * time.Millisecond
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		t.Run("slow response", func(t *testing.T) {
			up := upstreamServer(t, func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(4 * idle) // the upstream thinks: the stimulus
				io.WriteString(w, "late")
			})
			s := startProxy(t, b, hostPort(up), func(c *config) { c.idleTimeout = idle })
			if resp, body := get(t, httpClient(t), "http://"+s.rt.Addr().String()+"/"); resp.StatusCode != 200 || body != "late" {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
		})
		t.Run("upload held back", func(t *testing.T) {
			const total = 8 << 20
			release := make(chan struct{})
			up := upstreamServer(t, func(w http.ResponseWriter, r *http.Request) {
				<-release
				n, _ := io.Copy(io.Discard, r.Body)
				fmt.Fprint(w, n)
			})
			s := startProxy(t, b, hostPort(up), func(c *config) { c.idleTimeout = idle })
			c := pctest.Dial(t, s.rt.Addr().String())
			c.SetDeadline(time.Now().Add(30 * time.Second))
			wrote := make(chan error, 1)
			go func() {
				_, err := fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", total, bytes.Repeat([]byte("u"), total))
				wrote <- err
			}()
			pctest.WaitFor(t, "the proxy to hold the client back", func() bool { return s.rt.Stats().Pauses > 0 })
			time.Sleep(4 * idle) // the upstream reads nothing: the stimulus
			close(release)
			if err := pctest.Recv(t, wrote, "the upload"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != fmt.Sprint(total) {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
		})
		t.Run("idle client closed", func(t *testing.T) {
			up := upstreamServer(t, echoHandler)
			s := startProxy(t, b, hostPort(up), func(c *config) { c.idleTimeout = idle })
			c := pctest.Dial(t, s.rt.Addr().String())
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"))
			rd := bufio.NewReader(c)
			resp, err := http.ReadResponse(rd, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			// Between requests the idle timeout runs: the proxy closes
			// a client that sends nothing more.
			if n, err := rd.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("an idle kept-alive client: read %d, %v; want the close", n, err)
			}
		})
	})
}

// TestHopByHopFieldsOfTheTable: every hop-by-hop field of the table is
// removed on the way up and on the way down, named in Connection or not,
// from final and from interim (1xx) responses.
func TestHopByHopFieldsOfTheTable(t *testing.T) {
	var hop []string
	for _, f := range fieldTable {
		if f.rule == fieldHopByHop && f.name != "Connection" {
			hop = append(hop, f.name)
		}
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		got := make(chan http.Header, 1)
		up := pctest.Serve(t, func(c net.Conn) {
			rd := bufio.NewReader(c)
			req, err := http.ReadRequest(rd)
			if err != nil {
				return
			}
			got <- req.Header
			var fields string
			for _, h := range hop {
				fields += h + ": x\r\n"
			}
			fmt.Fprintf(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\nConnection: X-Interim\r\nX-Interim: 1\r\n%s\r\n", fields)
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\n%sContent-Length: 2\r\n\r\nok", fields)
			io.Copy(io.Discard, rd)
		})
		s := startProxy(t, b, up.Addr(), nil)
		c := pctest.Dial(t, s.rt.Addr().String())
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var fields string
		for _, h := range hop {
			fields += h + ": x\r\n"
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n", fields)
		out, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		reqHeader := pctest.Recv(t, got, "the upstream's request")
		for _, h := range hop {
			if _, ok := reqHeader[http.CanonicalHeaderKey(h)]; ok {
				t.Errorf("%s reached the upstream", h)
			}
			if bytes.Contains(bytes.ToLower(out), []byte("\r\n"+strings.ToLower(h)+":")) {
				t.Errorf("%s reached the client:\n%s", h, out)
			}
		}
		if !bytes.HasPrefix(out, []byte("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(out, []byte("\r\n\r\nok")) {
			t.Errorf("%q", out)
		}
	})
}

// TestRefusedMethodsAndCodings: CONNECT is refused (501) before anything
// reaches the upstream, and an HTTP/1.0 client gets no transfer coding: a
// chunked body is de-chunked, the field dropped from a response without a
// body, and a coding the proxy cannot take off answered 502.
func TestRefusedMethodsAndCodings(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := pctest.Serve(t, func(c net.Conn) {
			rd := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(rd)
				if err != nil {
					return
				}
				switch req.URL.Path {
				case "/gzip":
					c.Write([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
				default:
					c.Write([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"))
				}
			}
		})
		s := startProxy(t, b, up.Addr(), nil)
		for _, tc := range []struct{ req, want, notWant string }{
			{"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", "HTTP/1.1 501 ", ""},
			{"GET /gzip HTTP/1.0\r\n\r\n", "HTTP/1.1 502 ", ""},
			{"HEAD /h HTTP/1.0\r\n\r\n", "HTTP/1.1 200 OK\r\n", "Transfer-Encoding"},
			{"GET /c HTTP/1.0\r\n\r\n", "HTTP/1.1 200 OK\r\n", "Transfer-Encoding"},
		} {
			c := pctest.Dial(t, s.rt.Addr().String())
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write([]byte(tc.req))
			out, _ := io.ReadAll(c)
			if !bytes.HasPrefix(out, []byte(tc.want)) || (tc.notWant != "" && bytes.Contains(out, []byte(tc.notWant))) {
				t.Errorf("%q: %q", tc.req, out)
			}
		}
		if a := up.Accepted(); a == 0 {
			t.Fatal("nothing reached the upstream")
		}
	})
}
