//go:build linux

package httpd_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

func TestPanicAnswered500(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		c.Write([]byte("GET /panic HTTP/1.1\r\nHost: x\r\n\r\n"))
		out, err := io.ReadAll(c)
		if err != nil || !bytes.HasPrefix(out, []byte("HTTP/1.1 500 ")) || !bytes.Contains(out, []byte("Connection: close")) {
			t.Fatalf("%q %v", out, err)
		}
		// The loop lives.
		if got := pctest.HTTPGet(t, "http://"+ts.addr+"/plaintext"); got != "Hello, World!" {
			t.Fatalf("after the panic: %q", got)
		}
		if ts.srv.Stats().Panics != 1 {
			t.Fatalf("%+v", ts.srv.Stats())
		}
	})
}

// A handler that never answers is bounded by HandlerTimeout (503, close),
// and its context is cancelled.
func TestHandlerTimeout(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{HandlerTimeout: 100 * time.Millisecond})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		c.Write([]byte("GET /never HTTP/1.1\r\nHost: x\r\n\r\n"))
		out, err := io.ReadAll(c)
		if err != nil || !bytes.HasPrefix(out, []byte("HTTP/1.1 503 ")) || !bytes.Contains(out, []byte("Connection: close")) {
			t.Fatalf("%q %v", out, err)
		}
		pctest.WaitFor(t, "the timeout counted", func() bool { return ts.srv.Stats().TimedOut == 1 })
	})
}

// The client going away cancels the context of the work answering it.
func TestClientGoneCancels(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		c := pctest.Dial(t, ts.addr)
		c.Write([]byte("GET /never HTTP/1.1\r\nHost: x\r\n\r\n"))
		pctest.WaitFor(t, "the job to start", func() bool { return ts.srv.Stats().Offloaded == 1 })
		c.Close()
		// /never returns once its context is cancelled: then the worker
		// is free, and Close below does not wait (leakcheck would see it).
		ts.srv.Close()
	})
}

// Past the workers and their queue, 503 at once, counted.
func TestPoolFull503(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{Workers: 1, MaxQueue: -1})
		c1 := pctest.Dial(t, ts.addr)
		c1.Write([]byte("GET /never HTTP/1.1\r\nHost: x\r\n\r\n"))
		pctest.WaitFor(t, "the job to start", func() bool { return ts.srv.Stats().Offloaded == 1 })
		c2 := pctest.Dial(t, ts.addr)
		c2.SetDeadline(time.Now().Add(20 * time.Second))
		c2.Write([]byte("GET /sleep?ms=1 HTTP/1.1\r\nHost: x\r\n\r\n"))
		got := readResponses(t, bufio.NewReader(c2), 1)
		if !strings.HasPrefix(got[0], "503 ") || ts.srv.Stats().Rejected != 1 {
			t.Fatalf("%q %+v", got, ts.srv.Stats())
		}
		c1.Close()
	})
}

func TestRejects(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{Limits: limits100(), MaxBodyBuffer: 50})
		for _, tc := range []struct {
			name, req string
			status    int
		}{
			{"bare LF", "GET /plaintext HTTP/1.1\nHost: x\n\n", 400},
			{"CL and TE", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
			{"unknown coding", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
			{"version", "GET / HTTP/3.0\r\nHost: x\r\n\r\n", 505},
			{"body too large", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", 413},
			{"buffered body too large", "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 51\r\n\r\n", 413},
			{"expectation", "GET /plaintext HTTP/1.1\r\nHost: x\r\nExpect: tea\r\n\r\n", 417},
			{"refused 100-continue", "POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n", 404},
		} {
			c := pctest.Dial(t, ts.addr)
			c.SetDeadline(time.Now().Add(20 * time.Second))
			c.Write([]byte(tc.req))
			out, err := io.ReadAll(c)
			resp, rerr := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
			if err != nil || rerr != nil || resp.StatusCode != tc.status || !resp.Close {
				t.Errorf("%s: %v %v %q", tc.name, err, rerr, out)
			}
		}
	})
}

// TestHeadTimeout: a head that does not arrive whole in time gets 408.
func TestHeadTimeout(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{HeadTimeout: 100 * time.Millisecond})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		c.Write([]byte("GET /plaintext HTTP/1.1\r\nHost: x\r\n"))
		out, _ := io.ReadAll(c)
		if !bytes.HasPrefix(out, []byte("HTTP/1.1 408 Request Timeout\r\n")) {
			t.Fatalf("%q", out)
		}
	})
}
