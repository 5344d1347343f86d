//go:build linux

// Command file_server serves a directory over HTTP/1.1 GET and HEAD on
// percore: keep-alive, Content-Length, one Range per request (206, and 416
// for a range past the end), 404 for a missing file, 403 for a directory
// or a name that would leave the root ("..", a symbolic link out, an
// absolute name), 400 for a NUL byte or a malformed request, 405 for other
// methods. It parses requests with runtime/frame/http1 and sends each file
// with Conn.SendFile: splice through a pipe of the loop's on io_uring,
// sendfile on epoll, with no copy through Go memory.
//
//	go run ./examples/file_server -root /srv/www -addr 127.0.0.1:8080
//	curl -r 0-99 http://127.0.0.1:8080/index.html
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

type options struct {
	serverflag.Flags
	root  string
	small int
}

func main() {
	var o options
	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:8080")
	flag.StringVar(&o.root, "root", ".", "the directory to serve")
	flag.IntVar(&o.small, "small", 16<<10, "files up to this size are answered from one read and one write; larger ones with Conn.SendFile (0: all with SendFile)")
	flag.Parse()
	o.Flags = *sf
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, o, log, func(a net.Addr) { fmt.Printf("file_server: listening on %s\n", a) }); err != nil {
		fmt.Fprintln(os.Stderr, "file_server:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then shuts down gracefully; ready gets the
// listening address.
func run(ctx context.Context, o options, log *slog.Logger, ready func(net.Addr)) error {
	if fi, err := os.Stat(o.root); err != nil || !fi.IsDir() {
		return fmt.Errorf("root %s is not a directory (%v)", o.root, err)
	}
	s := &fileServer{small: o.small}
	cfg := percore.Config{
		Addr: o.Addr, Logger: log,
		LoopSetup: func(l *percore.Loop) error {
			fd, err := unix.Open(o.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return &os.PathError{Op: "open", Path: o.root, Err: err}
			}
			s.roots.Set(l, l.NewFile(fd, o.root))
			return nil
		},
	}
	o.Apply(&cfg)
	rt, err := percore.New(cfg, frame.View(s, frame.SplitConfig{}))
	if err != nil {
		return err
	}
	ms, err := o.ServeMetrics(rt)
	if err != nil {
		rt.Close()
		return err
	}
	if ms != nil {
		defer ms.Close()
		log.Info("file_server: serving metrics", "url", "http://"+ms.Addr().String()+"/metrics")
	}
	ready(rt.Addr())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return rt.Shutdown(sctx)
}
