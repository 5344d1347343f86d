//go:build linux

package httpd_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// TestShutdownCancelsWork: a graceful shutdown cancels the context of the
// off-loop work in flight (Server.Go and a net/http handler through Adapt)
// as it begins, with ErrShuttingDown as the cause; the answers the work
// writes then still go out, with Connection: close, and Shutdown returns
// without waiting for HandlerTimeout.
func TestShutdownCancelsWork(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		started := make(chan string, 2)
		var srv *httpd.Server
		m := httpd.NewMux()
		m.HandleFunc("GET /go", func(w *httpd.Response, r *httpd.Request) {
			srv.Go(w, func(ctx context.Context) func(*httpd.Response) {
				started <- "go"
				<-ctx.Done()
				cause := context.Cause(ctx)
				return func(w *httpd.Response) {
					w.WriteHeader(503)
					w.WriteString(cause.Error())
				}
			})
		})
		m.Handle("GET /adapt", httpd.Adapt(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			started <- "adapt"
			<-r.Context().Done()
			w.WriteHeader(503)
			io.WriteString(w, context.Cause(r.Context()).Error())
		})))
		srv = httpd.New(httpd.Config{HandlerTimeout: time.Minute, Logger: pctest.QuietLogger(t)}, m)
		t.Cleanup(srv.Close)
		rt := pctest.Start(t, percore.Config{Backend: b}, srv.Handler())
		addr := rt.Addr().String()
		var rds []*bufio.Reader
		for _, path := range []string{"/go", "/adapt"} {
			c := pctest.Dial(t, addr)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			pctest.Recv(t, started, path+" to start")
			rds = append(rds, bufio.NewReader(c))
		}
		shut := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			shut <- rt.Shutdown(ctx)
		}()
		for i, rd := range rds {
			resp, err := http.ReadResponse(rd, nil)
			if err != nil {
				t.Fatalf("answer %d: %v", i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 503 || string(body) != httpd.ErrShuttingDown.Error() || !resp.Close {
				t.Fatalf("answer %d: %d %q close=%v", i, resp.StatusCode, body, resp.Close)
			}
			if _, err := rd.ReadByte(); err != io.EOF {
				t.Fatalf("answer %d: after it %v, want the connection closed", i, err)
			}
		}
		if err := pctest.Recv(t, shut, "Shutdown"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHalfCloseAnswered: a client that shuts its write side after its
// request still gets the answer of work off the loop (Server.Go, Adapt),
// its context cancelled, and then the end of the stream, not a wait for
// HandlerTimeout.
func TestHalfCloseAnswered(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, tc := range []struct {
			name, path, body string
			start            func(t *testing.T) (addr string, canceled <-chan struct{})
		}{
			{"go", "/sleep?ms=20000", "slept\n", func(t *testing.T) (string, <-chan struct{}) {
				return start(t, b, httpd.Config{}).addr, nil
			}},
			{"adapt", "/wait", "", func(t *testing.T) (string, <-chan struct{}) {
				a := &app{items: map[string]string{}, canceled: make(chan struct{})}
				return startAdapted(t, b, a).addr, a.canceled
			}},
		} {
			addr, canceled := tc.start(t)
			c := pctest.Dial(t, addr)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte("GET " + tc.path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			c.CloseWrite()
			out, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("%s: %v after %q", tc.name, err, out)
			}
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
			if err != nil {
				t.Fatalf("%s: %v in %q", tc.name, err, out)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != tc.body || !resp.Close {
				t.Fatalf("%s: %q", tc.name, out)
			}
			if canceled != nil {
				pctest.Recv(t, canceled, "the context's cancellation")
			}
		}
	})
}
