//go:build linux

package httpd_test

import (
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

var (
	plainHead = httpd.NewHead(200, "Content-Type", "text/plain")
	hello     = []byte("Hello, World!")
)

// TestNewHeadRejects: what would make a bad head panics when the Head is
// made, with a message that says why.
func TestNewHeadRejects(t *testing.T) {
	for _, tc := range []struct {
		status int
		fields []string
		want   string
	}{
		{200, []string{"Content-Type"}, "pairs"},
		{1000, nil, "out of 100-999"},
		{42, nil, "out of 100-999"},
		{103, nil, "informational"},
		{200, []string{"Bad Name", "v"}, "valid head"},
		{200, []string{"", "v"}, "valid head"},
		{200, []string{"X-A", "v\r\nX-Injected: yes"}, "CR or LF"},
		{200, []string{"X-A", "v\nw"}, "CR or LF"},
		// A blank line inside a value would end the head early, a second
		// response after it, where the parse of the head does not look.
		{200, []string{"X-A", "v\r\n\r\nHTTP/1.1 302 Found\r\nLocation: http://evil/"}, "CR or LF"},
		{200, []string{"A", "1\r\nTransfer-Encoding: chunked\r\n", "C", "d"}, "CR or LF"},
		{200, []string{"X-A: v\r\nX-B", "w"}, "CR or LF"},
		{200, []string{"X-A", "nul\x00"}, "valid head"},
		{200, []string{"X-A", " padded"}, "whitespace"},
		{200, []string{"content-length", "5"}, "server's"},
		{200, []string{"Transfer-Encoding", "chunked"}, "server's"},
		{200, []string{"Connection", "close"}, "server's"},
		{200, []string{"DATE", "now"}, "server's"},
	} {
		func() {
			defer func() {
				p := recover()
				if s, _ := p.(string); p == nil || !strings.Contains(s, tc.want) {
					t.Errorf("NewHead(%d, %q): panic %v, want one saying %q", tc.status, tc.fields, p, tc.want)
				}
			}()
			httpd.NewHead(tc.status, tc.fields...)
		}()
	}
	// What is valid: a 101's Connection: Upgrade, empty values, no fields,
	// a status left to WriteHeader.
	httpd.NewHead(101, "Upgrade", "echo", "Connection", "Upgrade")
	httpd.NewHead(200, "X-Empty", "")
	if h := httpd.NewHead(0); h.Status() != 0 {
		t.Errorf("status %d, want 0", h.Status())
	}
}

// TestSend: Head and Send against the bytes a client reads, in one
// pipelined read: the fast path (200, another status, HTTP/1.0, HEAD), the
// general one it falls back to (a response already started, a 204), a
// Head with its fields completed by AddHeader, writes after Send, a held
// response answered from a timer, and the Connection: close of the last.
func TestSend(t *testing.T) {
	jsonHead := httpd.NewHead(201, "Content-Type", "application/json", "X-A", "1")
	anyStatus := httpd.NewHead(0, "Content-Type", "text/plain")
	after := make(chan error, 1)
	m := httpd.NewMux()
	m.HandleFunc("GET /send", func(w *httpd.Response, r *httpd.Request) { w.Send(plainHead, hello) })
	m.HandleFunc("GET /created", func(w *httpd.Response, r *httpd.Request) { w.SendString(jsonHead, "{}") })
	m.HandleFunc("GET /missing", func(w *httpd.Response, r *httpd.Request) {
		w.WriteHeader(404)
		w.SendString(anyStatus, "nope")
	})
	m.HandleFunc("GET /nocontent", func(w *httpd.Response, r *httpd.Request) {
		w.SendString(httpd.NewHead(204, "X-A", "1"), "dropped")
	})
	m.HandleFunc("GET /started", func(w *httpd.Response, r *httpd.Request) {
		w.AddHeader("X-First", "1")
		w.Send(plainHead, hello)
	})
	m.HandleFunc("GET /after", func(w *httpd.Response, r *httpd.Request) {
		w.Send(plainHead, hello)
		w.AddHeader("X-Late", "dropped")
		_, err := w.WriteString("more")
		after <- err
	})
	m.HandleFunc("GET /writehead", func(w *httpd.Response, r *httpd.Request) {
		w.WriteHead(plainHead)
		w.AddHeader("X-B", "2")
		w.WriteString("held")
	})
	m.HandleFunc("GET /later", func(w *httpd.Response, r *httpd.Request) {
		w.Hold()
		r.Conn().Loop().AfterFunc(time.Millisecond, func() {
			w.Send(plainHead, hello)
			w.End()
		})
	})
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		srv := httpd.New(httpd.Config{Logger: pctest.QuietLogger(t)}, m)
		t.Cleanup(srv.Close)
		rt := pctest.Start(t, percore.Config{Backend: b}, srv.Handler())
		c := pctest.Dial(t, rt.Addr().String())
		c.SetDeadline(time.Now().Add(20 * time.Second))
		const common = "Server: percore\r\nDate: D\r\n"
		const plain = "HTTP/1.1 200 OK\r\n" + common + "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n"
		var reqs, want strings.Builder
		for _, x := range []struct{ req, resp string }{
			{"GET /send HTTP/1.1", plain + "Hello, World!"},
			{"HEAD /send HTTP/1.1", plain},
			{"GET /send HTTP/1.0\r\nConnection: keep-alive", "HTTP/1.1 200 OK\r\n" + common + "Content-Type: text/plain\r\n" +
				"Connection: keep-alive\r\nContent-Length: 13\r\n\r\nHello, World!"},
			{"GET /created HTTP/1.1", "HTTP/1.1 201 Created\r\n" + common +
				"Content-Type: application/json\r\nX-A: 1\r\nContent-Length: 2\r\n\r\n{}"},
			{"GET /missing HTTP/1.1", "HTTP/1.1 404 Not Found\r\n" + common +
				"Content-Type: text/plain\r\nContent-Length: 4\r\n\r\nnope"},
			{"GET /nocontent HTTP/1.1", "HTTP/1.1 204 No Content\r\n" + common + "X-A: 1\r\n\r\n"},
			{"GET /started HTTP/1.1", "HTTP/1.1 200 OK\r\n" + common +
				"X-First: 1\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"},
			{"GET /after HTTP/1.1", plain + "Hello, World!"},
			{"GET /writehead HTTP/1.1", "HTTP/1.1 200 OK\r\n" + common +
				"Content-Type: text/plain\r\nX-B: 2\r\nContent-Length: 4\r\n\r\nheld"},
			{"GET /later HTTP/1.1", plain + "Hello, World!"},
			{"GET /send HTTP/1.1\r\nConnection: close", "HTTP/1.1 200 OK\r\n" + common +
				"Content-Type: text/plain\r\nConnection: close\r\nContent-Length: 13\r\n\r\nHello, World!"},
		} {
			reqs.WriteString(x.req + "\r\nHost: x\r\n\r\n")
			want.WriteString(x.resp)
		}
		if _, err := c.Write([]byte(reqs.String())); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c) // the last answer closes the connection
		if err != nil {
			t.Fatal(err)
		}
		masked := regexp.MustCompile(`Date: [^\r]*`).ReplaceAllString(string(got), "Date: D")
		if masked != want.String() {
			t.Errorf("got\n%q\nwant\n%q", masked, want.String())
		}
		select {
		case err := <-after:
			if err != httpd.ErrBodyLength {
				t.Errorf("a Write after Send: %v, want ErrBodyLength", err)
			}
		default:
			t.Errorf("GET /after not served")
		}
	})
}
