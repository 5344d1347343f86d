// Command gnethttp is gnet v2's baseline of the HTTP benchmark
// (scripts/bench-http.sh), written as gnet's own HTTP example and its
// TechEmpower entry are: OnTraffic peeks at everything buffered, cuts it
// into requests at each "\r\n\r\n" (no parser: the plaintext test sends
// GETs without bodies), appends one plaintext response per request with
// time.Now formatted as its Date, writes them with one Write and discards
// what it answered; a partial request waits for more. Configured as gnet's
// authors run their benchmarks: multicore, SO_REUSEPORT, event loops locked
// to their OS threads; bench-http.sh builds it with -tags=poll_opt.
//
//	gnethttp -addr 127.0.0.1:8080 -loops 1
//
// It prints "listening on ADDR" once it accepts connections, and exits 0 on
// SIGINT or SIGTERM.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	loops := flag.Int("loops", runtime.GOMAXPROCS(0), "number of event loops")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *addr, *loops, func(a string) { fmt.Printf("listening on %s\n", a) }); err != nil {
		fmt.Fprintf(os.Stderr, "gnethttp: %v\n", err)
		os.Exit(1)
	}
}

type httpServer struct {
	gnet.BuiltinEventEngine
	addr   string
	ready  func(string)
	booted chan gnet.Engine
}

var _ gnet.EventHandler = (*httpServer)(nil)

// codec is a connection's response buffer.
type codec struct{ buf []byte }

var crlf2 = []byte("\r\n\r\n")

func (s *httpServer) OnBoot(eng gnet.Engine) gnet.Action {
	s.ready(boundAddr(eng, s.addr))
	s.booted <- eng
	return gnet.None
}

func (s *httpServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	c.SetContext(&codec{})
	return nil, gnet.None
}

func (s *httpServer) OnTraffic(c gnet.Conn) gnet.Action {
	hc := c.Context().(*codec)
	buf, _ := c.Peek(-1)
	consumed := 0
	for {
		i := bytes.Index(buf[consumed:], crlf2)
		if i < 0 {
			break
		}
		consumed += i + 4
		hc.buf = append(hc.buf, "HTTP/1.1 200 OK\r\nServer: gnet\r\nContent-Type: text/plain\r\nDate: "...)
		hc.buf = time.Now().UTC().AppendFormat(hc.buf, "Mon, 02 Jan 2006 15:04:05 GMT")
		hc.buf = append(hc.buf, "\r\nContent-Length: 13\r\n\r\nHello, World!"...)
	}
	if len(hc.buf) > 0 {
		if _, err := c.Write(hc.buf); err != nil {
			return gnet.Close
		}
		hc.buf = hc.buf[:0]
	}
	if _, err := c.Discard(consumed); err != nil {
		return gnet.Close
	}
	return gnet.None
}

// serve runs the engine on addr until ctx is done.
func serve(ctx context.Context, addr string, loops int, ready func(string)) error {
	if loops < 1 {
		return fmt.Errorf("-loops %d: must be at least 1", loops)
	}
	s := &httpServer{addr: addr, ready: ready, booted: make(chan gnet.Engine, 1)}
	ran := make(chan error, 1)
	go func() {
		ran <- gnet.Run(s, "tcp://"+addr,
			gnet.WithMulticore(true),
			gnet.WithReusePort(true),
			gnet.WithLockOSThread(true),
			gnet.WithNumEventLoop(loops),
		)
	}()
	var eng gnet.Engine
	select {
	case err := <-ran:
		if err == nil {
			err = errors.New("engine stopped before it booted")
		}
		return err
	case eng = <-s.booted:
	}
	select {
	case err := <-ran:
		return err
	case <-ctx.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := eng.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return <-ran
}

// boundAddr returns the address of the engine's listener ("ip:port", which
// tells the port when addr asked for port 0), or addr when it cannot be read.
func boundAddr(eng gnet.Engine, addr string) string {
	fd, err := eng.Dup()
	if err != nil {
		return addr
	}
	defer unix.Close(fd)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return addr
	}
	if sa, ok := sa.(*unix.SockaddrInet4); ok {
		return fmt.Sprintf("%d.%d.%d.%d:%d", sa.Addr[0], sa.Addr[1], sa.Addr[2], sa.Addr[3], sa.Port)
	}
	return addr
}
