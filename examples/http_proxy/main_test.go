//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func startProxy(t *testing.T, b percore.Backend, upstreams string, mod func(*config)) *server {
	t.Helper()
	cfg := config{addr: "127.0.0.1:0", upstreams: upstreams, cores: "0", backend: b.String(),
		max: 4, wait: 5 * time.Second, timeout: 10 * time.Second, maxBody: -1, maxOutbound: 256 << 10,
		logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&cfg)
	}
	s, err := start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

// upstreamServer is a net/http server on loopback: the upstream.
func upstreamServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = nil
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func hostPort(srv *httptest.Server) string { return strings.TrimPrefix(srv.URL, "http://") }

// echoHandler answers with the request's method, path and body, and the
// headers it got as X-Got-* fields.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Got-Xff", r.Header.Get("X-Forwarded-For"))
	w.Header().Set("X-Got-Hop", r.Header.Get("X-Hop")+"|"+r.Header.Get("Keep-Alive")+"|"+r.Header.Get("Connection"))
	w.Header().Set("X-Got-Expect", r.Header.Get("Expect"))
	w.Header().Set("Connection", "keep-alive, X-Secret")
	w.Header().Set("X-Secret", "hop")
	body, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), body)
}

func httpClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func get(t *testing.T, cl *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s body: %v", url, err)
	}
	return resp, string(body)
}

func TestForwards(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := upstreamServer(t, echoHandler)
		s := startProxy(t, b, hostPort(up), nil)
		base := "http://" + s.rt.Addr().String()
		cl := httpClient(t)
		for i := range 20 {
			req, _ := http.NewRequest("POST", base+fmt.Sprintf("/p/%d?q=1", i), strings.NewReader("body"))
			req.Header.Set("X-Forwarded-For", "10.0.0.1")
			req.Header.Set("Connection", "X-Hop")
			req.Header.Set("X-Hop", "secret")
			req.Header.Set("Keep-Alive", "timeout=5")
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("POST /p/%d?q=1 body", i); string(body) != want || resp.StatusCode != 200 {
				t.Fatalf("%d %q, want %q", resp.StatusCode, body, want)
			}
			if got := resp.Header.Get("X-Got-Xff"); got != "10.0.0.1, 127.0.0.1" {
				t.Errorf("X-Forwarded-For upstream: %q", got)
			}
			if got := resp.Header.Get("X-Got-Hop"); got != "||" {
				t.Errorf("hop-by-hop fields reached the upstream: %q", got)
			}
			if resp.Header.Get("X-Secret") != "" || resp.Header.Get("Keep-Alive") != "" {
				t.Errorf("hop-by-hop fields reached the client: %v", resp.Header)
			}
		}
		if st := s.rt.Stats(); st.Accepts != 1 || st.Dials != 1 {
			t.Errorf("%d client and %d upstream connections for 20 keep-alive requests, want 1 and 1", st.Accepts, st.Dials)
		}
	})
}

// TestPipelinedInOrder: pipelined requests, with bodies, cut across writes,
// get their responses in order.
func TestPipelinedInOrder(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := upstreamServer(t, echoHandler)
		s := startProxy(t, b, hostPort(up), nil)
		c := pctest.Dial(t, s.rt.Addr().String())
		c.SetDeadline(time.Now().Add(20 * time.Second))
		var reqs []byte
		for i := range 10 {
			if i%2 == 0 {
				reqs = fmt.Appendf(reqs, "GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
			} else {
				reqs = fmt.Appendf(reqs, "PUT /%d HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", i)
			}
		}
		for off := 0; off < len(reqs); off += 11 {
			if _, err := c.Write(reqs[off:min(off+11, len(reqs))]); err != nil {
				t.Fatal(err)
			}
		}
		rd := bufio.NewReader(c)
		for i := range 10 {
			resp, err := http.ReadResponse(rd, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			want := fmt.Sprintf("GET /%d ", i)
			if i%2 == 1 {
				want = fmt.Sprintf("PUT /%d abc", i)
			}
			if string(body) != want {
				t.Fatalf("response %d: %q, want %q", i, body, want)
			}
		}
	})
}

func TestUpstreamKilledAndRestarted(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		srv := &http.Server{Handler: http.HandlerFunc(echoHandler)}
		go srv.Serve(ln)
		s := startProxy(t, b, addr, nil)
		base := "http://" + s.rt.Addr().String()
		cl := httpClient(t)
		if resp, body := get(t, cl, base+"/a"); resp.StatusCode != 200 || body != "GET /a " {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		// Killed: its pooled connection closes, new ones are refused.
		srv.Close()
		for range 3 {
			if resp, body := get(t, cl, base+"/b"); resp.StatusCode != 502 {
				t.Fatalf("with the upstream down: %d %q", resp.StatusCode, body)
			}
		}
		// Restarted on the same address: served again.
		ln2, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		srv2 := &http.Server{Handler: http.HandlerFunc(echoHandler)}
		go srv2.Serve(ln2)
		t.Cleanup(func() { srv2.Close() })
		for range 3 {
			if resp, body := get(t, cl, base+"/c"); resp.StatusCode != 200 || body != "GET /c " {
				t.Fatalf("after the restart: %d %q", resp.StatusCode, body)
			}
		}
	})
}

// TestUpstreamClosesMidResponse: the client is cut off (it cannot get a
// whole response), and the broken connection is not lent again.
func TestUpstreamClosesMidResponse(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		var n atomic.Int32
		up := pctest.Serve(t, func(c net.Conn) {
			rd := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(rd)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				if n.Add(1) == 1 {
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ncut short"))
					c.Close()
					return
				}
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			}
		})
		s := startProxy(t, b, up.Addr(), nil)
		base := "http://" + s.rt.Addr().String()
		cl := httpClient(t)
		if resp, err := cl.Get(base + "/1"); err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				t.Fatal("a response cut short upstream reached the client whole")
			}
		}
		if resp, body := get(t, cl, base+"/2"); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		if a := up.Accepted(); a != 2 {
			t.Errorf("%d upstream connections, want 2 (the broken one not reused)", a)
		}
	})
}

func TestUpstreamFrozen(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := pctest.Serve(t, func(c net.Conn) { io.Copy(io.Discard, c) }) // reads, never answers
		s := startProxy(t, b, up.Addr(), func(c *config) { c.timeout = 300 * time.Millisecond })
		cl := httpClient(t)
		for range 2 {
			if resp, body := get(t, cl, "http://"+s.rt.Addr().String()+"/"); resp.StatusCode != 504 {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
		}
		if a := up.Accepted(); a != 2 {
			t.Errorf("%d upstream connections, want 2 (a timed-out one is not reused)", a)
		}
	})
}

func TestUpstreamGarbage(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := pctest.Serve(t, func(c net.Conn) {
			bufio.NewReader(c).ReadString('\n')
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx"))
		})
		s := startProxy(t, b, up.Addr(), nil)
		if resp, body := get(t, httpClient(t), "http://"+s.rt.Addr().String()+"/"); resp.StatusCode != 502 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
}

// TestSlowUpload: a client that uploads slowly has its body streamed: the
// upstream reads the first part before the client sends the second.
func TestSlowUpload(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		firstSeen := make(chan string, 1)
		up := upstreamServer(t, func(w http.ResponseWriter, r *http.Request) {
			buf := make([]byte, 5)
			if _, err := io.ReadFull(r.Body, buf); err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			firstSeen <- string(buf)
			rest, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s+%s", buf, rest)
		})
		s := startProxy(t, b, hostPort(up), nil)
		c := pctest.Dial(t, s.rt.Addr().String())
		c.SetDeadline(time.Now().Add(20 * time.Second))
		c.Write([]byte("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nfirst"))
		if got := pctest.Recv(t, firstSeen, "the upstream to read the first part"); got != "first" {
			t.Fatalf("%q", got)
		}
		c.Write([]byte("later"))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "first+later" {
			t.Fatalf("%q", body)
		}
	})
}

// TestHugeBodySlowClient: an upstream sends 64 MiB to a client that does
// not read: the proxy stops reading the upstream, its memory stays bounded,
// and once the client reads, every byte arrives.
func TestHugeBodySlowClient(t *testing.T) {
	const total = 64 << 20
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		var written atomic.Int64
		up := upstreamServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(total))
			chunk := make([]byte, 64<<10)
			for i := range chunk {
				chunk[i] = byte(i % 251)
			}
			for written.Load() < total {
				n, err := w.Write(chunk)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
		})
		s := startProxy(t, b, hostPort(up), nil)
		c := pctest.Dial(t, s.rt.Addr().String())
		c.SetDeadline(time.Now().Add(60 * time.Second))
		c.Write([]byte("GET /huge HTTP/1.1\r\nHost: x\r\n\r\n"))
		pctest.WaitFor(t, "the proxy to hold the upstream back", func() bool { return s.rt.Stats().Pauses > 0 })
		// Held back: the queues of the proxy hold at most its outbound
		// cap per connection, and the upstream cannot finish.
		st := s.rt.Stats()
		if held := st.MappedBytes + st.PooledBytes; held > 4<<20 {
			t.Errorf("the proxy holds %d bytes of outbound buffers for one stalled stream", held)
		}
		if w := written.Load(); w >= total {
			t.Errorf("the upstream wrote all %d bytes to a client that reads nothing", w)
		}
		t.Logf("stalled: upstream wrote %d MiB, proxy buffers %d KiB", written.Load()>>20, (st.MappedBytes+st.PooledBytes)>>10)
		rd := bufio.NewReaderSize(c, 64<<10)
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		buf := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(buf)
			for i := range n {
				if buf[i] != byte(int((got+int64(i))%(64<<10))%251) {
					t.Fatalf("byte %d is %d", got+int64(i), buf[i])
				}
			}
			got += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("after %d bytes: %v", got, err)
			}
		}
		if got != total {
			t.Fatalf("%d bytes, want %d", got, total)
		}
	})
}

func TestRejectsBeforeForwarding(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := upstreamServer(t, echoHandler)
		s := startProxy(t, b, hostPort(up), nil)
		c := pctest.Dial(t, s.rt.Addr().String())
		c.SetDeadline(time.Now().Add(20 * time.Second))
		c.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
		out, _ := io.ReadAll(c)
		if !bytes.HasPrefix(out, []byte("HTTP/1.1 400 Bad Request\r\n")) {
			t.Fatalf("%q", out)
		}
		if st := s.rt.Stats(); st.Dials != 0 {
			t.Errorf("a rejected request reached the upstream (%d dials)", st.Dials)
		}
	})
}

func TestCurl(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := upstreamServer(t, echoHandler)
		s := startProxy(t, b, hostPort(up), nil)
		base := "http://" + s.rt.Addr().String()
		out := pctest.Curl(t, "-v", base+"/one", base+"/two")
		if !strings.Contains(out, "Re-using existing connection") || !strings.Contains(out, "GET /one") || !strings.Contains(out, "GET /two") {
			t.Fatalf("keep-alive:\n%s", out)
		}
		out = pctest.Curl(t, "-I", base+"/h")
		if !strings.HasPrefix(out, "HTTP/1.1 200 OK") || strings.Contains(out, "GET /h") {
			t.Fatalf("HEAD:\n%s", out)
		}
		file := filepath.Join(t.TempDir(), "up")
		data := bytes.Repeat([]byte("chunked through the proxy\n"), 4000)
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		out = pctest.Curl(t, "-H", "Transfer-Encoding: chunked", "--data-binary", "@"+file, base+"/c")
		if out != "POST /c "+string(data) {
			t.Fatalf("chunked upload: %d bytes back", len(out))
		}
		out = pctest.Curl(t, "-v", "-H", "Expect: 100-continue", "--data-binary", "@"+file, base+"/e")
		if !strings.Contains(out, "HTTP/1.1 100 Continue") || !strings.Contains(out, "POST /e chunked") {
			t.Fatalf("100-continue:\n%.2000s", out)
		}
		if strings.Contains(out, "X-Got-Expect: 100-continue") {
			t.Errorf("Expect reached the upstream")
		}
	})
}

// TestHTTP10ClientChunkedUpstream: a chunked response reaches an HTTP/1.0
// client as its data alone, delimited by the close.
func TestHTTP10ClientChunkedUpstream(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := pctest.Serve(t, func(c net.Conn) {
			rd := bufio.NewReader(c)
			req, err := http.ReadRequest(rd)
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" +
				"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Host: " + req.Host + "\r\n\r\n4\r\nabcd\r\n2\r\nef\r\n0\r\n\r\n"))
		})
		s := startProxy(t, b, up.Addr(), nil)
		c := pctest.Dial(t, s.rt.Addr().String())
		c.SetDeadline(time.Now().Add(20 * time.Second))
		c.Write([]byte("GET /old HTTP/1.0\r\n\r\n"))
		out, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "abcdef" || len(resp.TransferEncoding) != 0 ||
			resp.Header.Get("X-Host") != up.Addr() || bytes.Contains(out, []byte("103")) {
			t.Fatalf("%q", out)
		}
	})
}

// TestHugeUploadSlowUpstream: a client uploads 64 MiB to an upstream that
// does not read yet: the proxy stops reading the client, its memory stays
// bounded, and once the upstream reads, every byte arrives.
func TestHugeUploadSlowUpstream(t *testing.T) {
	const total = 64 << 20
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		release := make(chan struct{})
		got := make(chan int64, 1)
		up := upstreamServer(t, func(w http.ResponseWriter, r *http.Request) {
			<-release
			var n int64
			buf := make([]byte, 64<<10)
			for {
				k, err := r.Body.Read(buf)
				for i, v := range buf[:k] {
					if v != byte((n+int64(i))%253) {
						http.Error(w, "corrupt", 500)
						got <- -1
						return
					}
				}
				n += int64(k)
				if err != nil {
					break
				}
			}
			got <- n
			fmt.Fprintf(w, "%d", n)
		})
		s := startProxy(t, b, hostPort(up), nil)
		c := pctest.Dial(t, s.rt.Addr().String())
		c.SetDeadline(time.Now().Add(60 * time.Second))
		var sent atomic.Int64
		wrote := make(chan error, 1)
		go func() {
			if _, err := fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", total); err != nil {
				wrote <- err
				return
			}
			// The pattern repeats every 253 bytes, so one chunk whose length
			// is a multiple of 253 serves every write (filling it per write,
			// byte by byte under -race, took most of the test's time).
			chunk := make([]byte, 253*256)
			for i := range chunk {
				chunk[i] = byte(i % 253)
			}
			for off := int64(0); off < total; {
				p := chunk
				if rest := total - off; rest < int64(len(p)) {
					p = p[:rest]
				}
				n, err := c.Write(p)
				off += int64(n)
				sent.Add(int64(n))
				if err != nil {
					wrote <- err
					return
				}
			}
			wrote <- nil
		}()
		pctest.WaitFor(t, "the proxy to hold the client back", func() bool { return s.rt.Stats().Pauses > 0 })
		st := s.rt.Stats()
		if held := st.MappedBytes + st.PooledBytes; held > 4<<20 {
			t.Errorf("the proxy holds %d bytes of outbound buffers for one stalled upload", held)
		}
		if n := sent.Load(); n >= total {
			t.Errorf("the client sent all %d bytes to an upstream that reads nothing", n)
		}
		t.Logf("stalled: client sent %d MiB, proxy buffers %d KiB", sent.Load()>>20, (st.MappedBytes+st.PooledBytes)>>10)
		close(release)
		if err := pctest.Recv(t, wrote, "the upload"); err != nil {
			t.Fatal(err)
		}
		if n := pctest.Recv(t, got, "the upstream's count"); n != total {
			t.Fatalf("the upstream read %d bytes, want %d", n, total)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != fmt.Sprint(total) {
			t.Fatalf("%q", body)
		}
	})
}

// TestKeepAliveRace: an upstream closes a kept-alive connection as the
// next request arrives on it, answering nothing: an idempotent request
// without a body is sent again once, on a new connection; a POST gets 502.
func TestKeepAliveRace(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := pctest.Serve(t, func(c net.Conn) {
			rd := bufio.NewReader(c)
			for i := 0; ; i++ {
				req, err := http.ReadRequest(rd)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				if i == 1 {
					return // the second request on a connection: closed unanswered
				}
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
			}
		})
		s := startProxy(t, b, up.Addr(), func(c *config) { c.max = 1 })
		base := "http://" + s.rt.Addr().String()
		cl := httpClient(t)
		for i := range 3 {
			if resp, body := get(t, cl, base+"/"); resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("GET %d: %d %q", i, resp.StatusCode, body)
			}
		}
		if a := up.Accepted(); a != 3 {
			t.Errorf("%d upstream connections, want 3 (each second request sent again on a new one)", a)
		}
		resp, err := cl.Post(base+"/", "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 502 {
			t.Fatalf("POST on a connection closed unanswered: %d, want 502", resp.StatusCode)
		}
	})
}
