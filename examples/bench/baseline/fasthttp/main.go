// Command fasthttp is the fasthttp baseline of the HTTP benchmark
// (scripts/bench-http.sh): a fasthttp.Server as its authors write one
// (and as their TechEmpower entry does, without prefork, which would start
// a process per CPU): the /plaintext and /json endpoints on the server's
// defaults, which add Server and a cached Date to every response.
//
//	fasthttp -addr 127.0.0.1:8080
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
	"os"
	"os/signal"
	"syscall"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *addr, func(a net.Addr) { fmt.Printf("listening on %s\n", a) }); err != nil {
		fmt.Fprintf(os.Stderr, "fasthttp: %v\n", err)
		os.Exit(1)
	}
}

var hello = []byte("Hello, World!")

type message struct {
	Message string `json:"message"`
}

func handle(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/plaintext":
		ctx.SetContentType("text/plain")
		ctx.SetBody(hello)
	case "/json":
		ctx.SetContentType("application/json")
		b, _ := json.Marshal(message{Message: "Hello, World!"})
		ctx.SetBody(b)
	default:
		ctx.Error("404 Not Found", fasthttp.StatusNotFound)
	}
}

// serve serves on addr until ctx is done.
func serve(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s := &fasthttp.Server{Handler: handle, Name: "fasthttp"}
	ready(ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return s.Shutdown()
}
