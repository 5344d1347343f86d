//go:build linux

package httpd_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/internal/rawconn"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// BenchmarkPlaintext is the request path of TechEmpower's plaintext test
// (GET /plaintext: Content-Type, "Hello, World!") through the Mux, one
// request at a time and 16 pipelined in one write, over loopback on one
// loop. Its time includes the client's and the kernel's: profile it
// (-cpuprofile) and read runtime/httpd's share, or compare variants of the
// package with benchstat. allocs/op are the server's and the client's
// (rawconn allocates nothing).
func BenchmarkPlaintext(b *testing.B) { benchBackends(b, "/plaintext") }

// benchBackends runs benchPipelined on path on each backend, one request
// at a time and 16 pipelined.
func benchBackends(b *testing.B, path string) {
	for _, bk := range []struct {
		name string
		b    percore.Backend
	}{{"uring", percore.IOURing}, {"epoll", percore.Epoll}} {
		for _, depth := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/P%d", bk.name, depth), func(b *testing.B) {
				benchPipelined(b, bk.b, path, depth)
			})
		}
	}
}

func benchPipelined(b *testing.B, backend percore.Backend, path string, depth int) {
	srv := httpd.New(httpd.Config{Logger: pctest.QuietLogger(b)}, testMux(nil))
	b.Cleanup(srv.Close)
	rt := pctest.Start(b, percore.Config{Backend: backend, Cores: []int{0}}, srv.Handler())
	// rawconn reads back as many bytes as it sent: pad the request to the
	// length of its response.
	resp := probe(b, rt.Addr().String(), path)
	req := "GET " + path + " HTTP/1.1\r\nHost: x\r\nX-Pad: \r\n\r\n"
	pad := resp - len(req)
	if pad <= 0 {
		b.Fatalf("response %d bytes, request %d", resp, len(req))
	}
	req = strings.Replace(req, "X-Pad: ", "X-Pad: "+strings.Repeat("p", pad), 1)
	c := rawconn.Dial(b, rt.Addr())
	in := bytes.Repeat([]byte(req), depth)
	for range 100 {
		if err := c.RoundTrip(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		if err := c.RoundTrip(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*depth), "ns/req")
}

// BenchmarkPlaintextSend is BenchmarkPlaintext with the handler a user
// writes for speed: a Head prepared once and Send (the length known
// before the head is written).
func BenchmarkPlaintextSend(b *testing.B) { benchBackends(b, "/plaintext/send") }
