//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/examples/internal/serverflag"
	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// tree makes the served directory, and a secret outside it.
func tree(t *testing.T) (root string, big []byte) {
	t.Helper()
	root = t.TempDir()
	outside := t.TempDir()
	big = make([]byte, 2<<20+17)
	for i := range big {
		big[i] = byte(i*13 + i>>11)
	}
	files := map[string][]byte{
		"hello.txt":       []byte("hello, world\n"),
		"big.bin":         big,
		"empty":           nil,
		"sub/index.html":  []byte("<p>index</p>"),
		"sub/deeper/x.js": []byte("x"),
	}
	for name, b := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"out":      filepath.Join(outside, "secret"),
		"outrel":   "../" + filepath.Base(outside) + "/secret",
		"outdir":   outside,
		"in-link":  "hello.txt",
		"sub/up":   "../hello.txt",
		"loop":     "loop",
		"sub/deep": "deeper",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root, big
}

// serve runs the server on root with one loop and the backend, and shuts
// it down at cleanup: small files answered from one read (the default)
// or, in eachMode's "sendfile" subtests, every file through
// Conn.SendFile.
func serve(t *testing.T, b percore.Backend, root string) string {
	t.Helper()
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	o := options{Flags: serverflag.Flags{Addr: "127.0.0.1:0", Cores: cores[:1], Backend: b}, root: root, small: 16 << 10}
	if strings.Contains(t.Name(), "/sendfile/") {
		o.small = 0
	}
	go func() { done <- run(ctx, o, pctest.QuietLogger(t), func(a net.Addr) { ready <- a }) }()
	var addr string
	select {
	case a := <-ready:
		addr = a.String()
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := pctest.Recv(t, done, "the server's shutdown"); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return addr
}

// do sends raw requests on c and reads one response per request.
func do(t *testing.T, c net.Conn, br *bufio.Reader, method string, raw string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return resp
}

func get(target string, extra ...string) string {
	return "GET " + target + " HTTP/1.1\r\nHost: t\r\n" + strings.Join(extra, "") + "\r\n"
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eachMode runs f once per backend and way of sending small files.
func eachMode(t *testing.T, f func(t *testing.T, b percore.Backend)) {
	for _, mode := range []string{"read", "sendfile"} {
		t.Run(mode, func(t *testing.T) {
			pctest.EachBackend(t, f)
		})
	}
}

func TestStatuses(t *testing.T) {
	eachMode(t, func(t *testing.T, b percore.Backend) {
		root, big := tree(t)
		addr := serve(t, b, root)
		c := pctest.Dial(t, addr)
		br := bufio.NewReader(c)
		n := strconv.Itoa(len(big))
		tests := []struct {
			name, method, raw string
			status            int
			body              string // "" with check nil: empty
			header            map[string]string
		}{
			{"a file", "GET", get("/hello.txt"), 200, "hello, world\n",
				map[string]string{"Content-Length": "13", "Content-Type": "text/plain; charset=utf-8", "Accept-Ranges": "bytes"}},
			{"HEAD", "HEAD", "HEAD /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n", 200, "", map[string]string{"Content-Length": "13"}},
			{"an empty file", "GET", get("/empty"), 200, "", map[string]string{"Content-Length": "0"}},
			{"a directory's index", "GET", get("/sub/"), 200, "<p>index</p>", nil},
			{"a directory", "GET", get("/sub"), 403, "403 Forbidden\n", nil},
			{"missing", "GET", get("/nope"), 404, "404 Not Found\n", nil},
			{"a file as a directory", "GET", get("/hello.txt/x"), 404, "404 Not Found\n", nil},
			{"a range", "GET", get("/hello.txt", "Range: bytes=0-4\r\n"), 206, "hello",
				map[string]string{"Content-Range": "bytes 0-4/13", "Content-Length": "5"}},
			{"a range at the end", "GET", get("/big.bin", "Range: bytes=-3\r\n"), 206, string(big[len(big)-3:]),
				map[string]string{"Content-Range": "bytes " + strconv.Itoa(len(big)-3) + "-" + strconv.Itoa(len(big)-1) + "/" + n}},
			{"an open range to the end", "GET", get("/hello.txt", "Range: bytes=7-\r\n"), 206, "world\n", nil},
			{"a range past the end", "GET", get("/hello.txt", "Range: bytes=13-\r\n"), 416, "",
				map[string]string{"Content-Range": "bytes */13"}},
			{"a range beyond the size, clipped", "GET", get("/hello.txt", "Range: bytes=10-99\r\n"), 206, "ld\n", nil},
			{"several ranges, ignored", "GET", get("/hello.txt", "Range: bytes=0-1,3-4\r\n"), 200, "hello, world\n", nil},
			{"another method", "POST", "POST /hello.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi", 405, "405 Method Not Allowed\n",
				map[string]string{"Allow": "GET, HEAD"}},
			{"a link inside", "GET", get("/in-link"), 200, "hello, world\n", nil},
			{"a link up, still inside", "GET", get("/sub/up"), 200, "hello, world\n", nil},
			{"a link loop", "GET", get("/loop"), 403, "403 Forbidden\n", nil},
		}
		for _, tc := range tests {
			r := do(t, c, br, tc.method, tc.raw)
			got := body(t, r)
			if r.StatusCode != tc.status || got != tc.body {
				t.Errorf("%s: %d %q, want %d %q", tc.name, r.StatusCode, got, tc.status, tc.body)
			}
			for k, v := range tc.header {
				if r.Header.Get(k) != v {
					t.Errorf("%s: %s: %q, want %q", tc.name, k, r.Header.Get(k), v)
				}
			}
		}
		// The whole large file, still on the same connection.
		r := do(t, c, br, "GET", get("/big.bin"))
		if got := body(t, r); r.StatusCode != 200 || got != string(big) {
			t.Errorf("big.bin: %d, %d bytes (equal %v)", r.StatusCode, len(got), got == string(big))
		}
	})
}

// TestPathEscapes asks for names outside the root in every way this test
// knows, and for a few that look odd but stay inside.
func TestPathEscapes(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		root, _ := tree(t)
		addr := serve(t, b, root)
		tests := []struct {
			target string
			status int
		}{
			{"/../secret", 403},
			{"/sub/../../secret", 403},
			{"/%2e%2e/secret", 403},
			{"/%2E%2E%2Fsecret", 403},
			{"/sub/%2e%2e/%2e%2e/etc/passwd", 403},
			{"/out", 403},
			{"/outrel", 403},
			{"/outdir/secret", 403},
			{"//etc/passwd", 404}, // a name beneath the root, which has none
			{"/a%00b", 400},
			{"/hello.txt%00.html", 400},
			{"/%zz", 400},
			{"/%4", 400},
			{"*", 400},
			{"/./hello.txt", 200},
			{"/sub//deeper/x.js", 200},
			{"/sub/deep/x.js", 200},
			{"/hello.txt?x=../../secret", 200},
			{"/%68ello.txt", 200},
		}
		for _, tc := range tests {
			c := pctest.Dial(t, addr)
			r := do(t, c, bufio.NewReader(c), "GET", get(tc.target))
			got := body(t, r)
			if r.StatusCode != tc.status || strings.Contains(got, "secret") {
				t.Errorf("GET %s: %d %q, want %d", tc.target, r.StatusCode, got, tc.status)
			}
			c.Close()
		}
	})
}

// TestKeepAlive pipelines requests in one write, and checks that
// Connection: close closes after its response, and that a malformed
// request gets 400 and a close.
func TestKeepAlive(t *testing.T) {
	eachMode(t, func(t *testing.T, b percore.Backend) {
		root, big := tree(t)
		addr := serve(t, b, root)
		c := pctest.Dial(t, addr)
		br := bufio.NewReader(c)
		if _, err := io.WriteString(c, get("/hello.txt")+get("/big.bin")+get("/nope")+get("/hello.txt", "Connection: close\r\n")); err != nil {
			t.Fatal(err)
		}
		want := []struct {
			status int
			body   string
		}{{200, "hello, world\n"}, {200, string(big)}, {404, "404 Not Found\n"}, {200, "hello, world\n"}}
		for i, w := range want {
			r, err := http.ReadResponse(br, &http.Request{Method: "GET"})
			if err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
			if got := body(t, r); r.StatusCode != w.status || got != w.body {
				t.Errorf("response %d: %d, %d bytes; want %d, %d", i, r.StatusCode, len(got), w.status, len(w.body))
			}
		}
		if n, err := br.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("after Connection: close: read %d, %v; want EOF", n, err)
		}
		c2 := pctest.Dial(t, addr)
		io.WriteString(c2, "GET /hello.txt HTTP/1.1\r\nHost: t\r\nBad Header: x\r\n\r\n")
		r, err := http.ReadResponse(bufio.NewReader(c2), &http.Request{Method: "GET"})
		if err != nil || r.StatusCode != 400 {
			t.Fatalf("a malformed request: %v, %v", r, err)
		}
	})
}

// TestDisconnectMidFile has clients leave in the middle of a large file:
// the server goes on serving, and once it stops every descriptor (sockets,
// files, pipes) is back to the baseline.
func TestDisconnectMidFile(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		root, _ := tree(t)
		huge := make([]byte, 48<<20)
		if err := os.WriteFile(filepath.Join(root, "huge"), huge, 0o644); err != nil {
			t.Fatal(err)
		}
		baseline := leakcheck.OpenFDs()
		t.Run("serve", func(t *testing.T) {
			addr := serve(t, b, root)
			for range 4 {
				c := pctest.Dial(t, addr)
				io.WriteString(c, get("/huge"))
				if _, err := io.ReadFull(c, make([]byte, 256<<10)); err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			c := pctest.Dial(t, addr)
			r := do(t, c, bufio.NewReader(c), "GET", get("/hello.txt"))
			if got := body(t, r); r.StatusCode != 200 || got != "hello, world\n" {
				t.Errorf("after the disconnects: %d %q", r.StatusCode, got)
			}
		})
		if err := leakcheck.Check(baseline, 1<<30, 10*time.Second); err != nil {
			t.Error(err)
		}
	})
}

// TestCurl checks the server with curl, as a user would.
func TestCurl(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		root, big := tree(t)
		addr := serve(t, b, root)
		base := "http://" + addr
		run := func(args ...string) string { return pctest.Curl(t, args...) }
		if got := run(base + "/hello.txt"); got != "hello, world\n" {
			t.Errorf("curl GET: %q", got)
		}
		if got := run("-r", "7-11", base+"/hello.txt"); got != "world" {
			t.Errorf("curl -r 7-11: %q", got)
		}
		if got := run("--path-as-is", "-w", "%{http_code} %{size_download} ",
			"-o", "/dev/null", base+"/big.bin", "-o", "/dev/null", base+"/nope", "-o", "/dev/null", base+"/../secret"); got != fmt.Sprintf("200 %d 404 14 403 14 ", len(big)) {
			t.Errorf("curl, three URLs on one connection: %q", got)
		}
		if got := run("-I", base+"/hello.txt"); !strings.Contains(got, "Content-Length: 13") || !strings.HasPrefix(got, "HTTP/1.1 200 OK") {
			t.Errorf("curl -I: %q", got)
		}
		if !bytes.Equal([]byte(run(base+"/big.bin")), big) {
			t.Error("curl: big.bin differs")
		}
	})
}
