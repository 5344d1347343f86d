//go:build linux

// Command fanout shows a small pool's backpressure: one loop starts many
// requests at once, and they share a pool of a few upstream connections.
// The pool opens no more than -max connections; the other requests queue,
// first come first served, and each gets a connection as one comes back.
// It prints how many connections were opened, the peak in use, and how
// long requests waited.
//
//	go run ./examples/fanout -requests 10000 -max 4
//
// Without -upstream it starts its own echo upstream (a percore runtime).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

type config struct {
	upstream string
	requests int
	max      int
	wait     time.Duration
}

func main() {
	var cfg config
	flag.StringVar(&cfg.upstream, "upstream", "", "line echo upstream address (default: an echo server of its own)")
	flag.IntVar(&cfg.requests, "requests", 1000, "requests started at once")
	flag.IntVar(&cfg.max, "max", 4, "pool size")
	flag.DurationVar(&cfg.wait, "wait", 30*time.Second, "connection timeout")
	flag.Parse()
	if err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

// report is what a run measured.
type report struct {
	ok, failed int
	peak       int
	elapsed    time.Duration
	state      pool.State
	stats      pool.Statistics
	accepts    uint64 // by the built-in upstream; 0 with -upstream
}

func run(w io.Writer, cfg config) error {
	r, err := fanout(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d requests on one loop, pool max size %d: %d ok, %d failed in %v\n",
		cfg.requests, cfg.max, r.ok, r.failed, r.elapsed.Round(time.Microsecond))
	fmt.Fprintf(w, "connections opened: %d (peak in use %d)\n", r.stats.Created, r.peak)
	if r.accepts > 0 {
		fmt.Fprintf(w, "upstream accepted: %d\n", r.accepts)
	}
	fmt.Fprintf(w, "gets served by an idle connection %d, after waiting %d (average wait %v)\n",
		r.stats.GetsDirect, r.stats.GetsWaited, r.stats.AverageWait().Round(time.Microsecond))
	fmt.Fprintf(w, "pool now: %v\n", r.state)
	return nil
}

func fanout(cfg config) (report, error) {
	if cfg.requests < 1 {
		return report{}, errors.New("need at least one request")
	}
	quiet := slog.New(slog.DiscardHandler)
	cores, err := cpu.Cores()
	if err != nil {
		return report{}, err
	}
	var echo *percore.Runtime
	if cfg.upstream == "" {
		echo, err = percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: cores[:1], Logger: quiet},
			percore.HandlerFunc(func(c *percore.Conn, data []byte) { c.Write(data) }))
		if err != nil {
			return report{}, err
		}
		defer echo.Close()
		cfg.upstream = echo.Addr().String()
	}
	m, err := upstream.New(cfg.upstream)
	if err != nil {
		return report{}, err
	}
	p, err := pool.New[*upstream.Conn](m, pool.Config{MaxSize: cfg.max, ConnectionTimeout: cfg.wait})
	if err != nil {
		return report{}, err
	}
	defer p.Close()
	rt, err := percore.New(percore.Config{Cores: cores[:1], Logger: quiet}, nil)
	if err != nil {
		return report{}, err
	}
	defer rt.Close()
	loop := rt.Loops()[0]

	f := &fan{n: cfg.requests, done: make(chan struct{})}
	start := time.Now()
	if err := loop.Post(func() {
		f.local = p.Local(loop)
		for i := range cfg.requests {
			f.request(i)
		}
	}); err != nil {
		return report{}, err
	}
	<-f.done
	r := report{elapsed: time.Since(start)}
	finished := make(chan struct{})
	if err := loop.Post(func() {
		r.ok, r.failed, r.peak = f.ok, f.failed, f.peak
		r.state, r.stats = f.local.State(), f.local.Statistics()
		close(finished)
	}); err != nil {
		return report{}, err
	}
	<-finished
	if echo != nil {
		r.accepts = echo.Stats().Accepts
	}
	return r, nil
}

// fan is the loop's side of the run; its fields belong to the loop.
type fan struct {
	local         *pool.Local[*upstream.Conn]
	n, ok, failed int
	inUse, peak   int
	done          chan struct{}
}

// request sends one line over a leased connection and waits for the echo.
func (f *fan) request(i int) {
	line := []byte("request " + strconv.Itoa(i) + "\n")
	f.local.Get(func(ls pool.Lease[*upstream.Conn], err error) {
		if err != nil {
			f.end(false)
			return
		}
		f.inUse++
		f.peak = max(f.peak, f.inUse)
		uc := ls.Conn()
		var reply []byte
		finish := func(ok bool) {
			uc.Receive(nil, nil)
			if !ok {
				uc.MarkBroken()
			}
			f.inUse--
			f.local.Put(ls)
			f.end(ok)
		}
		uc.Receive(func(data []byte) {
			reply = append(reply, data...)
			if i := bytes.IndexByte(reply, '\n'); i >= 0 {
				finish(i+1 == len(reply) && bytes.Equal(reply, line))
			}
		}, func(error) { finish(false) })
		uc.Write(line)
	})
}

func (f *fan) end(ok bool) {
	if ok {
		f.ok++
	} else {
		f.failed++
	}
	if f.ok+f.failed == f.n {
		close(f.done)
	}
}
