//go:build linux

package httpd_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// TestQuickPathOrder sends seeded random pipelines that mix requests the
// quick path answers (bodyless GETs of a kept route, Send and Write
// answers, HEAD) with those it leaves to the full path (held by a loop
// timer, offloaded with Server.Go, buffered and chunked bodies, a query, a
// route the Mux finds by pattern), split into random pieces, and checks
// the whole stream the server sends byte for byte against an oracle (the
// Date field's value masked): answers in request order, each exactly
// once, with nothing after the last (Connection: close). Through a Mux and
// through a plain Handler (the two ways a request takes the quick path),
// both backends.
func TestQuickPathOrder(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, kind := range []string{"mux", "plain"} {
			t.Run(kind, func(t *testing.T) {
				var srv *httpd.Server
				h := orderHandler(&srv)
				if kind == "mux" {
					m := httpd.NewMux()
					for _, p := range []string{"GET /q", "GET /w", "GET /held", "GET /go", "POST /b", "/"} {
						m.Handle(p, h)
					}
					h = m
				}
				srv = httpd.New(httpd.Config{Logger: pctest.QuietLogger(t)}, h)
				t.Cleanup(srv.Close)
				rt := pctest.Start(t, percore.Config{Backend: b}, srv.Handler())
				for seed := uint64(1); seed <= 8; seed++ {
					runOrder(t, rt.Addr().String(), seed)
				}
			})
		}
	})
}

// orderHandler answers the order test's requests by path, each with its
// X-Id in the body.
func orderHandler(srv **httpd.Server) httpd.Handler {
	return httpd.HandlerFunc(func(w *httpd.Response, r *httpd.Request) {
		id := string(r.Header("X-Id"))
		switch string(r.Path()) {
		case "/q":
			w.SendString(plainHead, "q"+id)
		case "/w":
			w.AddHeader("Content-Type", "text/plain")
			w.WriteString("w" + id)
		case "/held":
			d, _ := strconv.Atoi(string(r.Header("X-Delay")))
			w.Hold()
			r.Conn().Loop().AfterFunc(time.Duration(d)*time.Microsecond, func() {
				w.AddHeader("Content-Type", "text/plain")
				w.WriteString("h" + id)
				w.End()
			})
		case "/go":
			(*srv).Go(w, func(ctx context.Context) func(*httpd.Response) {
				return func(w *httpd.Response) {
					w.AddHeader("Content-Type", "text/plain")
					w.WriteString("g" + id)
				}
			})
		case "/b":
			w.AddHeader("Content-Type", "text/plain")
			w.WriteString("b" + id + " " + strconv.Itoa(len(r.Body())) + " " + string(r.Body()[:min(len(r.Body()), 3)]))
		default:
			w.WriteHeader(404)
			w.AddHeader("Content-Type", "text/plain")
			w.WriteString("n" + id)
		}
	})
}

// answer is the oracle's bytes of one answer: Date masked, keep-alive
// unless last.
func answer(status, body string, last, head bool) string {
	s := "HTTP/1.1 " + status + "\r\nServer: percore\r\nDate: D\r\nContent-Type: text/plain\r\n"
	if last {
		s += "Connection: close\r\n"
	}
	s += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if head {
		return s
	}
	return s + body
}

var dateField = regexp.MustCompile("\r\nDate: [^\r]*\r\n")

func runOrder(t *testing.T, addr string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x25f))
	var reqs bytes.Buffer
	var want strings.Builder
	n := 30 + rng.IntN(60)
	for i := range n {
		id := strconv.Itoa(i)
		last := i == n-1
		hdr := "Host: x\r\nX-Id: " + id + "\r\n"
		if last {
			hdr += "Connection: close\r\n"
		}
		k := rng.IntN(10)
		if last {
			k = rng.IntN(2) // the last is a quick one: the close follows the quick path's answer
		}
		switch k {
		case 0, 6:
			reqs.WriteString("GET /q HTTP/1.1\r\n" + hdr + "\r\n")
			want.WriteString(answer("200 OK", "q"+id, last, false))
		case 1:
			reqs.WriteString("GET /w HTTP/1.1\r\n" + hdr + "\r\n")
			want.WriteString(answer("200 OK", "w"+id, last, false))
		case 2:
			reqs.WriteString(fmt.Sprintf("GET /held HTTP/1.1\r\n%sX-Delay: %d\r\n\r\n", hdr, rng.IntN(3)*500))
			want.WriteString(answer("200 OK", "h"+id, last, false))
		case 3:
			reqs.WriteString("GET /go HTTP/1.1\r\n" + hdr + "\r\n")
			want.WriteString(answer("200 OK", "g"+id, last, false))
		case 4:
			body := strings.Repeat("x", rng.IntN(2500))
			reqs.WriteString(fmt.Sprintf("POST /b HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s", hdr, len(body), body))
			want.WriteString(answer("200 OK", "b"+id+" "+strconv.Itoa(len(body))+" "+body[:min(3, len(body))], last, false))
		case 5:
			body := strings.Repeat("y", 1+rng.IntN(1500))
			reqs.WriteString("POST /b HTTP/1.1\r\n" + hdr + "Transfer-Encoding: chunked\r\n\r\n")
			for rest := body; len(rest) > 0; {
				c := min(len(rest), 1+rng.IntN(400))
				reqs.WriteString(fmt.Sprintf("%x\r\n%s\r\n", c, rest[:c]))
				rest = rest[c:]
			}
			reqs.WriteString("0\r\n\r\n")
			want.WriteString(answer("200 OK", "b"+id+" "+strconv.Itoa(len(body))+" "+body[:3], last, false))
		case 7:
			reqs.WriteString("HEAD /q HTTP/1.1\r\n" + hdr + "\r\n")
			want.WriteString(answer("200 OK", "q"+id, last, true))
		case 8:
			reqs.WriteString("GET /q?x=" + id + " HTTP/1.1\r\n" + hdr + "\r\n")
			want.WriteString(answer("200 OK", "q"+id, last, false))
		case 9:
			reqs.WriteString("GET /nope/" + id + " HTTP/1.1\r\n" + hdr + "\r\n")
			want.WriteString(answer("404 Not Found", "n"+id, last, false))
		}
	}
	c := pctest.Dial(t, addr)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	wrote := make(chan error, 1)
	in := reqs.Bytes()
	go func() {
		var err error
		for off := 0; off < len(in) && err == nil; {
			k := min(len(in)-off, 1+rng.IntN([]int{7, 90, 4000}[rng.IntN(3)]))
			_, err = c.Write(in[off : off+k])
			off += k
		}
		wrote <- err
	}()
	got, err := io.ReadAll(c) // to the close after the last answer
	if err != nil {
		t.Fatalf("seed %d: %v after %d bytes", seed, err, len(got))
	}
	if err := pctest.Recv(t, wrote, "the writes"); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	masked := dateField.ReplaceAllString(string(got), "\r\nDate: D\r\n")
	if w := want.String(); masked != w {
		i := 0
		for i < len(masked) && i < len(w) && masked[i] == w[i] {
			i++
		}
		t.Fatalf("seed %d: the answers differ at byte %d of %d (want %d):\ngot  %q\nwant %q",
			seed, i, len(masked), len(w), masked[max(0, i-80):min(len(masked), i+80)], w[max(0, i-80):min(len(w), i+80)])
	}
}

// TestQuickPlainAllocs: a Server whose handler is a plain Handler (no Mux)
// answers a keep-alive request, alone and pipelined, with no allocation
// (the quick path without a route).
func TestQuickPlainAllocs(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		srv := httpd.New(httpd.Config{Logger: pctest.QuietLogger(t)}, httpd.HandlerFunc(func(w *httpd.Response, r *httpd.Request) {
			w.Send(plainHead, hello)
		}))
		t.Cleanup(srv.Close)
		rt := pctest.Start(t, percore.Config{Backend: b}, srv.Handler())
		checkNoAllocs(t, rt, rt.Addr().String(), "/plaintext")
	})
}
