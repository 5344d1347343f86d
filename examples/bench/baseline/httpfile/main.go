//go:build linux

// Command httpfile is the net/http baseline of examples/file_server for the
// side-by-side benchmark (scripts/bench-files.sh): http.FileServer over
// http.Dir, as its documentation shows it, on a plain http.Server (which
// keeps connections alive and, for *os.File bodies on a TCP connection,
// sends with sendfile through io.Copy's ReaderFrom).
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	root := flag.String("root", ".", "the directory to serve")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpfile:", err)
		os.Exit(1)
	}
	fmt.Printf("httpfile: listening on %s\n", ln.Addr())
	if err := http.Serve(ln, http.FileServer(http.Dir(*root))); err != nil {
		fmt.Fprintln(os.Stderr, "httpfile:", err)
		os.Exit(1)
	}
}
