// Command nethttp is the net/http baseline of the HTTP benchmark
// (scripts/bench-http.sh): the standard library's server, one goroutine per
// connection, with the handlers of package stdmux (/plaintext, /json and
// the blocking /sleep) written the plain way.
//
//	nethttp -addr 127.0.0.1:8080
//	nethttp -addr 127.0.0.1:8443 -tls-cert cert.pem -tls-key key.pem   # HTTPS (crypto/tls), HTTP/1.1 only
//
// It prints "listening on ADDR" once it accepts connections, and exits 0 on
// SIGINT or SIGTERM.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/percore/percore/examples/bench/baseline/stdmux"
)

var tlsCert, tlsKey string

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate chain (with -tls-key)")
	flag.StringVar(&tlsKey, "tls-key", "", "the PEM private key of -tls-cert")
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
	if tlsCert != "" {
		// HTTP/1.1 only, as percore's: no h2 by ALPN.
		s.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	ready(ln.Addr())
	errc := make(chan error, 1)
	go func() {
		if tlsCert != "" {
			errc <- s.ServeTLS(ln, tlsCert, tlsKey)
			return
		}
		errc <- s.Serve(ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return s.Shutdown(context.Background())
}
