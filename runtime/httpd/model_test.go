//go:build linux

package httpd_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// TestPipelineModel sends seeded random pipelines that mix every way a
// request is answered (inline, a buffered body, a streamed body, held by a
// loop timer, offloaded to the worker pool, chunked and sized responses,
// 404s) in random pieces, and checks every answer against an oracle, in
// order, with its framing: the connection's answers are in the order of
// its requests however each is answered, and none is lost or doubled.
func TestPipelineModel(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		ts := start(t, b, httpd.Config{})
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
				runModel(t, ts.addr, seed)
			})
		}
	})
}

type expect struct {
	status  int
	body    string
	chunked bool // the answer must be chunked (false: with a Content-Length)
	head    bool
}

func runModel(t *testing.T, addr string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 25))
	var reqs []byte
	var want []expect
	for range 40 + rng.IntN(40) {
		switch k := rng.IntN(9); k {
		case 0:
			reqs = append(reqs, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"...)
			want = append(want, expect{status: 200, body: "Hello, World!"})
		case 1:
			id := strconv.Itoa(rng.IntN(1000))
			reqs = append(reqs, "GET /users/"+id+"?x=q%20"+id+" HTTP/1.1\r\nHost: x\r\n\r\n"...)
			want = append(want, expect{status: 200, body: "user " + id + " x=q " + id})
		case 2:
			n := rng.IntN(3000)
			reqs = append(reqs, fmt.Sprintf("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", n, strings.Repeat("b", n))...)
			want = append(want, expect{status: 200, body: "got " + strconv.Itoa(n)})
		case 3:
			body := string(bigBody[:rng.IntN(5000)])
			if rng.IntN(2) == 0 {
				reqs = append(reqs, fmt.Sprintf("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)...)
				want = append(want, expect{status: 200, body: body})
			} else {
				reqs = append(reqs, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"...)
				for rest := body; len(rest) > 0; {
					k := min(len(rest), 1+rng.IntN(700))
					reqs = append(reqs, fmt.Sprintf("%x\r\n%s\r\n", k, rest[:k])...)
					rest = rest[k:]
				}
				reqs = append(reqs, "0\r\n\r\n"...)
				want = append(want, expect{status: 200, body: body, chunked: true})
			}
		case 4:
			reqs = append(reqs, "GET /timer HTTP/1.1\r\nHost: x\r\n\r\n"...)
			want = append(want, expect{status: 200, body: "timer"})
		case 5:
			reqs = append(reqs, fmt.Sprintf("GET /sleep?ms=%d HTTP/1.1\r\nHost: x\r\n\r\n", rng.IntN(3))...)
			want = append(want, expect{status: 200, body: "slept\n"})
		case 6:
			n := rng.IntN(150000)
			reqs = append(reqs, fmt.Sprintf("GET /big?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", n)...)
			want = append(want, expect{status: 200, body: string(bigBody[:n]), chunked: n > 64<<10})
		case 7:
			reqs = append(reqs, "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n"...)
			want = append(want, expect{status: 404, body: "404 Not Found\n"})
		case 8:
			reqs = append(reqs, "HEAD /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"...)
			want = append(want, expect{status: 200, head: true})
		}
	}
	c := pctest.Dial(t, addr)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	wrote := make(chan error, 1)
	go func() {
		var err error
		for off := 0; off < len(reqs) && err == nil; {
			k := min(len(reqs)-off, 1+rng.IntN(4000))
			_, err = c.Write(reqs[off : off+k])
			off += k
		}
		wrote <- err
	}()
	rd := bufio.NewReader(c)
	for i, w := range want {
		req := &http.Request{Method: "GET"}
		if w.head {
			req.Method = "HEAD"
		}
		resp, err := http.ReadResponse(rd, req)
		if err != nil {
			t.Fatalf("seed %d, answer %d: %v", seed, i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != w.status || string(body) != w.body {
			t.Fatalf("seed %d, answer %d: %d %d bytes %v, want %d %d bytes", seed, i, resp.StatusCode, len(body), err, w.status, len(w.body))
		}
		if chunked := len(resp.TransferEncoding) > 0; !w.head && chunked != w.chunked {
			t.Fatalf("seed %d, answer %d: chunked %v, want %v", seed, i, chunked, w.chunked)
		}
		if w.head && resp.ContentLength != 13 {
			t.Fatalf("seed %d, answer %d: HEAD Content-Length %d", seed, i, resp.ContentLength)
		}
	}
	if err := pctest.Recv(t, wrote, "the writes"); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
}
