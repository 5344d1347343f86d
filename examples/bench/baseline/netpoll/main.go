// Command netpoll is CloudWeGo netpoll's baseline echo server for the
// side-by-side benchmark (scripts/bench.sh), configured as netpoll's authors
// recommend:
//
//   - the number of pollers is set explicitly to -loops (netpoll's default,
//     GOMAXPROCS/20+1, gives one poller to anything under 20 cores), through
//     netpoll.Configure, which replaces the deprecated SetNumLoops;
//   - OnRequest runs on netpoll's goroutine pool (gopool), its default;
//     -nogopool runs it on a new goroutine instead, as netpoll's own
//     benchmark does with DisableGopool (Config.Runner is the non-deprecated
//     way to say the same);
//   - the handler echoes with the zero-copy API: Reader.Next(Reader.Len())
//     is a view of the connection's input buffer, Writer.WriteBinary queues
//     it for the output without copying (above netpoll's in-place
//     threshold), Flush sends it, and Release hands the input back.
//
// Usage:
//
//	netpoll -addr 127.0.0.1:7000 -loops 1 [-nogopool]
//
// It prints "listening on ADDR" once it accepts connections, and exits 0 on
// SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/cloudwego/netpoll"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7000", "address to listen on")
	loops := flag.Int("loops", runtime.GOMAXPROCS(0), "number of netpoll pollers")
	noGopool := flag.Bool("nogopool", false, "run OnRequest on a new goroutine, not on netpoll's goroutine pool")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := serve(ctx, *addr, *loops, *noGopool, func(a net.Addr) { fmt.Printf("listening on %s\n", a) })
	if err != nil {
		fmt.Fprintf(os.Stderr, "netpoll: %v\n", err)
		os.Exit(1)
	}
}

// serve configures netpoll (process-wide: call it once per process), echoes
// on addr until ctx is done, calling ready with the bound address once it
// accepts connections, and shuts the event loop down.
func serve(ctx context.Context, addr string, loops int, noGopool bool, ready func(net.Addr)) error {
	if loops < 1 {
		return fmt.Errorf("-loops %d: must be at least 1", loops)
	}
	cfg := netpoll.Config{PollerNum: loops}
	if noGopool {
		cfg.Runner = func(_ context.Context, f func()) { go f() }
	}
	if err := netpoll.Configure(cfg); err != nil {
		return fmt.Errorf("configure netpoll: %w", err)
	}
	ln, err := netpoll.CreateListener("tcp", addr)
	if err != nil {
		return err
	}
	loop, err := netpoll.NewEventLoop(echo)
	if err != nil {
		_ = ln.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- loop.Serve(ln) }()
	ready(ln.Addr())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = loop.Shutdown(shutdown)
	select {
	case <-served:
	case <-shutdown.Done(): // Shutdown before Serve got going never wakes Serve
	}
	return err
}

// echo is the OnRequest handler: it writes back everything readable.
func echo(_ context.Context, c netpoll.Connection) error {
	r, w := c.Reader(), c.Writer()
	buf, err := r.Next(r.Len())
	if err != nil {
		return err
	}
	if _, err := w.WriteBinary(buf); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return r.Release()
}
