//go:build linux

package httpd_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// TestHandlerTimeoutPerRequest: the hold timer is left armed between
// requests; a request held after an earlier one still gets its whole
// HandlerTimeout (not the rest of the earlier one's), and the earlier
// one, answered in time, is not cut.
func TestHandlerTimeoutPerRequest(t *testing.T) {
	const timeout = 400 * time.Millisecond
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{HandlerTimeout: timeout})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		rd := bufio.NewReader(c)
		if _, err := c.Write([]byte("GET /sleep?ms=200 HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if got := readResponses(t, rd, 1)[0]; got != "200 slept\n" {
			t.Fatalf("the first request: %q, want it answered in its time", got)
		}
		sent := time.Now()
		if _, err := c.Write([]byte("GET /never HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 {
			t.Fatalf("the second request: %d, want 503", resp.StatusCode)
		}
		if took := time.Since(sent); took < timeout {
			t.Fatalf("the second request timed out after %v, before its own %v", took, timeout)
		}
	})
}

// TestCloseCancelsRunningWork: Server.Close cancels the context of work
// running on a worker (the job contexts are no children of a context of
// the server's) and waits for it to return.
func TestCloseCancelsRunningWork(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		var srv *httpd.Server
		started := make(chan struct{})
		seen := make(chan error, 1)
		m := httpd.NewMux()
		m.HandleFunc("GET /wait", func(w *httpd.Response, r *httpd.Request) {
			srv.Go(w, func(ctx context.Context) func(*httpd.Response) {
				close(started)
				<-ctx.Done()
				seen <- context.Cause(ctx)
				return nil
			})
		})
		srv = httpd.New(httpd.Config{Logger: pctest.QuietLogger(t)}, m)
		t.Cleanup(srv.Close)
		rt := pctest.Start(t, percore.Config{Backend: b}, srv.Handler())
		c := pctest.Dial(t, rt.Addr().String())
		if _, err := c.Write([]byte("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		<-started
		srv.Close() // returns once the work did
		select {
		case err := <-seen:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("the work's context: %v, want canceled", err)
			}
		default:
			t.Fatal("Close returned before the work it cancelled")
		}
	})
}

// TestIdleTimeoutAroundHeld: a held request is not cut by the idle
// timeout, whether the idle timer is turned off while it is held
// (HandlerTimeout not shorter than IdleTimeout) or left as it is
// (shorter), and the idle time counts again from the answer.
func TestIdleTimeoutAroundHeld(t *testing.T) {
	for _, tc := range []struct {
		name          string
		idle, handler time.Duration
		sleep         string
	}{
		{"turned-off", 150 * time.Millisecond, time.Minute, "400"},
		{"left", 500 * time.Millisecond, 300 * time.Millisecond, "100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				ts := start(t, b, httpd.Config{IdleTimeout: tc.idle, HandlerTimeout: tc.handler})
				c := pctest.Dial(t, ts.addr)
				c.SetDeadline(time.Now().Add(20 * time.Second))
				rd := bufio.NewReader(c)
				if _, err := c.Write([]byte("GET /sleep?ms=" + tc.sleep + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
					t.Fatal(err)
				}
				if got := readResponses(t, rd, 1)[0]; got != "200 slept\n" {
					t.Fatalf("the held request: %q", got)
				}
				answered := time.Now()
				// The server's close (EOF), not the test's deadline: an idle
				// timer never restarted after the hold would leave it open.
				if _, err := rd.ReadByte(); !errors.Is(err, io.EOF) {
					t.Fatalf("after the answer: %v, want the idle close (EOF)", err)
				}
				if idle := time.Since(answered); idle < tc.idle*9/10 {
					t.Fatalf("closed %v after the answer, before the idle timeout %v", idle, tc.idle)
				}
			})
		})
	}
}
