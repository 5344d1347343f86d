//go:build linux

package httpd_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/internal/rawconn"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// adaptAllocBound is the most allocations a keep-alive request to a small
// net/http handler may cost through Adapt, the handler's own included
// (two Header().Set, one Write): the http.Request, its context, its
// Header, the ResponseWriter's. Not zero, as net/http's types need the
// heap, but bounded, so that a regression shows.
const adaptAllocBound = 16

// TestAdaptAllocs counts the allocations of a keep-alive request through
// Adapt (the whole process's: loop, worker and handler).
func TestAdaptAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts need a build without -race")
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.Header().Set("Server", "x")
			w.Write([]byte("Hello, World!"))
		})
		srv := httpd.New(httpd.Config{Logger: pctest.QuietLogger(t)}, httpd.Adapt(h))
		t.Cleanup(srv.Close)
		rt := pctest.Start(t, percore.Config{Backend: b}, srv.Handler())
		resp := probe(t, rt.Addr().String(), "/plaintext")
		req := "GET /plaintext HTTP/1.1\r\nHost: x\r\nX-Pad: \r\n\r\n"
		req = strings.Replace(req, "X-Pad: ", "X-Pad: "+strings.Repeat("p", resp-len(req)), 1)
		c := rawconn.Dial(t, rt.Addr())
		one := []byte(req)
		for range 200 {
			if err := c.RoundTrip(one); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		allocs := testing.AllocsPerRun(1000, func() {
			if e := c.RoundTrip(one); e != nil {
				err = e
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v allocations per request", allocs)
		if allocs > adaptAllocBound {
			t.Fatalf("%v allocations per request, want at most %d", allocs, adaptAllocBound)
		}
	})
}
