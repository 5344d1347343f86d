//go:build linux

package httpd_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// The conformance tests check the server against clients no one here
// wrote: curl, net/http's client, wrk and h2load (docs/testing.md).

// TestCurl: HTTP/1.1 keep-alive, HTTP/1.0 with and without keep-alive,
// --data-binary uploads (sized and chunked), Expect: 100-continue granted
// and refused, HEAD.
func TestCurl(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		base := "http://" + ts.addr
		out := pctest.Curl(t, "-v", base+"/plaintext", base+"/users/9")
		if !strings.Contains(out, "Re-using existing connection") || !strings.Contains(out, "Hello, World!") ||
			!strings.Contains(out, "user 9") {
			t.Fatalf("keep-alive:\n%s", out)
		}
		out = pctest.Curl(t, "-v", "-0", base+"/plaintext", base+"/plaintext")
		if strings.Contains(out, "Re-using existing connection") || !strings.Contains(out, "< Connection: close") {
			t.Fatalf("HTTP/1.0 without keep-alive:\n%s", out)
		}
		out = pctest.Curl(t, "-v", "-0", "-H", "Connection: keep-alive", base+"/plaintext", base+"/plaintext")
		if !strings.Contains(out, "Re-using existing connection") || !strings.Contains(out, "< Connection: keep-alive") {
			t.Fatalf("HTTP/1.0 with keep-alive:\n%s", out)
		}
		out = pctest.Curl(t, "-I", base+"/plaintext")
		if !strings.HasPrefix(out, "HTTP/1.1 200 OK") || !strings.Contains(out, "Content-Length: 13") || strings.Contains(out, "Hello") {
			t.Fatalf("HEAD:\n%s", out)
		}
		file := filepath.Join(t.TempDir(), "up")
		data := bytes.Repeat([]byte("percore upload\n"), 20000) // 300 KB
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if out = pctest.Curl(t, "--data-binary", "@"+file, base+"/body"); out != "got 300000" {
			t.Fatalf("--data-binary to a Handler: %q", out)
		}
		if out = pctest.Curl(t, "--data-binary", "@"+file, base+"/echo"); out != string(data) {
			t.Fatalf("--data-binary echoed: %d bytes of %d", len(out), len(data))
		}
		out = pctest.Curl(t, "-H", "Transfer-Encoding: chunked", "--data-binary", "@"+file, base+"/echo")
		if out != string(data) {
			t.Fatalf("chunked upload echoed: %d bytes of %d", len(out), len(data))
		}
		out = pctest.Curl(t, "-v", "-H", "Expect: 100-continue", "--data-binary", "@"+file, base+"/body")
		if !strings.Contains(out, "HTTP/1.1 100 Continue") || !strings.Contains(out, "got 300000") {
			t.Fatalf("100-continue:\n%.2000s", out)
		}
		out = pctest.Curl(t, "-v", "-H", "Expect: 100-continue", "--data-binary", "@"+file, base+"/nowhere")
		if strings.Contains(out, "100 Continue") || !strings.Contains(out, "HTTP/1.1 404") || !strings.Contains(out, "< Connection: close") {
			t.Fatalf("refused 100-continue:\n%.2000s", out)
		}
	})
}

// TestNetHTTPClientFacts: behaviours net/http's own server tests check
// (ported as facts, not code), observed through net/http's client.
func TestNetHTTPClientFacts(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		base := "http://" + ts.addr
		cl := client(t)
		get := func(method, path string, body io.Reader, hdr ...string) (*http.Response, string, error) {
			t.Helper()
			req, _ := http.NewRequest(method, base+path, body)
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp, string(got), err
		}
		// A 204 has no body and no Content-Length, whatever was written.
		if resp, got, err := get("GET", "/nocontent", nil); resp.StatusCode != 204 || got != "" || err != nil ||
			resp.Header.Get("Content-Length") != "" {
			t.Errorf("204: %d %q %v %v", resp.StatusCode, got, err, resp.Header)
		}
		// A body shorter than its declared length ends the connection:
		// the client sees the body cut short.
		if _, _, err := get("GET", "/short", nil); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("short body: %v, want io.ErrUnexpectedEOF", err)
		}
		// A longer one is cut to the declared length; fields after the
		// body are dropped.
		if resp, got, err := get("GET", "/long", nil); got != "123" || err != nil || resp.Header.Get("X-Late") != "" {
			t.Errorf("long body: %q %v %v", got, err, resp.Header)
		}
		// Repeated fields stay; a value with CR LF is dropped, not split.
		resp, _, _ := get("GET", "/headers", nil)
		if v := resp.Header.Values("X-Multi"); len(v) != 2 || resp.Header.Get("X-Injected") != "" || resp.Header.Get("X-Bad") != "" {
			t.Errorf("headers: %v", resp.Header)
		}
		// Date parses, and is the server's now.
		if d, err := http.ParseTime(resp.Header.Get("Date")); err != nil || time.Since(d).Abs() > time.Hour {
			t.Errorf("Date %q: %v", resp.Header.Get("Date"), err)
		}
		// A chunked request's trailer reaches the handler.
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", base+"/trailer", pr)
		req.Trailer = http.Header{"X-Sum": nil}
		go func() {
			pw.Write([]byte("data"))
			req.Trailer.Set("X-Sum", "42")
			pw.Close()
		}()
		r2, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r2.Body)
		r2.Body.Close()
		if string(got) != "data trailer=42" {
			t.Errorf("trailer: %q", got)
		}
		// Too many header fields: 431 and a close.
		hdr := []string{}
		for i := range 120 {
			hdr = append(hdr, "X-H"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)), "v")
		}
		if resp, _, _ := get("GET", "/plaintext", nil, hdr...); resp.StatusCode != 431 || !resp.Close {
			t.Errorf("many fields: %d close %v", resp.StatusCode, resp.Close)
		}
		// The absolute form routes by its path.
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("GET http://example.com/users/5?x=y HTTP/1.1\r\nHost: example.com\r\n\r\n"))
		if got := readResponses(t, bufio.NewReader(c), 1); got[0] != "200 user 5 x=y" {
			t.Errorf("absolute form: %q", got)
		}
	})
}

// TestErrorAnswersEndCleanly: every error answer says Connection: close
// and is followed by the end of the stream, not a reset, also while the
// client is still sending what was refused (a lingering close).
func TestErrorAnswersEndCleanly(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{Limits: limits100(), HandlerTimeout: 100 * time.Millisecond})
		for _, tc := range []struct {
			name, req string
			more      int // bytes the client goes on sending after the request
			status    string
		}{
			{"line too long", "GET /" + strings.Repeat("a", 100<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n", 0, "414"},
			{"head too large", "GET / HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X: "+strings.Repeat("v", 1000)+"\r\n", 100) + "\r\n", 0, "431"},
			{"body too large, still sending", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n", 1000000, "413"},
			{"bad request", "GET /plaintext HTTP/1.1\r\nHost: x\r\nBad Field: v\r\n\r\n", 0, "400"},
			{"panic", "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n", 0, "500"},
			{"never answers", "GET /never HTTP/1.1\r\nHost: x\r\n\r\n", 0, "503"},
		} {
			c := pctest.Dial(t, ts.addr)
			c.SetDeadline(time.Now().Add(20 * time.Second))
			wrote := make(chan error, 1)
			go func() {
				var err error
				all := append([]byte(tc.req), make([]byte, tc.more)...)
				for p := all; len(p) > 0 && err == nil; p = p[min(len(p), 8<<10):] {
					_, err = c.Write(p[:min(len(p), 8<<10)])
				}
				wrote <- err
			}()
			out, err := io.ReadAll(c)
			if err != nil || !bytes.HasPrefix(out, []byte("HTTP/1.1 "+tc.status+" ")) || !bytes.Contains(out, []byte("\r\nConnection: close\r\n")) {
				t.Errorf("%s: %q, %v; want %s with Connection: close, then the end of the stream", tc.name, out[:min(len(out), 200)], err, tc.status)
			}
			if err := pctest.Recv(t, wrote, "the client's writes"); err != nil && !errors.Is(err, syscall.EPIPE) {
				t.Errorf("%s: the client's writes: %v (a reset?)", tc.name, err)
			}
		}
	})
}

// TestUpgrade: the connection is handed to the handler's protocol after a
// 101, with the bytes that followed the head; the server's state for it
// goes to the next connections (the third reuses it, while the others
// still speak their protocol and plain requests are served).
func TestUpgrade(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		for range 3 {
			upgradeOnce(t, ts)
		}
		if got := pctest.HTTPGet(t, "http://"+ts.addr+"/plaintext"); got != "Hello, World!" {
			t.Fatalf("a plain request after the upgrades: %q", got)
		}
	})
}

func upgradeOnce(t *testing.T, ts *testServer) {
	{
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhello"))
		rd := bufio.NewReader(c)
		resp, err := http.ReadResponse(rd, nil)
		if err != nil || resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "echo" || resp.Header.Get("Connection") != "Upgrade" {
			t.Fatalf("%v %v", resp, err)
		}
		c.Write([]byte(" world"))
		got := make([]byte, len("hello world"))
		if _, err := io.ReadFull(rd, got); err != nil || string(got) != "hello world" {
			t.Fatalf("%q %v", got, err)
		}
	}
}

// TestIdleTimeout: a keep-alive connection that sends nothing is closed.
func TestIdleTimeout(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{IdleTimeout: 100 * time.Millisecond})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"))
		rd := bufio.NewReader(c)
		readResponses(t, rd, 1)
		if _, err := rd.ReadByte(); err != io.EOF {
			t.Fatalf("after the idle timeout: %v, want io.EOF", err)
		}
	})
}

// TestUploadNeverRead: a client that uploads to /echo and never reads its
// answer is held back by the outbound cap: the server stops reading it
// (its writes stall), keeps serving others, and holds a bounded queue.
func TestUploadNeverRead(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		srv := httpd.New(httpd.Config{Limits: limitsNoBody()}, testMux(nil))
		t.Cleanup(srv.Close)
		rt := pctest.Start(t, percore.Config{Backend: b, MaxOutbound: 256 << 10}, srv.Handler())
		c := pctest.Dial(t, rt.Addr().String())
		c.SetReadBuffer(64 << 10)
		const total = 512 << 20
		c.Write([]byte("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 536870912\r\n\r\n"))
		chunk := make([]byte, 64<<10)
		sent := 0
		for sent < total {
			// The writes stall once the server stops reading: a write
			// that cannot finish within its deadline is the sign.
			c.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
			n, err := c.Write(chunk)
			sent += n
			if err != nil {
				break
			}
		}
		if sent >= total {
			t.Fatalf("the server read all %d bytes of a client that reads nothing", sent)
		}
		if got := pctest.HTTPGet(t, "http://"+rt.Addr().String()+"/plaintext"); got != "Hello, World!" {
			t.Fatalf("another client: %q", got)
		}
		if in := rt.Stats().BytesIn; in > 64<<20 {
			t.Fatalf("the server took %d bytes of the upload", in)
		}
	})
}

// TestWrk: wrk's keep-alive load gets only 200s, with no socket errors.
func TestWrk(t *testing.T) {
	path, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("wrk is not installed (apt-get install -y wrk; scripts/ensure-tools.sh installs it)")
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, path, "-t1", "-c16", "-d1s", "http://"+ts.addr+"/users/7?x=1").CombinedOutput()
		if err != nil {
			t.Fatalf("wrk: %v\n%s", err, out)
		}
		if bytes.Contains(out, []byte("Non-2xx")) || bytes.Contains(out, []byte("Socket errors")) ||
			!regexp.MustCompile(`\d+ requests in`).Match(out) {
			t.Fatalf("wrk:\n%s", out)
		}
	})
}

// TestH2loadPipelined: h2load --h1 pipelines 16 requests per connection;
// every one gets its 200.
func TestH2loadPipelined(t *testing.T) {
	path, err := exec.LookPath("h2load")
	if err != nil {
		t.Skip("h2load is not installed (apt-get install -y nghttp2-client; scripts/ensure-tools.sh installs it)")
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, path, "--h1", "-n", "4000", "-c", "4", "-m", "16", "http://"+ts.addr+"/plaintext").CombinedOutput()
		if err != nil {
			t.Fatalf("h2load: %v\n%s", err, out)
		}
		if !bytes.Contains(out, []byte("4000 succeeded, 0 failed, 0 errored")) || !bytes.Contains(out, []byte("status codes: 4000 2xx")) {
			t.Fatalf("h2load:\n%s", out)
		}
	})
}

// TestHTTP10UntilClose: an HTTP/1.0 client gets a body too long to hold
// without a length, then the end of the stream (no chunked coding for
// it); HEAD gets the length of what GET would send.
func TestHTTP10UntilClose(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("GET /big?n=70000 HTTP/1.0\r\n\r\n"))
		out, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		head, body, _ := bytes.Cut(out, []byte("\r\n\r\n"))
		if !bytes.Contains(head, []byte("Connection: close")) || bytes.Contains(head, []byte("chunked")) ||
			bytes.Contains(head, []byte("Content-Length")) || string(body) != string(bigBody[:70000]) {
			t.Fatalf("head %q, %d body bytes", head, len(body))
		}
		resp, _, _ := func() (*http.Response, string, error) {
			req, _ := http.NewRequest("HEAD", "http://"+ts.addr+"/big?n=70000", nil)
			resp, err := client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp, "", nil
		}()
		if resp.ContentLength != 70000 {
			t.Fatalf("HEAD: Content-Length %d, want 70000", resp.ContentLength)
		}
	})
}

// TestUpgradeReports: Upgrade reports whether the connection became the
// handler's, so that a caller can undo what it set up for a handler that
// will get no callbacks: true for an upgrade, false for a request with a
// body (answered 400, not with the 101 the handler had written, which the
// connection would not switch after) and for a second Upgrade of the same
// response.
func TestUpgradeReports(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		got := make(chan [2]bool, 1)
		m := httpd.NewMux()
		m.HandleFunc("/up", func(w *httpd.Response, r *httpd.Request) {
			w.WriteHeader(101)
			w.AddHeader("Upgrade", "echo")
			w.AddHeader("Connection", "Upgrade")
			first := w.Upgrade(rawEcho{})
			got <- [2]bool{first, w.Upgrade(rawEcho{})}
		})
		srv := httpd.New(httpd.Config{}, m)
		t.Cleanup(srv.Close)
		rt := pctest.Start(t, percore.Config{Backend: b}, srv.Handler())
		for _, tc := range []struct {
			req  string
			want [2]bool
		}{
			{"GET /up HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n", [2]bool{true, false}},
			{"POST /up HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\nContent-Length: 5\r\n\r\nhello", [2]bool{false, false}},
		} {
			c := pctest.Dial(t, rt.Addr().String())
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write([]byte(tc.req))
			if r := <-got; r != tc.want {
				t.Errorf("%q: Upgrade reported %v; want %v", tc.req[:8], r, tc.want)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || (resp.StatusCode == 101) != tc.want[0] {
				t.Errorf("%q: answered %v, %v; want 101 only for the upgrade", tc.req[:8], resp, err)
			}
			c.Close()
		}
	})
}
