//go:build linux

package httpd_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// app is an ordinary net/http application: an http.ServeMux with Go 1.22
// patterns, a middleware, net/http/pprof, JSON in and out, a streamed
// answer, a panic, a hijack, and a handler that waits for its client.
type app struct {
	mu       sync.Mutex
	items    map[string]string
	canceled chan struct{}
}

func (a *app) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		v, ok := a.items[r.PathValue("id")]
		a.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"id": r.PathValue("id"), "name": v})
	})
	mux.HandleFunc("POST /items", func(w http.ResponseWriter, r *http.Request) {
		var it struct{ ID, Name string }
		if err := json.NewDecoder(r.Body).Decode(&it); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.items[it.ID] = it.Name
		a.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d %v", n, err)
	})
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "part %d\n", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	mux.HandleFunc("GET /hijack", func(w http.ResponseWriter, r *http.Request) {
		_, _, err := http.NewResponseController(w).Hijack()
		http.Error(w, err.Error(), http.StatusNotImplemented)
	})
	mux.HandleFunc("GET /wait", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(a.canceled)
	})
	mux.HandleFunc("POST /deadline", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		rc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := io.ReadAll(r.Body)
		fmt.Fprint(w, errors.Is(err, errDeadline()))
	})
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	// A middleware around everything.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Middleware", "yes")
		mux.ServeHTTP(w, r)
	})
}

func startAdapted(t *testing.T, b percore.Backend, a *app) *testServer {
	ts := &testServer{}
	ts.srv = httpd.New(httpd.Config{Logger: pctest.QuietLogger(t)}, httpd.Adapt(a.handler()))
	t.Cleanup(ts.srv.Close)
	ts.rt = pctest.Start(t, percore.Config{Backend: b}, ts.srv.Handler())
	ts.addr = ts.rt.Addr().String()
	return ts
}

func TestAdaptServeMuxApp(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		a := &app{items: map[string]string{}, canceled: make(chan struct{})}
		ts := startAdapted(t, b, a)
		base := "http://" + ts.addr
		cl := client(t)
		do := func(method, path, body string) (*http.Response, string) {
			t.Helper()
			var rd io.Reader
			if body != "" {
				rd = strings.NewReader(body)
			}
			req, _ := http.NewRequest(method, base+path, rd)
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			return resp, string(got)
		}
		if resp, _ := do("POST", "/items", `{"id":"7","name":"ada"}`); resp.StatusCode != 201 {
			t.Fatalf("POST: %d", resp.StatusCode)
		}
		resp, got := do("GET", "/items/7", "")
		if resp.StatusCode != 200 || got != `{"id":"7","name":"ada"}`+"\n" ||
			resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Middleware") != "yes" {
			t.Fatalf("GET: %d %q %v", resp.StatusCode, got, resp.Header)
		}
		if resp, _ := do("GET", "/items/8", ""); resp.StatusCode != 404 {
			t.Fatalf("GET missing: %d", resp.StatusCode)
		}
		if resp, _ := do("DELETE", "/items/7", ""); resp.StatusCode != 405 || resp.Header.Get("Allow") == "" {
			t.Fatalf("DELETE: %d %v", resp.StatusCode, resp.Header)
		}
		if resp, got := do("POST", "/items", `{bad`); resp.StatusCode != 400 || !strings.Contains(got, "invalid") {
			t.Fatalf("bad JSON: %d %q", resp.StatusCode, got)
		}
		big := strings.Repeat("u", 3<<20) // past the body window: reading pauses and resumes
		if resp, got := do("POST", "/upload", big); resp.StatusCode != 200 || got != fmt.Sprintf("%d <nil>", len(big)) {
			t.Fatalf("upload: %d %q", resp.StatusCode, got)
		}
		if resp, got := do("GET", "/stream", ""); resp.StatusCode != 200 || got != "part 0\npart 1\npart 2\n" ||
			resp.TransferEncoding == nil {
			t.Fatalf("stream: %d %q %v", resp.StatusCode, got, resp.TransferEncoding)
		}
		if resp, got := do("GET", "/hijack", ""); resp.StatusCode != 501 || !strings.Contains(got, "percore loop") {
			t.Fatalf("hijack: %d %q", resp.StatusCode, got)
		}
		if resp, got := do("GET", "/debug/pprof/", ""); resp.StatusCode != 200 || !strings.Contains(got, "goroutine") {
			t.Fatalf("pprof index: %d %.200q", resp.StatusCode, got)
		}
		if resp, got := do("GET", "/debug/pprof/goroutine?debug=1", ""); resp.StatusCode != 200 || !strings.Contains(got, "goroutine profile") {
			t.Fatalf("pprof goroutine: %d %.200q", resp.StatusCode, got)
		}
		if resp, _ := do("HEAD", "/items/7", ""); resp.StatusCode != 200 {
			t.Fatalf("HEAD: %d", resp.StatusCode)
		}
		// A body that does not come in time: the read's deadline.
		pr, pw := io.Pipe()
		req, _ := http.NewRequest("POST", base+"/deadline", pr)
		resp2, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got2, _ := io.ReadAll(resp2.Body)
		resp2.Body.Close()
		pw.Close()
		if string(got2) != "true" {
			t.Fatalf("read deadline: %q", got2)
		}
		// A panic: 500, and the server serves on.
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		c.Write([]byte("GET /panic HTTP/1.1\r\nHost: x\r\n\r\n"))
		out, _ := io.ReadAll(c)
		if !bytes.HasPrefix(out, []byte("HTTP/1.1 500 ")) {
			t.Fatalf("panic: %q", out)
		}
		if _, got := do("GET", "/items/7", ""); !strings.Contains(got, "ada") {
			t.Fatalf("after the panic: %q", got)
		}
		// The client goes away: the request's context is cancelled.
		c2 := pctest.Dial(t, ts.addr)
		c2.Write([]byte("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n"))
		pctest.WaitFor(t, "the handler to start", func() bool { return ts.srv.Stats().Offloaded >= 14 })
		c2.Close()
		pctest.Recv(t, a.canceled, "the context's cancellation")
	})
}

// Pipelined requests to net/http handlers are answered in order.
func TestAdaptPipelined(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		a := &app{items: map[string]string{"1": "one", "2": "two"}, canceled: make(chan struct{})}
		ts := startAdapted(t, b, a)
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		var reqs string
		for i := range 10 {
			reqs += fmt.Sprintf("GET /items/%d HTTP/1.1\r\nHost: x\r\n\r\n", 1+i%2)
		}
		c.Write([]byte(reqs))
		got := readResponses(t, bufio.NewReader(c), 10)
		for i, g := range got {
			want := []string{"one", "two"}[i%2]
			if !strings.Contains(g, want) {
				t.Fatalf("response %d: %q, want %q", i, g, want)
			}
		}
	})
}

func errDeadline() error { return os.ErrDeadlineExceeded }
