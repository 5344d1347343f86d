//go:build linux

package httpd_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/httpd"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// quiet keeps the examples' runtimes from logging their start and stop.
var quiet = slog.New(slog.DiscardHandler)

// oneCore is the first CPU the examples may use.
func oneCore() []int {
	cores, err := cpu.Cores()
	if err != nil || len(cores) == 0 {
		return nil
	}
	return cores[:1]
}

// A server with an inline handler and one that waits off the loop.
func Example() {
	var srv *httpd.Server
	mux := httpd.NewMux()
	mux.HandleFunc("GET /hello/{name}", func(w *httpd.Response, r *httpd.Request) {
		w.AddHeader("Content-Type", "text/plain")
		w.WriteString("hello, ")
		w.Write(r.PathValue("name"))
	})
	mux.HandleFunc("GET /slow", func(w *httpd.Response, r *httpd.Request) {
		srv.Go(w, func(ctx context.Context) func(*httpd.Response) {
			time.Sleep(time.Millisecond) // a blocking call, on a worker
			return func(w *httpd.Response) { w.WriteString("done") }
		})
	})
	srv = httpd.New(httpd.Config{}, mux)
	defer srv.Close()
	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: oneCore(), Logger: quiet}, srv.Handler())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	for _, path := range []string{"/hello/gopher", "/slow"} {
		resp, err := http.Get("http://" + rt.Addr().String() + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 hello, gopher
	// 200 done
}

// A net/http handler served through the adapter.
func ExampleAdapt() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "item %s", r.PathValue("id"))
	})
	srv := httpd.New(httpd.Config{}, httpd.Adapt(mux))
	defer srv.Close()
	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: oneCore(), Logger: quiet}, srv.Handler())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	resp, err := http.Get("http://" + rt.Addr().String() + "/items/42")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// 200 item 42
}

// The fast door to a TCP backend: the loop's own connection pool
// (runtime/pool/upstream), no goroutine. The handler holds its response,
// the exchange runs on the loop, and its callback writes the answer and
// ends it.
func ExampleResponse_Hold() {
	// The backend: a line echo server.
	backend, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: oneCore(), Logger: quiet},
		percore.HandlerFunc(func(c *percore.Conn, data []byte) { c.Write(data) }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer backend.Close()
	m, err := upstream.New(backend.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pool.New[*upstream.Conn](m, pool.Config{MaxSize: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	mux := httpd.NewMux()
	mux.HandleFunc("GET /echo/{word}", func(w *httpd.Response, r *httpd.Request) {
		local := p.Local(r.Conn().Loop())
		line := append(append([]byte(nil), r.PathValue("word")...), '\n')
		// One Exchange per request in flight (keep a free list of them
		// per loop to allocate nothing).
		x := upstream.NewExchange(local, frame.ScanLines(64), upstream.ExchangeConfig{Timeout: time.Second})
		w.Hold()
		local.Get(func(lease pool.Lease[*upstream.Conn], err error) {
			if err != nil {
				w.WriteHeader(502)
				w.End()
				return
			}
			x.Do(lease, line, func(reply []byte, err error) {
				if err != nil {
					w.WriteHeader(502)
				} else {
					w.Write(reply)
				}
				w.End()
			})
		})
	})
	srv := httpd.New(httpd.Config{}, mux)
	defer srv.Close()
	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: oneCore(), Logger: quiet}, srv.Handler())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	resp, err := http.Get("http://" + rt.Addr().String() + "/echo/hello")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// 200 hello
}
