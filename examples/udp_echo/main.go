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

	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
)

// echo sends every datagram back; WriteTo copies it.
type echo struct{}

func (echo) OnPacket(p *percore.PacketConn, data []byte, from netip.AddrPort) {
	_ = p.WriteTo(data, from)
}

var _ percore.PacketHandler = echo{}

// options are the command's flags.
type options struct {
	serverflag.Flags
	bufSize  int
	stats    bool
	gro, gso bool
}

// parse defines the command's flags on fs and parses args with them.
func parse(fs *flag.FlagSet, args []string) (options, error) {
	var o options
	sf := serverflag.Register(fs, "127.0.0.1:7001")
	fs.IntVar(&o.bufSize, "buffer", 0, "largest datagram received whole, bytes (0: 64 KiB)")
	fs.BoolVar(&o.stats, "stats", false, "print the datagram counters every second")
	fs.BoolVar(&o.gro, "gro", false, "set UDP_GRO on the sockets (Config.UDPGRO): receive a GSO sender's bursts coalesced")
	fs.BoolVar(&o.gso, "gso", false, "send the replies of a turn to one client as one UDP_SEGMENT send (Config.UDPGSO)")
	err := fs.Parse(args)
	o.Flags = *sf
	return o, err
}

func main() {
	o, _ := parse(flag.CommandLine, os.Args[1:]) // flag.CommandLine exits on a bad flag
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, nil); err != nil {
		fmt.Fprintln(os.Stderr, "udp_echo:", err)
		stop()
		os.Exit(1)
	}
}

// run serves until ctx ends, then shuts down. ready, when not nil, gets
// the bound address once the loops serve. -addr is a UDP address.
func run(ctx context.Context, o options, ready func(net.Addr)) error {
	cfg := percore.Config{Listen: []string{"udp://" + o.Addr}, PacketHandler: echo{}, PacketBufferSize: o.bufSize, UDPGRO: o.gro, UDPGSO: o.gso,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	o.Apply(&cfg)
	rt, err := percore.New(cfg, nil)
	if err != nil {
		return err
	}
	fmt.Println(rt.Report())
	ms, err := o.ServeMetrics(rt)
	if err != nil {
		rt.Close()
		return err
	}
	if ms != nil {
		defer ms.Close()
		fmt.Printf("metrics on http://%s/metrics\n", ms.Addr())
	}
	fmt.Printf("listening on udp://%s, %d loops, one socket each\n", rt.Addr(), len(rt.Loops()))
	if ready != nil {
		ready(rt.Addr())
	}
	if o.stats {
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
