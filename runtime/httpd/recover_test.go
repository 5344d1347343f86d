//go:build linux

package httpd_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// panicBody is a StreamHandler that panics on its body's first piece.
type panicBody struct{}

func (panicBody) ServeHTTP(w *httpd.Response, r *httpd.Request)  {}
func (panicBody) OnBody(*httpd.Response, *httpd.Request, []byte) { panic("body boom") }
func (panicBody) OnEnd(w *httpd.Response, r *httpd.Request)      { w.WriteString("unreachable") }

// TestPanicInPipelinedRead: handlers called from one read are guarded
// once for the read. A panic among pipelined requests gets 500 and a
// close after the answers before it, none after it; a StreamHandler's
// panic in OnBody is answered too; and the loop serves on.
func TestPanicInPipelinedRead(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		m := httpd.NewMux()
		m.HandleFunc("GET /ok", func(w *httpd.Response, r *httpd.Request) { w.WriteString("ok") })
		m.HandleFunc("GET /panic", func(w *httpd.Response, r *httpd.Request) {
			w.WriteString("partial")
			panic("boom")
		})
		m.Handle("POST /upload", panicBody{})
		srv := httpd.New(httpd.Config{Logger: pctest.QuietLogger(t)}, m)
		t.Cleanup(srv.Close)
		rt := pctest.Start(t, percore.Config{Backend: b}, srv.Handler())
		addr := rt.Addr().String()
		for _, tc := range []struct {
			name, in string
			before   int // 200s before the 500
		}{
			{"handler", "GET /ok HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n" +
				"GET /panic HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n", 2},
			{"stream", "GET /ok HTTP/1.1\r\nHost: x\r\n\r\nPOST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc" +
				"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n", 1},
		} {
			c := pctest.Dial(t, addr)
			c.SetDeadline(time.Now().Add(20 * time.Second))
			c.Write([]byte(tc.in))
			out, err := io.ReadAll(c)
			c.Close()
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			s := string(out)
			if n := strings.Count(s, "HTTP/1.1 200 OK"); n != tc.before {
				t.Fatalf("%s: %d answers 200 before the panic, want %d: %q", tc.name, n, tc.before, s)
			}
			i := strings.Index(s, "HTTP/1.1 500 ")
			if i < 0 || strings.Contains(s[i:], "HTTP/1.1 200") || !strings.Contains(s[i:], "Connection: close") ||
				strings.Contains(s, "partial") || strings.Contains(s, "unreachable") {
				t.Fatalf("%s: %q, want the 200s, then a 500 with Connection: close and nothing after", tc.name, s)
			}
		}
		if got := pctest.HTTPGet(t, "http://"+addr+"/ok"); got != "ok" {
			t.Fatalf("after the panics: %q", got)
		}
		if p := srv.Stats().Panics; p != 2 {
			t.Fatalf("%d panics counted, want 2", p)
		}
	})
}
