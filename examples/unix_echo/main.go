//go:build linux

// Command unix_echo is percore's echo server on a Unix stream socket: the
// socket is bound once and every loop accepts from it, the accepting loop
// handing connections round-robin to the others so that a burst spreads
// (docs/decisions/0020); the connections are ordinary percore Conns, with
// every limit and counter a TCP connection has.
//
//	go run ./examples/unix_echo -addr /tmp/echo.sock -mode 0660
//	go run ./examples/unix_echo -addr @percore-echo      # abstract name
//
// It shows what happens to a socket file left at the path: a stale one
// (its server gone: a connect is refused) is removed and served; a live one
// (another server answers) is refused with a clear error and left alone.
// Run it twice on the same path to see the second refuse.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
)

type echo struct{}

func (echo) OnData(c *percore.Conn, data []byte) { c.Write(data) }

var _ percore.Handler = echo{}

// options are the command's flags. -addr is the socket's path, or @name
// for the abstract namespace.
type options struct {
	serverflag.Flags
	mode string // the socket file's permissions, octal; "" for the umask's
}

// parse defines the command's flags on fl and parses args with them.
func parse(fl *flag.FlagSet, args []string) (options, error) {
	var o options
	sf := serverflag.Register(fl, "/tmp/percore-echo.sock")
	fl.StringVar(&o.mode, "mode", "", "socket file permissions, octal (e.g. 0660; default: what the umask gives)")
	err := fl.Parse(args)
	o.Flags = *sf
	return o, err
}

func main() {
	o, _ := parse(flag.CommandLine, os.Args[1:]) // flag.CommandLine exits on a bad flag
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, nil); err != nil {
		fmt.Fprintln(os.Stderr, "unix_echo:", err)
		stop()
		os.Exit(1)
	}
}

// run serves until ctx ends, then shuts down. ready, when not nil, gets
// the bound address once the loops serve.
func run(ctx context.Context, o options, ready func(net.Addr)) error {
	path := o.Addr
	cfg := percore.Config{Listen: []string{"unix://" + path}, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	o.Apply(&cfg)
	if o.mode != "" {
		var m uint32
		if _, err := fmt.Sscanf(o.mode, "%o", &m); err != nil {
			return fmt.Errorf("-mode %q: %w", o.mode, err)
		}
		cfg.UnixMode = fs.FileMode(m)
	}
	describe(path)
	rt, err := percore.New(cfg, echo{})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w\n(another server is using %s; the file is left alone)", err, path)
		}
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
	fmt.Printf("listening on unix://%s with %d loops\n", rt.Listeners()[0].Addr, len(rt.Loops()))
	if ready != nil {
		ready(rt.Listeners()[0].Addr)
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := rt.Stats()
	fmt.Fprintf(os.Stderr, "unix_echo: %d connections, %d handed to another loop\n", s.Accepts, s.HandedOver)
	return rt.Shutdown(sctx) // removes the socket file
}

// describe says what is at path before the runtime binds it.
func describe(path string) {
	if path == "" || path[0] == '@' {
		return
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return
	}
	if fi.Mode().Type() != fs.ModeSocket {
		fmt.Printf("%s exists and is not a socket: it will be left alone, and the bind will fail\n", path)
		return
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		fmt.Printf("%s is a stale socket file (%v): removing it\n", path, err)
		return
	}
	c.Close()
	fmt.Printf("%s has a live server\n", path)
}
