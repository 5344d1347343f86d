// Command tlsnbio is issue 26's nbio peer for the idle TLS memory
// measurement: a TLS server on lesismal/nbio v1.6.8's engine with its own
// TLS, llib's fork of crypto/tls (github.com/lesismal/llib/std/crypto/tls,
// which decrypts records appended to it rather than read from a socket),
// wired as nbio's TLS example wires it (extension/tls: WrapOpen makes the
// connection's tls.Conn, WrapData appends what the poller read and reads
// the plaintext back, the handshake included, on nbio's poller goroutine;
// no goroutine per connection). Each connection's request gets one fixed
// reply, as percore's and net/http's servers give in TestTLSIdleMemory.
//
// It prints "listening ADDR" once it listens and then answers lines on its
// standard input, for the measurement that drives it (runtime's
// TestTLSIdleMemory, -tls.idle.mode exec):
//
//	count   the connections that got their reply
//	gc      runtime.GC(), then "ok"
//	free    debug.FreeOSMemory(), then "ok"
//
// and exits when its input ends.
//
//	GOMAXPROCS=2 taskset -c 0 tlsnbio -addr 127.0.0.1:0 -cert server.pem -key server.key
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"github.com/lesismal/llib/std/crypto/tls"
	"github.com/lesismal/nbio"
	ntls "github.com/lesismal/nbio/extension/tls"
	"github.com/lesismal/nbio/logging"
)

// reply is what every request gets (internal/pctest.IdleTLSReply).
const reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	certFile := flag.String("cert", "", "server certificate chain (PEM)")
	keyFile := flag.String("key", "", "server key (PEM)")
	flag.Parse()
	if err := run(*addr, *certFile, *keyFile, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tlsnbio:", err)
		os.Exit(1)
	}
}

// run serves until in ends, answering its commands on out.
func run(addr, certFile, keyFile string, in io.Reader, out io.Writer) error {
	logging.SetLevel(logging.LevelError)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var served atomic.Int64
	g := nbio.NewEngine(nbio.Config{
		Network: "tcp",
		Addrs:   []string{ln.Addr().String()},
		Listen:  func(string, string) (net.Listener, error) { return ln, nil },
	})
	g.OnOpen(ntls.WrapOpen(cfg, false, nil))
	g.OnClose(ntls.WrapClose(nil))
	g.OnData(ntls.WrapData(func(c *nbio.Conn, tc *tls.Conn, data []byte) {
		if _, err := tc.Write([]byte(reply)); err == nil {
			served.Add(1)
		}
	}))
	if err := g.Start(); err != nil {
		return err
	}
	defer g.Stop()
	fmt.Fprintln(out, "listening", ln.Addr())
	cmds := bufio.NewScanner(in)
	for cmds.Scan() {
		switch strings.TrimSpace(cmds.Text()) {
		case "count":
			fmt.Fprintln(out, served.Load())
		case "gc":
			runtime.GC()
			fmt.Fprintln(out, "ok")
		case "free":
			debug.FreeOSMemory()
			fmt.Fprintln(out, "ok")
		default:
			fmt.Fprintln(out, "unknown command")
		}
	}
	return cmds.Err()
}
