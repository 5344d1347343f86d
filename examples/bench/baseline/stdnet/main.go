// Command stdnet is the standard library's baseline echo server for the
// side-by-side benchmark (scripts/bench.sh): one goroutine per connection,
// each echoing with a buffer of its own, allocated once, the way a Go
// programmer writes an echo server with package net.
//
// It does not use io.Copy: a *net.TCPConn implements io.ReaderFrom, so
// io.Copy(c, c) would move the bytes with splice(2) through a pipe, which is
// not what a request/response server does.
//
//	stdnet -addr 127.0.0.1:7000
//
// -loops is accepted for a command line shared with the other servers: a
// goroutine-per-connection server has no loops, so it sets GOMAXPROCS. It prints "listening on ADDR" once it
// accepts connections, and exits 0 on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7000", "address to listen on")
	loops := flag.Int("loops", runtime.GOMAXPROCS(0), "GOMAXPROCS (there are no event loops)")
	bufSize := flag.Int("buf", 16<<10, "per-connection buffer size in bytes")
	network := flag.String("net", "tcp", "tcp, unix (-addr is a path) or udp")
	flag.Parse()
	if *loops < 1 {
		fmt.Fprintln(os.Stderr, "stdnet: -loops must be at least 1")
		os.Exit(2)
	}
	runtime.GOMAXPROCS(*loops)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ready := func(a net.Addr) { fmt.Printf("listening on %s\n", a) }
	var err error
	switch *network {
	case "udp":
		err = serveUDP(ctx, *addr, *loops, ready)
	default:
		listenNet = *network
		err = serve(ctx, *addr, *bufSize, ready)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "stdnet: %v\n", err)
		os.Exit(1)
	}
}

// listenNet is serve's network: "tcp", or "unix" with -net unix.
var listenNet = "tcp"

// serveUDP echoes datagrams on addr as the standard library's users would:
// a net.UDPConn and one goroutine per CPU reading with ReadFromUDPAddrPort
// (no allocation) and replying with WriteToUDPAddrPort, until ctx is done.
func serveUDP(ctx context.Context, addr string, readers int, ready func(net.Addr)) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	c := pc.(*net.UDPConn)
	ready(c.LocalAddr())
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64<<10)
			for {
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				_, _ = c.WriteToUDPAddrPort(buf[:n], from)
			}
		}()
	}
	wg.Wait()
	return nil
}

// serve echoes on addr until ctx is done, calling ready with the bound
// address once it accepts connections. It returns after closing the listener
// and every connection.
func serve(ctx context.Context, addr string, bufSize int, ready func(net.Addr)) error {
	ln, err := net.Listen(listenNet, addr)
	if err != nil {
		return err
	}
	ready(ln.Addr())

	var (
		mu    sync.Mutex
		conns = make(map[net.Conn]struct{})
		wg    sync.WaitGroup
	)
	stop := context.AfterFunc(ctx, func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				break
			}
			time.Sleep(5 * time.Millisecond) // EMFILE and the like: keep serving the others
			continue
		}
		mu.Lock()
		if ctx.Err() != nil {
			mu.Unlock()
			_ = c.Close()
			break
		}
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			echo(c, bufSize)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			_ = c.Close()
		})
	}
	wg.Wait()
	return nil
}

// echo writes back everything it reads from c until c fails or closes.
func echo(c net.Conn, bufSize int) {
	buf := make([]byte, bufSize)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
