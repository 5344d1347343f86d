//go:build linux

package httpd_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
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

// echo is a StreamHandler: the body back as it arrives.
type echo struct{}

func (echo) ServeHTTP(w *httpd.Response, r *httpd.Request) {
	w.AddHeader("Content-Type", "application/octet-stream")
	if n := r.ContentLength(); n >= 0 {
		w.ContentLength(n)
	}
}
func (echo) OnBody(w *httpd.Response, r *httpd.Request, p []byte) { w.Write(p) }
func (echo) OnEnd(w *httpd.Response, r *httpd.Request)            {}

type testServer struct {
	srv  *httpd.Server
	rt   *percore.Runtime
	addr string
}

// testMux is the routes the tests use.
func testMux(srv **httpd.Server) *httpd.Mux {
	if srv == nil {
		srv = new(*httpd.Server)
	}
	m := httpd.NewMux()
	m.HandleFunc("GET /plaintext", func(w *httpd.Response, r *httpd.Request) {
		w.AddHeader("Content-Type", "text/plain")
		w.WriteString("Hello, World!")
	})
	m.HandleFunc("GET /plaintext/send", func(w *httpd.Response, r *httpd.Request) { w.Send(plainHead, hello) })
	m.HandleFunc("GET /users/{id}", func(w *httpd.Response, r *httpd.Request) {
		w.AddHeader("Content-Type", "text/plain")
		w.WriteString("user ")
		w.Write(r.PathValue("id"))
		if v, ok := r.Query("x"); ok {
			w.WriteString(" x=")
			w.Write(v)
		}
	})
	m.HandleFunc("POST /body", func(w *httpd.Response, r *httpd.Request) {
		w.WriteString("got ")
		w.WriteString(strconv.Itoa(len(r.Body())))
	})
	m.Handle("POST /echo", echo{})
	m.HandleFunc("GET /files/{path...}", func(w *httpd.Response, r *httpd.Request) {
		w.Write(r.PathValue("path"))
	})
	m.HandleFunc("/exact/{$}", func(w *httpd.Response, r *httpd.Request) { w.WriteString("exact") })
	m.HandleFunc("/tree/", func(w *httpd.Response, r *httpd.Request) { w.WriteString("tree") })
	m.HandleFunc("GET /sleep", func(w *httpd.Response, r *httpd.Request) {
		ms, _ := r.Query("ms")
		d, _ := strconv.Atoi(string(ms))
		(*srv).Go(w, func(ctx context.Context) func(*httpd.Response) {
			select {
			case <-time.After(time.Duration(d) * time.Millisecond):
			case <-ctx.Done():
			}
			return func(w *httpd.Response) { w.WriteString("slept\n") }
		})
	})
	m.HandleFunc("GET /timer", func(w *httpd.Response, r *httpd.Request) {
		w.Hold()
		r.Conn().Loop().AfterFunc(20*time.Millisecond, func() {
			w.WriteString("timer")
			w.End()
		})
	})
	m.HandleFunc("GET /big", func(w *httpd.Response, r *httpd.Request) {
		v, _ := r.Query("n")
		n, _ := strconv.Atoi(string(v))
		if _, ok := r.Query("cl"); ok {
			w.ContentLength(int64(n))
		}
		for i := 0; i < n; i += 1000 {
			w.Write(bigBody[i:min(i+1000, n)])
		}
	})
	m.Handle("GET /mw/{id}", withUser(httpd.HandlerFunc(func(w *httpd.Response, r *httpd.Request) {
		u, _ := r.Value(userKey{}).(*user)
		w.WriteString("hello ")
		w.WriteString(u.name)
		w.WriteString(" ")
		w.Write(r.PathValue("id"))
	})))
	m.HandleFunc("GET /nocontent", func(w *httpd.Response, r *httpd.Request) {
		w.WriteHeader(204)
		w.WriteString("dropped: a 204 has no body")
	})
	m.HandleFunc("GET /short", func(w *httpd.Response, r *httpd.Request) {
		w.ContentLength(10)
		w.WriteString("12345") // 5 of 10: the connection must close
	})
	m.HandleFunc("GET /long", func(w *httpd.Response, r *httpd.Request) {
		w.ContentLength(3)
		_, err := w.WriteString("12345")
		w.AddHeader("X-Late", "dropped") // after the body: dropped
		if err == httpd.ErrBodyLength {
			r.Conn().Loop() // the error said it; the body is cut to 3
		}
	})
	m.HandleFunc("GET /headers", func(w *httpd.Response, r *httpd.Request) {
		w.AddHeader("X-Multi", "a")
		w.AddHeader("X-Multi", "b")
		w.AddHeader("X-Bad", "v\r\nX-Injected: yes")
		w.WriteString("ok")
	})
	m.HandleFunc("POST /trailer", func(w *httpd.Response, r *httpd.Request) {
		w.Write(r.Body())
		if tr := r.Trailer(); tr != nil {
			w.WriteString(" trailer=")
			w.Write(tr.Get("X-Sum"))
		}
	})
	m.HandleFunc("GET /ws", func(w *httpd.Response, r *httpd.Request) {
		w.WriteHeader(101)
		w.AddHeader("Upgrade", "echo")
		w.AddHeader("Connection", "Upgrade")
		w.Upgrade(rawEcho{})
	})
	m.HandleFunc("GET /panic", func(w *httpd.Response, r *httpd.Request) { panic("boom") })
	m.HandleFunc("GET /never", func(w *httpd.Response, r *httpd.Request) {
		(*srv).Go(w, func(ctx context.Context) func(*httpd.Response) {
			<-ctx.Done()
			return nil
		})
	})
	return m
}

// A middleware's per-request value: found by a key of its own type,
// stored without allocating.
type userKey struct{}

type user struct{ name string }

var ada = &user{name: "ada"}

func withUser(next httpd.Handler) httpd.Handler {
	return httpd.HandlerFunc(func(w *httpd.Response, r *httpd.Request) {
		w.AddHeader("X-User", ada.name)
		r.SetValue(userKey{}, ada)
		next.ServeHTTP(w, r)
	})
}

// rawEcho is the protocol a connection upgraded to: bytes echoed.
type rawEcho struct{}

func (rawEcho) OnView(c *percore.Conn, in []byte) (int, error) {
	if _, ok := c.Value().(rawEcho); !ok {
		c.Write([]byte("the server kept its state: ")) // handed off, it keeps none
	}
	c.Write(in)
	return len(in), nil
}

// bigBody is what /big sends a prefix of.
var bigBody = func() []byte {
	b := make([]byte, 4<<20)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}()

func start(t *testing.T, b percore.Backend, cfg httpd.Config) *testServer {
	t.Helper()
	ts := &testServer{}
	if cfg.Logger == nil {
		cfg.Logger = pctest.QuietLogger(t)
	}
	ts.srv = httpd.New(cfg, testMux(&ts.srv))
	t.Cleanup(ts.srv.Close)
	ts.rt = pctest.Start(t, percore.Config{Backend: b}, ts.srv.Handler())
	ts.addr = ts.rt.Addr().String()
	return ts
}

func client(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func TestRoutes(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		cl := client(t)
		for _, tc := range []struct {
			method, path string
			body         string
			status       int
			want         string
		}{
			{"GET", "/plaintext", "", 200, "Hello, World!"},
			{"HEAD", "/plaintext", "", 200, ""},
			{"DELETE", "/plaintext", "", 405, "405 Method Not Allowed\n"},
			{"GET", "/nope", "", 404, "404 Not Found\n"},
			{"GET", "/users/7", "", 200, "user 7"},
			{"GET", "/users/a%20b?x=1+2%21", "", 200, "user a b x=1 2!"},
			{"GET", "/users/7/", "", 404, "404 Not Found\n"},
			{"GET", "/files/a/b/c.txt", "", 200, "a/b/c.txt"},
			{"GET", "/exact/", "", 200, "exact"},
			{"GET", "/exact/x", "", 404, "404 Not Found\n"},
			{"GET", "/tree/x/y", "", 200, "tree"},
			{"GET", "/tree", "", 301, "301 Moved Permanently\n"},
			{"GET", "/a/../plaintext", "", 301, "301 Moved Permanently\n"},
			{"POST", "/body", strings.Repeat("b", 100000), 200, "got 100000"},
			{"POST", "/echo", "hello echo", 200, "hello echo"},
			{"GET", "/sleep?ms=5", "", 200, "slept\n"},
			{"GET", "/timer", "", 200, "timer"},
			{"GET", "/mw/3", "", 200, "hello ada 3"},
			{"GET", "/big?n=100", "", 200, string(bigBody[:100])},
			{"GET", "/big?n=70000", "", 200, string(bigBody[:70000])},
			{"GET", "/big?n=3000000", "", 200, string(bigBody[:3000000])},
			{"GET", "/big?n=3000000&cl", "", 200, string(bigBody[:3000000])},
			{"HEAD", "/big?n=3000", "", 200, ""},
		} {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequest(tc.method, "http://"+ts.addr+tc.path, body)
			if tc.path == "/a/../plaintext" {
				req.URL.Opaque = tc.path // as sent, uncleaned
			}
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, tc.path, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tc.status || string(got) != tc.want {
				t.Errorf("%s %s: %d %q %v, want %d %q", tc.method, tc.path, resp.StatusCode, got, err, tc.status, tc.want)
			}
			if resp.Header.Get("Date") == "" || resp.Header.Get("Server") != "percore" {
				t.Errorf("%s %s: header %v", tc.method, tc.path, resp.Header)
			}
		}
		if st := ts.rt.Stats(); st.Accepts != 1 {
			t.Errorf("%d connections, want 1 (keep-alive)", st.Accepts)
		}
	})
}

func readResponses(t *testing.T, rd *bufio.Reader, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		out = append(out, strconv.Itoa(resp.StatusCode)+" "+string(b))
	}
	return out
}

// Pipelined requests, some answered later (Go, Hold), come back in order.
func TestPipelinedInOrder(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		var reqs []byte
		var want []string
		for i := range 12 {
			switch i % 4 {
			case 0:
				reqs = append(reqs, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"...)
				want = append(want, "200 Hello, World!")
			case 1:
				reqs = append(reqs, "GET /sleep?ms=3 HTTP/1.1\r\nHost: x\r\n\r\n"...)
				want = append(want, "200 slept\n")
			case 2:
				reqs = append(reqs, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxy\r\n1\r\nz\r\n0\r\n\r\n"...)
				want = append(want, "200 xyz")
			case 3:
				reqs = append(reqs, "GET /timer HTTP/1.1\r\nHost: x\r\n\r\n"...)
				want = append(want, "200 timer")
			}
		}
		for off := 0; off < len(reqs); off += 11 {
			if _, err := c.Write(reqs[off:min(off+11, len(reqs))]); err != nil {
				t.Fatal(err)
			}
		}
		got := readResponses(t, bufio.NewReader(c), len(want))
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("response %d: %q, want %q", i, got[i], want[i])
			}
		}
	})
}

func TestGracefulShutdown(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		req := []byte("GET /sleep?ms=300 HTTP/1.1\r\nHost: x\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
		c.Write(req)
		pctest.WaitFor(t, "the job to start", func() bool { return ts.srv.Stats().Offloaded == 1 })
		shut := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			shut <- ts.rt.Shutdown(ctx)
		}()
		pctest.WaitFor(t, "new connections to be refused", func() bool {
			nc, err := net.DialTimeout("tcp", ts.addr, time.Second)
			if err == nil {
				nc.Close()
			}
			return err != nil
		})
		rd := bufio.NewReader(c)
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "slept\n" || !resp.Close {
			t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Close)
		}
		if _, err := rd.ReadByte(); err != io.EOF {
			t.Fatalf("after the last response: %v", err)
		}
		if err := pctest.Recv(t, shut, "Shutdown"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRouteAllocs: a keep-alive request through the Mux, its path
// parameter and query read, a middleware's per-request value, and its
// response allocate nothing on the server.
func TestRouteAllocs(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		for _, path := range []string{"/plaintext", "/plaintext/send", "/users/42?x=%41", "/mw/7"} {
			checkNoAllocs(t, ts.rt, ts.addr, path)
		}
	})
}

// checkNoAllocs fails t when a keep-alive request for path, alone and 16
// pipelined, allocates on the server at addr.
func checkNoAllocs(t *testing.T, rt *percore.Runtime, addr, path string) {
	t.Helper()
	// rawconn reads back as many bytes as it sent: pad the request
	// to the length of its response.
	resp := probe(t, addr, path)
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\nX-Pad: \r\n\r\n"
	if pad := resp - len(req); pad > 0 {
		req = strings.Replace(req, "X-Pad: ", "X-Pad: "+strings.Repeat("p", pad), 1)
	} else {
		t.Fatalf("response %d bytes, request %d", resp, len(req))
	}
	c := rawconn.Dial(t, rt.Addr())
	allocs := c.PipelineAllocs(t, []byte(req), 500)
	if allocs != 0 {
		t.Fatalf("%s: %v allocations per round, want 0", path, allocs)
	}
}

// probe returns the length of the response to GET path.
func probe(t testing.TB, addr, path string) int {
	c := pctest.Dial(t, addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return len(out) - len("Connection: close\r\n")
}

func limits100() http1.Limits { return http1.Limits{MaxBody: 100} }

func limitsNoBody() http1.Limits { return http1.Limits{MaxBody: -1} }

// TestHeldWithMuchBehind: a held request with more pipelined input behind
// it than the server holds (reading pauses, then resumes): every answer
// comes, in order.
func TestHeldWithMuchBehind(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{Limits: http1.Limits{MaxHeaderBytes: 4 << 10}})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		reqs := []byte("GET /timer HTTP/1.1\r\nHost: x\r\n\r\n")
		want := []string{"200 timer"}
		body := strings.Repeat("b", 2000)
		for i := range 150 {
			if i%50 == 49 {
				reqs = append(reqs, "GET /sleep?ms=1 HTTP/1.1\r\nHost: x\r\n\r\n"...)
				want = append(want, "200 slept\n")
				continue
			}
			reqs = append(reqs, "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n"+body...)
			want = append(want, "200 got 2000")
		}
		wrote := make(chan error, 1)
		go func() {
			_, err := c.Write(reqs)
			wrote <- err
		}()
		got := readResponses(t, bufio.NewReader(c), len(want))
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("answer %d: %q, want %q", i, got[i], want[i])
			}
		}
		if err := pctest.Recv(t, wrote, "the writes"); err != nil {
			t.Fatal(err)
		}
	})
}
