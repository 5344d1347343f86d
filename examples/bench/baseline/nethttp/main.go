// Command nethttp is the net/http baseline of the HTTP benchmark
// (scripts/bench-http.sh): the standard library's server, one goroutine per
// connection, with the handlers of package stdmux (/plaintext, /json and
// the blocking /sleep) written the plain way.
//
//	nethttp -addr 127.0.0.1:8080
//
// It prints "listening on ADDR" once it accepts connections, and exits 0 on
// SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/percore/percore/examples/bench/baseline/stdmux"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *addr, func(a net.Addr) { fmt.Printf("listening on %s\n", a) }); err != nil {
		fmt.Fprintf(os.Stderr, "nethttp: %v\n", err)
		os.Exit(1)
	}
}

// serve serves on addr until ctx is done.
func serve(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := &http.Server{Handler: stdmux.Mux("nethttp")}
	ready(ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return s.Shutdown(context.Background())
}
