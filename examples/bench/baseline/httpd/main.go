//go:build linux

// Command httpd is percore's runtime/httpd in the HTTP benchmark
// (scripts/bench-http.sh), on one loop:
//
//	httpd -addr 127.0.0.1:8080 [-backend uring] -serve adapt   # stdmux's http.ServeMux through httpd.Adapt
//	httpd -addr 127.0.0.1:8080 -serve inline  # the same endpoints as inline handlers
//
// With -serve inline, /plaintext and /json are answered on the loop and
// /sleep (time.Sleep(stdmux.SleepFor)) through httpd.Server.Go on the
// worker pool. It prints "listening on ADDR" once it accepts connections,
// and exits 0 on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/percore/percore/examples/bench/baseline/stdmux"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	backend := flag.String("backend", "auto", "auto, uring or epoll")
	serve := flag.String("serve", "inline", "adapt (stdmux's ServeMux through httpd.Adapt) or inline (httpd handlers)")
	flag.Parse()
	if err := run(*addr, *backend, *serve); err != nil {
		fmt.Fprintln(os.Stderr, "httpd:", err)
		os.Exit(1)
	}
}

func run(addr, backend, serve string) error {
	b, err := percore.ParseBackend(backend)
	if err != nil {
		return err
	}
	srv, err := newServer(serve)
	if err != nil {
		return err
	}
	defer srv.Close()
	// One loop per CPU of the affinity mask, at most GOMAXPROCS: the
	// benchmark pins one CPU with GOMAXPROCS=1.
	rt, err := percore.New(percore.Config{Addr: addr, Backend: b}, srv.Handler())
	if err != nil {
		return err
	}
	fmt.Printf("listening on %s\n", rt.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return rt.Close()
}

// newServer returns the server -serve names.
func newServer(serve string) (*httpd.Server, error) {
	var srv *httpd.Server
	var h httpd.Handler
	switch serve {
	case "adapt":
		h = httpd.Adapt(stdmux.Mux("percore-adapt"))
	case "inline":
		h = inline(&srv)
	default:
		return nil, fmt.Errorf("-serve %q: want adapt or inline", serve)
	}
	srv = httpd.New(httpd.Config{}, h)
	return srv, nil
}

// inline is stdmux's endpoints as httpd handlers.
func inline(srv **httpd.Server) *httpd.Mux {
	m := httpd.NewMux()
	m.HandleFunc("GET /plaintext", func(w *httpd.Response, r *httpd.Request) {
		w.AddHeader("Content-Type", "text/plain")
		w.WriteString("Hello, World!")
	})
	m.HandleFunc("GET /json", func(w *httpd.Response, r *httpd.Request) {
		w.AddHeader("Content-Type", "application/json")
		w.WriteString(`{"message":"Hello, World!"}` + "\n")
	})
	m.HandleFunc("GET /sleep", func(w *httpd.Response, r *httpd.Request) {
		(*srv).Go(w, func(ctx context.Context) func(*httpd.Response) {
			time.Sleep(stdmux.SleepFor)
			return func(w *httpd.Response) {
				w.AddHeader("Content-Type", "text/plain")
				w.WriteString("slept")
			}
		})
	})
	return m
}
