//go:build linux

package httpd_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// TestRouteCacheModel: a connection remembers its last static route, so
// its routing must be what a connection with nothing remembered gets.
// Seeded random pipelines of requests (static paths under several
// methods, HEAD, path parameters, escapes, redirects, 404 and 405) are
// sent on one connection, and each request again alone on a new one (the
// oracle): every answer's status, Allow, Location and body agree.
func TestRouteCacheModel(t *testing.T) {
	m := httpd.NewMux()
	for _, p := range []string{"GET /a", "POST /a", "/b", "GET /c/{x}", "GET /d/", "GET /e/{$}", "PUT /e/", "GET /f%2Fg", "GET /a/b"} {
		m.HandleFunc(p, func(w *httpd.Response, r *httpd.Request) {
			fmt.Fprintf(w, "%s %s %s", p, r.Method(), r.PathValue("x"))
		})
	}
	methods := []string{"GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE"}
	paths := []string{"/a", "/a", "/b", "/a/b", "/c/1", "/c/%32", "/d/x", "/d", "/e/", "/e", "/f%2Fg", "/f/g", "/%61", "/a/", "/x", "/a?q=1", "/b/../a"}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		srv := httpd.New(httpd.Config{Logger: pctest.QuietLogger(t)}, m)
		t.Cleanup(srv.Close)
		rt := pctest.Start(t, percore.Config{Backend: b}, srv.Handler())
		addr := rt.Addr().String()
		for seed := uint64(1); seed <= 4; seed++ {
			rng := rand.New(rand.NewPCG(seed, 25))
			var reqs [][]byte
			for range 30 {
				reqs = append(reqs, fmt.Appendf(nil, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
					methods[rng.IntN(len(methods))], paths[rng.IntN(len(paths))]))
			}
			got := exchange(t, addr, reqs)
			for i, req := range reqs {
				want := exchange(t, addr, reqs[i:i+1])
				if got[i] != want[0] {
					t.Fatalf("seed %d, request %d %q: on the busy connection %q, alone %q", seed, i, req, got[i], want[0])
				}
			}
		}
	})
}

// exchange sends reqs in one write on a new connection and returns each
// answer's status, Allow, Location and body.
func exchange(t *testing.T, addr string, reqs [][]byte) []string {
	t.Helper()
	c := pctest.Dial(t, addr)
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(bytes.Join(reqs, nil)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	out := make([]string, len(reqs))
	for i, req := range reqs {
		method, _, _ := bytes.Cut(req, []byte(" "))
		resp, err := http.ReadResponse(br, &http.Request{Method: string(method)})
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		out[i] = fmt.Sprintf("%d allow=%q location=%q %q", resp.StatusCode, resp.Header.Get("Allow"), resp.Header.Get("Location"), body)
	}
	return out
}
