// Command nethttp is the net/http baseline of the HTTP benchmark
// (scripts/bench-http.sh): the standard library's server, one goroutine per
// connection, with the /plaintext and /json handlers written the plain way.
//
//	nethttp -addr 127.0.0.1:8080
//
// It prints "listening on ADDR" once it accepts connections, and exits 0 on
// SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
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

var hello = []byte("Hello, World!")

func mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /plaintext", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Server", "nethttp")
		w.Write(hello)
	})
	m.HandleFunc("GET /json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Server", "nethttp")
		json.NewEncoder(w).Encode(struct {
			Message string `json:"message"`
		}{"Hello, World!"})
	})
	return m
}

// serve serves on addr until ctx is done.
func serve(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := &http.Server{Handler: mux()}
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
