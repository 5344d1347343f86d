//go:build linux

// Command udp_echo is percore's thread-per-core UDP echo server: one loop
// per CPU, each with its own SO_REUSEPORT datagram socket (the kernel
// spreads the sources over them), every datagram sent back to its source
// from the loop's thread without an allocation.
//
//	go run ./examples/udp_echo -addr 127.0.0.1:7001 -cores 0-1
//	go run ./examples/udp_echo -addr [::]:7001 -stats   # dual-stack
//
// On io_uring each socket has one multishot recvmsg filling provided
// buffers, and each reply is a sendmsg submitted with the loop's next
// enter; on epoll a readable socket is read with recvmmsg and the turn's
// replies go out with sendmmsg.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/metrics"
)

// echo sends every datagram back; WriteTo copies it.
type echo struct{}

func (echo) OnPacket(p *percore.PacketConn, data []byte, from netip.AddrPort) {
	_ = p.WriteTo(data, from)
}

var _ percore.PacketHandler = echo{}

func main() {
	addr := flag.String("addr", "127.0.0.1:7001", "UDP listen address")
	cores := flag.String("cores", "", "CPU list for the loops, e.g. 0-3 (default: the affinity mask, at most GOMAXPROCS of it)")
	backend := flag.String("backend", "auto", "auto, uring or epoll")
	bufSize := flag.Int("buffer", 0, "largest datagram received whole, bytes (0: 64 KiB)")
	stats := flag.Bool("stats", false, "print the datagram counters every second")
	metricsAddr := flag.String("metrics", "", "serve Prometheus metrics and pprof on this address (default: off)")
	gro := flag.Bool("gro", false, "set UDP_GRO on the sockets (Config.UDPGRO): receive a GSO sender's bursts coalesced")
	gso := flag.Bool("gso", false, "send the replies of a turn to one client as one UDP_SEGMENT send (Config.UDPGSO)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *cores, *backend, *bufSize, *stats, *metricsAddr, *gro, *gso, nil); err != nil {
		fmt.Fprintln(os.Stderr, "udp_echo:", err)
		stop()
		os.Exit(1)
	}
}

// run serves until ctx ends, then shuts down. ready, when not nil, gets
// the bound address once the loops serve.
func run(ctx context.Context, addr, cores, backend string, bufSize int, stats bool, metricsAddr string, gro, gso bool, ready func(net.Addr)) error {
	cfg := percore.Config{Listen: []string{"udp://" + addr}, PacketHandler: echo{}, PacketBufferSize: bufSize, UDPGRO: gro, UDPGSO: gso,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	var err error
	if cfg.Backend, err = percore.ParseBackend(backend); err != nil {
		return err
	}
	if cores != "" {
		if cfg.Cores, err = cpu.ParseList(cores); err != nil {
			return err
		}
	}
	rt, err := percore.New(cfg, nil)
	if err != nil {
		return err
	}
	fmt.Println(rt.Report())
	if metricsAddr != "" {
		ms, err := metrics.Listen(metricsAddr, rt)
		if err != nil {
			rt.Close()
			return err
		}
		defer ms.Close()
	}
	fmt.Printf("listening on udp://%s, %d loops, one socket each\n", rt.Addr(), len(rt.Loops()))
	if ready != nil {
		ready(rt.Addr())
	}
	if stats {
		go printStats(ctx, rt)
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return rt.Shutdown(sctx)
}

func printStats(ctx context.Context, rt *percore.Runtime) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	prev := rt.Stats()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := rt.Stats()
		fmt.Fprintf(os.Stderr, "in %d/s out %d/s truncated %d lost %d dropped %d errors %d syscalls/s %d\n",
			s.PacketsIn-prev.PacketsIn, s.PacketsOut-prev.PacketsOut, s.PacketsTruncated, s.PacketsLost,
			s.PacketDrops, s.PacketErrors, s.Syscalls-prev.Syscalls)
		prev = s
	}
}
