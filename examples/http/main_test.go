//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/internal/rawconn"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/httpd"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func startServer(t *testing.T, b percore.Backend, mod func(*config)) *running {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	cfg := config{rt: percore.Config{Addr: "127.0.0.1:0", Cores: []int{0}, Backend: b, Logger: logger},
		srv: httpd.Config{HeadTimeout: 10 * time.Second, Limits: http1.Limits{MaxBody: 1 << 20}, Logger: logger}}
	if mod != nil {
		mod(&cfg)
	}
	r, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	return r
}

func client(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func TestEndpoints(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startServer(t, b, nil)
		base := "http://" + r.rt.Addr().String()
		cl := client(t)
		for _, tc := range []struct {
			method, path string
			status       int
			ctype, body  string
		}{
			{"GET", "/plaintext", 200, "text/plain", "Hello, World!"},
			{"GET", "/plaintext?x=1", 200, "text/plain", "Hello, World!"},
			{"HEAD", "/plaintext", 200, "text/plain", ""},
			{"GET", "/json", 200, "application/json", `{"message":"Hello, World!"}`},
			{"GET", "/nope", 404, "text/plain", "404 Not Found\n"},
			{"DELETE", "/plaintext", 405, "text/plain", "405 Method Not Allowed\n"},
			{"GET", "/echo", 405, "text/plain", "405 Method Not Allowed\n"},
		} {
			req, _ := http.NewRequest(tc.method, base+tc.path, nil)
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tc.status || string(body) != tc.body || resp.Header.Get("Content-Type") != tc.ctype {
				t.Fatalf("%s %s: %d %q %q %v", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
			}
			if resp.Header.Get("Server") != "percore" {
				t.Errorf("%s %s: Server %q", tc.method, tc.path, resp.Header.Get("Server"))
			}
			if d, err := http.ParseTime(resp.Header.Get("Date")); err != nil || time.Since(d).Abs() > time.Hour {
				t.Errorf("%s %s: Date %q: %v", tc.method, tc.path, resp.Header.Get("Date"), err)
			}
			if tc.method == "HEAD" && resp.ContentLength != 13 {
				t.Errorf("HEAD: Content-Length %d", resp.ContentLength)
			}
			if tc.status == 405 && resp.Header.Get("Allow") == "" {
				t.Errorf("405 without Allow")
			}
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(`{"message":"Hello, World!"}`), &m); err != nil || m["message"] != "Hello, World!" {
			t.Fatal(m, err)
		}
		if st := r.rt.Stats(); st.Accepts != 1 {
			t.Errorf("%d connections for keep-alive requests, want 1", st.Accepts)
		}
	})
}

func TestJSONEscapes(t *testing.T) {
	for _, s := range []string{"Hello, World!", `q"b\s`, "<a&b>\n\x01"} {
		var m map[string]string
		b := appendJSONMessage(nil, s)
		if err := json.Unmarshal(b, &m); err != nil || m["message"] != s {
			t.Errorf("%q: %s %v", s, b, err)
		}
		want, _ := json.Marshal(map[string]string{"message": s})
		if !bytes.Equal(b, want) {
			t.Errorf("%q: %s, encoding/json %s", s, b, want)
		}
	}
}

// readResponses reads n responses from r and returns their bodies.
func readResponses(t *testing.T, r *bufio.Reader, n int) []*http.Response {
	t.Helper()
	var out []*http.Response
	for i := range n {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d body: %v", i, err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		out = append(out, resp)
	}
	return out
}

func body(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestPipelining(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startServer(t, b, nil)
		c := pctest.Dial(t, r.rt.Addr().String())
		c.SetDeadline(time.Now().Add(20 * time.Second))
		var reqs []byte
		for i := range 16 {
			switch i % 3 {
			case 0:
				reqs = append(reqs, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"...)
			case 1:
				reqs = append(reqs, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nabcde"...)
			case 2:
				reqs = append(reqs, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxy\r\n1\r\nz\r\n0\r\n\r\n"...)
			}
		}
		// Cut at every 7th byte: heads, chunk lines and bodies across reads.
		for off := 0; off < len(reqs); off += 7 {
			if _, err := c.Write(reqs[off:min(off+7, len(reqs))]); err != nil {
				t.Fatal(err)
			}
		}
		rd := bufio.NewReader(c)
		for i, resp := range readResponses(t, rd, 16) {
			want := []string{"Hello, World!", "abcde", "xyz"}[i%3]
			if got := body(resp); resp.StatusCode != 200 || got != want {
				t.Fatalf("response %d: %d %q, want %q", i, resp.StatusCode, got, want)
			}
		}
		// Connection: close is honoured, and said.
		if _, err := c.Write([]byte("GET /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp := readResponses(t, rd, 1)[0]
		if !resp.Close {
			t.Fatal("no Connection: close")
		}
		if n, err := rd.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("after Connection: close: %d bytes, %v", n, err)
		}
	})
}

func TestEchoStreams(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startServer(t, b, nil)
		url := "http://" + r.rt.Addr().String() + "/echo"
		cl := client(t)
		payload := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640 KB: many reads
		// With a Content-Length.
		resp, err := cl.Post(url, "application/octet-stream", bytes.NewReader(payload))
		if err != nil {
			t.Fatal(err)
		}
		if got := body(resp); resp.StatusCode != 200 || got != string(payload) || resp.ContentLength != int64(len(payload)) {
			t.Fatalf("%d: %d bytes (Content-Length %d)", resp.StatusCode, len(got), resp.ContentLength)
		}
		resp.Body.Close()
		// Chunked: the client streams from a pipe, and reads the echo of
		// its first part before it sends the rest (the body is not held
		// whole before it is answered).
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", url, pr)
		done := make(chan *http.Response, 1)
		errs := make(chan error, 1)
		go func() {
			resp, err := cl.Do(req)
			if err != nil {
				errs <- err
				return
			}
			done <- resp
		}()
		if _, err := pw.Write([]byte("first part;")); err != nil {
			t.Fatal(err)
		}
		var resp2 *http.Response
		select {
		case resp2 = <-done:
		case err := <-errs:
			t.Fatal(err)
		}
		first := make([]byte, len("first part;"))
		if _, err := io.ReadFull(resp2.Body, first); err != nil || string(first) != "first part;" {
			t.Fatalf("%q %v", first, err)
		}
		pw.Write([]byte("second"))
		pw.Close()
		rest, err := io.ReadAll(resp2.Body)
		resp2.Body.Close()
		if err != nil || string(rest) != "second" || resp2.TransferEncoding[0] != "chunked" {
			t.Fatalf("%q %v %v", rest, err, resp2.TransferEncoding)
		}
	})
}

func TestRejects(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startServer(t, b, func(c *config) { c.srv.Limits.MaxBody = 100 })
		for _, tc := range []struct {
			name, req string
			status    int
		}{
			{"CL and TE", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
			{"bare LF", "GET /plaintext HTTP/1.1\nHost: x\n\n", 400},
			{"obs-fold", "GET /plaintext HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", 400},
			{"unknown coding", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
			{"version", "GET / HTTP/3.0\r\nHost: x\r\n\r\n", 505},
			{"line too long", "GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
			{"head too large", "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X: "+strings.Repeat("v", 1000)+"\r\n", 40) + "\r\n", 431},
			{"body too large", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", 413},
			{"chunked too large", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("10\r\n0123456789abcdef\r\n", 7) + "0\r\n\r\n", 200},
			{"expectation", "GET /plaintext HTTP/1.1\r\nHost: x\r\nExpect: tea\r\n\r\n", 417},
		} {
			c := pctest.Dial(t, r.rt.Addr().String())
			c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Write([]byte(tc.req)); err != nil {
				t.Fatal(err)
			}
			out, err := io.ReadAll(c) // the server closes after a rejection
			if tc.status == 200 {
				// 112 bytes of chunks over a 100-byte limit: the echo's
				// head went out, then the connection closes, cut short.
				if !bytes.HasPrefix(out, []byte("HTTP/1.1 200 OK")) || bytes.Contains(out, []byte("0\r\n\r\n")) {
					t.Errorf("%s: %q", tc.name, out)
				}
				continue
			}
			resp, rerr := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
			if err != nil || rerr != nil || resp.StatusCode != tc.status || !resp.Close {
				t.Errorf("%s: %v %v %q", tc.name, err, rerr, out)
			}
		}
	})
}

// A rejection of a large head (414, 431) arrives whole, followed by the
// end of the stream, while the client is still sending its head: the
// server shuts its write side down and discards the rest (a lingering
// close), on both backends, instead of closing with input unread, which
// reset the connection on epoll.
func TestLargeHeadRejectionArrives(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startServer(t, b, nil)
		for _, tc := range []struct {
			name   string
			head   string
			status string
		}{
			{"line too long", "GET /" + strings.Repeat("a", 100<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 414 "},
			{"head too large", "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X: "+strings.Repeat("v", 1000)+"\r\n", 100) + "\r\n", "HTTP/1.1 431 "},
		} {
			for range 3 {
				c := pctest.Dial(t, r.rt.Addr().String())
				wrote := make(chan error, 1)
				go func() {
					// In pieces, as a client on a network sends it: the
					// answer comes while most of it is still to go.
					var err error
					for p := []byte(tc.head); len(p) > 0 && err == nil; p = p[min(len(p), 8<<10):] {
						_, err = c.Write(p[:min(len(p), 8<<10)])
					}
					c.CloseWrite()
					wrote <- err
				}()
				out, err := io.ReadAll(c)
				if err != nil || !bytes.HasPrefix(out, []byte(tc.status)) {
					t.Fatalf("%s: read %q, %v; want %q..., then the end of the stream", tc.name, out[:min(len(out), 60)], err, tc.status)
				}
				if err := pctest.Recv(t, wrote, "the client's writes"); err != nil {
					t.Fatalf("%s: the client's writes after the answer: %v", tc.name, err)
				}
			}
		}
	})
}

func TestHeadTimeout(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startServer(t, b, func(c *config) { c.srv.HeadTimeout = 200 * time.Millisecond })
		c := pctest.Dial(t, r.rt.Addr().String())
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write([]byte("GET /plaintext HTTP/1.1\r\nHost: x\r\n")); err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(c)
		if !bytes.HasPrefix(out, []byte("HTTP/1.1 408 Request Timeout\r\n")) {
			t.Fatalf("%q", out)
		}
	})
}

// TestGracefulShutdown: a request in flight when Shutdown begins is
// answered, with Connection: close, and then Shutdown returns; new
// connections are refused meanwhile.
func TestGracefulShutdown(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startServer(t, b, nil)
		addr := r.rt.Addr().String()
		c := pctest.Dial(t, addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		req := []byte("GET /sleep?ms=300 HTTP/1.1\r\nHost: x\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		// The loop publishes its counters after the turn that handled
		// the read: then the request is in flight.
		pctest.WaitFor(t, "the request to be read", func() bool { return r.rt.Stats().BytesIn >= uint64(len(req)) })
		shut := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			shut <- r.rt.Shutdown(ctx)
		}()
		pctest.WaitFor(t, "new connections to be refused", func() bool {
			nc, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				nc.Close()
			}
			return err != nil
		})
		rd := bufio.NewReader(c)
		resp := readResponses(t, rd, 1)[0]
		if resp.StatusCode != 200 || body(resp) != "slept\n" || !resp.Close {
			t.Fatalf("%d %v", resp.StatusCode, resp.Close)
		}
		if _, err := rd.ReadByte(); err != io.EOF {
			t.Fatalf("after the last response: %v", err)
		}
		if err := pctest.Recv(t, shut, "Shutdown"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPlaintextAllocs: a keep-alive plaintext request and its response
// allocate nothing on the server, on either backend.
func TestPlaintextAllocs(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startServer(t, b, nil)
		// rawconn reads back as many bytes as it sent: pad the request to
		// the length of its response.
		resp := len("HTTP/1.1 200 OK\r\nServer: percore\r\nDate: Tue, 01 Dec 2026 12:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!")
		req := "GET /plaintext HTTP/1.1\r\nHost: x\r\nX-Pad: \r\n\r\n"
		req = strings.Replace(req, "X-Pad: ", "X-Pad: "+strings.Repeat("p", resp-len(req)), 1)
		c := rawconn.Dial(t, r.rt.Addr())
		allocs := c.PipelineAllocs(t, []byte(req), 1000)
		if allocs != 0 {
			t.Fatalf("%v allocations per round, want 0", allocs)
		}
	})
}

// curl runs Debian's curl with args and returns its output (stdout and
// stderr), skipping the test where curl is not installed.
func TestCurl(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startServer(t, b, nil)
		base := "http://" + r.rt.Addr().String()

		// Keep-alive: the second request reuses the first's connection.
		out := pctest.Curl(t, "-v", base+"/plaintext", base+"/json")
		if !strings.Contains(out, "Re-using existing connection") || !strings.Contains(out, "Hello, World!") ||
			!strings.Contains(out, `{"message":"Hello, World!"}`) {
			t.Fatalf("keep-alive:\n%s", out)
		}
		// HEAD.
		out = pctest.Curl(t, "-I", base+"/plaintext")
		if !strings.HasPrefix(out, "HTTP/1.1 200 OK") || !strings.Contains(out, "Content-Length: 13") || strings.Contains(out, "Hello") {
			t.Fatalf("HEAD:\n%s", out)
		}
		// A chunked upload, echoed.
		file := filepath.Join(t.TempDir(), "up")
		data := bytes.Repeat([]byte("percore chunked upload\n"), 5000)
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		out = pctest.Curl(t, "-H", "Transfer-Encoding: chunked", "--data-binary", "@"+file, base+"/echo")
		if out != string(data) {
			t.Fatalf("chunked upload: %d bytes back of %d", len(out), len(data))
		}
		// Expect: 100-continue (curl sends it for a body over 1 MiB, or
		// when asked), answered with 100 Continue before the body.
		out = pctest.Curl(t, "-v", "-H", "Expect: 100-continue", "--data-binary", "@"+file, base+"/echo")
		if !strings.Contains(out, "HTTP/1.1 100 Continue") || !strings.Contains(out, string(data[:200])) {
			t.Fatalf("100-continue:\n%.2000s", out)
		}
		// Refused expectation: the final status instead.
		out = pctest.Curl(t, "-v", "-H", "Expect: 100-continue", "--data-binary", "@"+file, base+"/plaintext")
		if strings.Contains(out, "100 Continue") || !strings.Contains(out, "HTTP/1.1 405") {
			t.Fatalf("refused 100-continue:\n%.2000s", out)
		}
	})
}
