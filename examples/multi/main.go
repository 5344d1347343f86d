//go:build linux

// Command multi is one percore server on TCP, UDP and a Unix socket at
// once, echoing on each, that restarts without dropping a connection: on
// SIGHUP it starts a new copy of itself, hands it every listening socket
// (Runtime.ListenerFiles, HandoverEnv) and a channel for its connections
// (HandoverSockets), waits until the copy serves, and hands it every
// established connection (Runtime.HandOver; the copy calls Adopt). Clients
// see every request answered, no connect refused and no kept-alive
// connection closed (docs/operations.md#zero-downtime-restart). A SIGHUP
// while a restart runs is refused with a log line.
//
//	go run ./examples/multi -addr 127.0.0.1:7000 -udp 127.0.0.1:7001 -unix /tmp/multi.sock
//	kill -HUP <pid>      # a new process takes over; the old one exits
//
// With -tls-cert and -tls-key the TCP listener is TLS (tls://); a restart
// keeps it TLS and loads the key pair again (TLS connections themselves
// are closed with a goodbye, not handed over: their sessions live in the
// old process).
//
// Started by systemd with socket activation (LISTEN_FDS), it serves the
// sockets it was given and ignores its address flags.
//
// It prints one line per process once it serves:
//
//	ready pid=1234 tcp://127.0.0.1:7000 udp://127.0.0.1:7001 unix:///tmp/multi.sock
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/percore/percore/examples/internal/restart"
	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
)

// echo answers on every transport.
type echo struct{}

func (echo) OnData(c *percore.Conn, data []byte) { c.Write(data) }

// OnHandover: an echo holds nothing between calls, so a connection with
// nothing queued (all the runtime asks about) is between requests.
func (echo) OnHandover(*percore.Conn) ([]byte, error) { return nil, nil }

func (echo) OnPacket(p *percore.PacketConn, data []byte, from netip.AddrPort) {
	_ = p.WriteTo(data, from)
}

var (
	_ percore.Handler         = echo{}
	_ percore.PacketHandler   = echo{}
	_ percore.HandoverHandler = echo{}
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("multi", flag.ContinueOnError)
	fl.SetOutput(stderr)
	sf := serverflag.Register(fl, "127.0.0.1:7000") // -addr is the TCP address (empty: none)
	udp := fl.String("udp", "127.0.0.1:7001", "UDP address (empty: none)")
	unixPath := fl.String("unix", "/tmp/percore-multi.sock", "Unix socket path or @name (empty: none)")
	grace := fl.Duration("grace", 10*time.Second, "how long a graceful shutdown waits for connections")
	tf := serverflag.RegisterTLS(fl) // -tls-cert, -tls-key: the TCP listener is tls://
	if err := fl.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg := percore.Config{PacketHandler: echo{}, Logger: log}
	sf.Apply(&cfg)
	// The key pair is loaded by every process: a restart serves the
	// inherited tls:// socket as TLS with the files as they are now.
	var tcfg percore.Config
	if err := tf.Apply(&tcfg); err != nil {
		fmt.Fprintln(stderr, "multi:", err)
		return 2
	}
	cfg.TLS = tcfg.TLS
	tcpScheme := "tcp"
	if cfg.TLS != nil {
		tcpScheme = "tls"
	}
	// A restart's pipes come after the sockets: read their numbers
	// before ListenFiles clears the environment.
	child := restart.Inherited()
	files, err := percore.ListenFiles()
	if err != nil {
		fmt.Fprintln(stderr, "multi:", err)
		return 1
	}
	// The old process's connections come on a channel of their own.
	files, handoff := percore.HandoffFile(files)
	if handoff != nil {
		defer handoff.Close()
	}
	if len(files) > 0 {
		cfg.Inherited = files
	} else {
		for _, a := range []struct{ scheme, addr string }{{tcpScheme, sf.Addr}, {"udp", *udp}, {"unix", *unixPath}} {
			if a.addr != "" {
				cfg.Listen = append(cfg.Listen, a.scheme+"://"+a.addr)
			}
		}
	}
	rt, err := percore.New(cfg, echo{})
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(stderr, "multi:", err)
		return 1
	}
	ms, err := sf.ServeMetrics(rt)
	if err != nil {
		rt.Close()
		fmt.Fprintln(stderr, "multi:", err)
		return 1
	}
	if ms != nil {
		defer ms.Close()
		log.Info("multi: serving metrics", "url", "http://"+ms.Addr().String()+"/metrics")
	}
	if handoff != nil {
		if err := rt.Adopt(handoff); err != nil {
			rt.Close()
			fmt.Fprintln(stderr, "multi:", err)
			return 1
		}
	}
	// The signals are taken before the ready line: a SIGHUP sent the
	// moment it is read would otherwise find the default action
	// (terminate) still in place.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var names []string
	for _, ln := range rt.Listeners() {
		names = append(names, ln.String())
	}
	fmt.Fprintf(stdout, "ready pid=%d %s\n", os.Getpid(), strings.Join(names, " "))
	child.Ready()

	var to *restart.Parent // the new process, once one serves
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			// Signals that come while the new process starts wait in
			// sigs; handOver refuses them.
			log.Info("multi: SIGHUP: starting a new process")
			ch, err := restart.Begin(rt, args, os.Stdout, stderr, sigs, log)
			if err != nil {
				log.Error("multi: restart failed; still serving", "err", err)
				continue
			}
			to = ch
			log.Info("multi: a new process serves; handing it the connections")
		}
		break
	}
	// Signals during the shutdown or the hand-over are refused, logged.
	go func() {
		for sig := range sigs {
			log.Warn("multi: a restart or shutdown is under way; signal ignored", "signal", sig)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if to != nil {
		defer to.Close()
		began := time.Now()
		err = rt.HandOver(ctx, to.Handoff)
		st := rt.Stats()
		log.Info("multi: handed over", "connections", st.HandedOff, "declined", st.HandoffDeclined,
			"failed", st.HandoffFailed, "took", time.Since(began).Round(time.Microsecond))
	} else {
		err = rt.Shutdown(ctx)
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(stderr, "multi:", err)
		return 1
	}
	return 0
}
