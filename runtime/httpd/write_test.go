//go:build linux

package httpd_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// TestOneCommitPerRead: the answers to the requests of one read go to the
// connection in one Commit (so in one write), not one per answer, counted
// by the server.
func TestOneCommitPerRead(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		l := ts.rt.Loops()[0]
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		rd := bufio.NewReader(c)
		one := []byte("GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := c.Write(one); err != nil {
			t.Fatal(err)
		}
		readResponses(t, rd, 1)
		c0, r0 := ts.srv.CommitCounts(l)
		const depth = 16
		if _, err := c.Write(bytes.Repeat(one, depth)); err != nil {
			t.Fatal(err)
		}
		for i, got := range readResponses(t, rd, depth) {
			if got != "200 Hello, World!" {
				t.Fatalf("answer %d: %q", i, got)
			}
		}
		c1, r1 := ts.srv.CommitCounts(l)
		commits, reads := c1-c0, r1-r0
		if reads == 0 || commits != reads || commits >= depth {
			t.Fatalf("%d answers: %d commits over %d reads, want one per read", depth, commits, reads)
		}
	})
}

// TestKeptAnswersInOrder: answers kept for the read's one Commit stay in
// order around what is written or closed in between: a held answer, a
// 100 Continue, a HEAD, a refusal, and a request the codec rejects (its
// 400 after every answer before it).
func TestKeptAnswersInOrder(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		reqs := "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n" +
			"GET /users/7 HTTP/1.1\r\nHost: x\r\n\r\n" +
			"HEAD /plaintext HTTP/1.1\r\nHost: x\r\n\r\n" +
			"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n" +
			"GET /timer HTTP/1.1\r\nHost: x\r\n\r\n" +
			"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n" +
			"POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc" +
			"GET /users/8 HTTP/1.1\r\nHost: x\r\n\r\n" +
			"GET /bad\nHTTP/1.1\r\n\r\n"
		if _, err := c.Write([]byte(reqs)); err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"200 Hello, World!", "200 user 7", "200 ", "404 404 Not Found\n", "200 timer",
			"200 Hello, World!", "100 ", "200 got 3", "200 user 8", "400 "}
		rd := bufio.NewReader(bytes.NewReader(out))
		for i, w := range want {
			method := "GET"
			if i == 2 {
				method = "HEAD"
			}
			resp, err := http.ReadResponse(rd, &http.Request{Method: method})
			if err != nil {
				t.Fatalf("answer %d: %v in %q", i, err, out)
			}
			body, _ := io.ReadAll(resp.Body)
			got := resp.Status[:3] + " " + string(body)
			if i == len(want)-1 {
				got = got[:4]
				if !resp.Close {
					t.Errorf("the 400 without Connection: close")
				}
			}
			if got != w {
				t.Fatalf("answer %d: %q, want %q (all: %q)", i, got, w, out)
			}
		}
	})
}

// TestErrorOnReusedConnection: a request the codec rejects on a
// keep-alive connection that answered before gets its error answer (it
// was closed without one: the last response's "committed" was taken for
// this one's; net/http's client retries on a fresh connection, which hid
// it).
func TestErrorOnReusedConnection(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		c := pctest.Dial(t, ts.addr)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		rd := bufio.NewReader(c)
		if _, err := c.Write([]byte("GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		readResponses(t, rd, 1)
		big := "GET /plaintext HTTP/1.1\r\nHost: x\r\n"
		for i := range 120 {
			big += "X-H" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ": v\r\n"
		}
		if _, err := c.Write([]byte(big + "\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(rd, nil)
		if err != nil || resp.StatusCode != 431 || !resp.Close {
			t.Fatalf("%v %v, want 431 with Connection: close", resp, err)
		}
	})
}
