//go:build linux

package httpd_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// TestErrorAnswerThenFreshConnection: an error answer (431, a lingering
// close) followed at once by a fresh connection, many times: the fresh one
// is always answered. On io_uring the lingering close's shutdown was a
// ring entry naming the descriptor by number, not ordered with the close,
// and now and then it shut the write side of the next connection accepted
// on that number: TestNetHTTPClientFacts' absolute-form case, one run in
// five under -race (its 431 case comes just before).
func TestErrorAnswerThenFreshConnection(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		cl := client(t)
		hdr := http.Header{}
		for i := range 120 {
			hdr.Set("X-H"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)), "v")
		}
		for i := range 1000 {
			req, _ := http.NewRequest("GET", "http://"+ts.addr+"/plaintext", nil)
			req.Header = hdr
			resp, err := cl.Do(req)
			if err != nil || resp.StatusCode != 431 {
				t.Fatalf("%d: %v %v", i, resp, err)
			}
			resp.Body.Close()
			c := pctest.Dial(t, ts.addr)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			c.Write([]byte("GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"))
			resp, err = http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("the fresh connection after %d error answers: %v %v", i, resp, err)
			}
			c.Close()
		}
	})
}
