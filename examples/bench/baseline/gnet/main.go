// Command gnet is gnet v2's baseline echo server for the side-by-side
// benchmark (scripts/bench.sh), configured as gnet's authors run their own
// benchmarks: multicore, SO_REUSEPORT (one listener per event loop, so the
// kernel spreads connections), event loops locked to their OS threads, and
// -loops event loops. bench.sh builds it with -tags=poll_opt, gnet's
// optimised poller (it also builds without the tag).
//
// The handler is gnet's own echo: Conn.Next(-1) takes everything buffered and
// Conn.Write queues it back.
//
//	gnet -addr 127.0.0.1:7000 -loops 1
//
// It prints "listening on ADDR" once it accepts connections, and exits 0 on
// SIGINT or SIGTERM. With port 0 and more than one loop each loop's listener
// gets a port of its own, so give it a fixed port then.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7000", "address to listen on")
	loops := flag.Int("loops", runtime.GOMAXPROCS(0), "number of event loops")
	protoFlag := flag.String("proto", "tcp", "tcp, udp or unix (-addr is a path); gnet serves all three")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	proto = *protoFlag
	err := serve(ctx, *addr, *loops, func(a net.Addr) { fmt.Printf("listening on %s\n", a) })
	if err != nil {
		fmt.Fprintf(os.Stderr, "gnet: %v\n", err)
		os.Exit(1)
	}
}

// echoServer is the gnet event handler.
type echoServer struct {
	gnet.BuiltinEventEngine
	addr   string
	ready  func(net.Addr)
	booted chan gnet.Engine
}

// echoServer is a gnet.EventHandler, checked by the compiler. With
// BuiltinEventEngine embedded the check cannot catch a misspelled override
// (OnTrafic would compile, and the base's no-op OnTraffic would run): the
// reason percore has no such base (docs/decisions/0018-input-buffering.md).
var _ gnet.EventHandler = (*echoServer)(nil)

// OnBoot reports the bound address and hands the engine over for stopping.
func (s *echoServer) OnBoot(eng gnet.Engine) gnet.Action {
	s.ready(boundAddr(eng, s.addr))
	s.booted <- eng
	return gnet.None
}

// OnTraffic echoes everything buffered.
func (s *echoServer) OnTraffic(c gnet.Conn) gnet.Action {
	buf, _ := c.Next(-1)
	if _, err := c.Write(buf); err != nil {
		return gnet.Close
	}
	return gnet.None
}

// boundAddr returns the address of the engine's listener (which tells the
// port when addr asked for port 0), or addr itself when it cannot be read.
func boundAddr(eng gnet.Engine, addr string) net.Addr {
	fallback := net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		fallback = net.TCPAddrFromAddrPort(ap)
	}
	fd, err := eng.Dup()
	if err != nil {
		return fallback
	}
	defer unix.Close(fd)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fallback
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)))
	case *unix.SockaddrInet6:
		return net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port)))
	}
	return fallback
}

// proto is the scheme serve hands gnet: tcp, udp or unix.
var proto = "tcp"

// serve runs the engine on addr until ctx is done, calling ready with the
// bound address once it accepts connections.
func serve(ctx context.Context, addr string, loops int, ready func(net.Addr)) error {
	if loops < 1 {
		return fmt.Errorf("-loops %d: must be at least 1", loops)
	}
	s := &echoServer{addr: addr, ready: ready, booted: make(chan gnet.Engine, 1)}
	ran := make(chan error, 1)
	go func() {
		ran <- gnet.Run(s, proto+"://"+addr,
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
