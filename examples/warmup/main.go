//go:build linux

// Command warmup makes a pool's lifecycle visible: it prints the pool's
// State and Statistics as the pool is warmed, lends connections, makes a get
// wait, hands a returned connection to that waiter, lets another get time
// out, takes everything back, and lets the maintenance timer reap the idle
// connections and warm up again.
//
//	go run ./examples/warmup
//
// Without -upstream it starts its own echo upstream (a percore runtime).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

type config struct {
	upstream string
	max      int
	minIdle  int
	wait     time.Duration
	idle     time.Duration
	reap     time.Duration
}

func main() {
	var cfg config
	flag.StringVar(&cfg.upstream, "upstream", "", "upstream address (default: an echo server of its own)")
	flag.IntVar(&cfg.max, "max", 3, "max size")
	flag.IntVar(&cfg.minIdle, "min-idle", 2, "min idle")
	flag.DurationVar(&cfg.wait, "wait", 200*time.Millisecond, "connection timeout")
	flag.DurationVar(&cfg.idle, "idle", 300*time.Millisecond, "idle timeout")
	flag.DurationVar(&cfg.reap, "reap", 100*time.Millisecond, "maintenance interval")
	flag.Parse()
	if err := run(os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "warmup:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, cfg config) error {
	if cfg.max < 3 {
		return errors.New("the walk-through needs -max 3 or more")
	}
	quiet := slog.New(slog.DiscardHandler)
	cores, err := cpu.Cores()
	if err != nil {
		return err
	}
	if cfg.upstream == "" {
		echo, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: cores[:1], Logger: quiet},
			percore.HandlerFunc(func(c *percore.Conn, data []byte) { c.Write(data) }))
		if err != nil {
			return err
		}
		defer echo.Close()
		cfg.upstream = echo.Addr().String()
	}
	m, err := upstream.New(cfg.upstream)
	if err != nil {
		return err
	}
	p, err := pool.New[*upstream.Conn](m, pool.Config{MaxSize: cfg.max, MinIdle: cfg.minIdle,
		ConnectionTimeout: cfg.wait, IdleTimeout: cfg.idle, ReapInterval: cfg.reap})
	if err != nil {
		return err
	}
	defer p.Close()
	rt, err := percore.New(percore.Config{Cores: cores[:1], Logger: quiet}, nil)
	if err != nil {
		return err
	}
	defer rt.Close()

	wt := &walk{w: w, loop: rt.Loops()[0], got: make(chan result, 16)}
	c := p.Config()
	fmt.Fprintf(w, "pool: max size %d, min idle %d, connection timeout %v, idle timeout %v, maintenance every %v; upstream %s\n",
		c.MaxSize, c.MinIdle, c.ConnectionTimeout, c.IdleTimeout, c.ReapInterval, cfg.upstream)

	wt.on(func() { wt.local = p.Local(wt.loop) })
	if err := wt.until(func(st pool.State, _ pool.Statistics) bool { return st.Idle == c.MinIdle }); err != nil {
		return err
	}
	wt.print("warmed: the loop's pool opened min idle connections")

	var leases []pool.Lease[*upstream.Conn]
	wt.get(c.MaxSize)
	for range c.MaxSize {
		r := wt.next()
		if r.err != nil {
			return r.err
		}
		leases = append(leases, r.lease)
	}
	wt.print(fmt.Sprintf("lent %d: the idle ones first, then new ones up to max size", c.MaxSize))

	wt.get(1)
	wt.print("one more get: at max size, it waits")

	wt.put(leases[0])
	r := wt.next()
	if r.err != nil {
		return r.err
	}
	leases[0] = r.lease
	wt.print("one returned: handed straight to the waiter")

	wt.get(1)
	if r := wt.next(); !errors.Is(r.err, pool.ErrTimeout) {
		return fmt.Errorf("the extra get ended with %v, want a timeout", r.err)
	}
	wt.print("another get: nothing came back within the connection timeout")

	for _, ls := range leases {
		wt.put(ls)
	}
	wt.print("all returned: idle again")

	if err := wt.until(func(_ pool.State, s pool.Statistics) bool {
		return s.ClosedIdleTimeout >= uint64(c.MaxSize)
	}); err != nil {
		return err
	}
	if err := wt.until(func(st pool.State, _ pool.Statistics) bool { return st.Idle == c.MinIdle }); err != nil {
		return err
	}
	wt.print("after the idle timeout: maintenance reaped them and warmed up again")

	p.Close()
	if err := wt.until(func(st pool.State, _ pool.Statistics) bool { return st.Connections == 0 }); err != nil {
		return err
	}
	st, s := wt.state()
	wt.print("closed")
	fmt.Fprintf(w, "conservation: created %d = closed %d + live %d\n", s.Created, s.Closed(), st.Connections)
	return nil
}

// walk runs the walk-through's steps on the loop.
type walk struct {
	w     io.Writer
	loop  *percore.Loop
	local *pool.Local[*upstream.Conn]
	got   chan result
}

type result struct {
	lease pool.Lease[*upstream.Conn]
	err   error
}

// on runs f on the loop and waits for it.
func (wt *walk) on(f func()) {
	done := make(chan struct{})
	if err := wt.loop.Post(func() { defer close(done); f() }); err != nil {
		return // the loop runs until run returns
	}
	<-done
}

func (wt *walk) get(n int) {
	wt.on(func() {
		for range n {
			wt.local.Get(func(ls pool.Lease[*upstream.Conn], err error) { wt.got <- result{ls, err} })
		}
	})
}

func (wt *walk) next() result { return <-wt.got }

func (wt *walk) put(ls pool.Lease[*upstream.Conn]) { wt.on(func() { wt.local.Put(ls) }) }

func (wt *walk) state() (st pool.State, s pool.Statistics) {
	wt.on(func() { st, s = wt.local.State(), wt.local.Statistics() })
	return st, s
}

// until waits (up to 10 s) for cond to hold on the loop's pool.
func (wt *walk) until(cond func(pool.State, pool.Statistics) bool) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if cond(wt.state()) {
			return nil
		}
		if time.Now().After(deadline) {
			st, s := wt.state()
			return fmt.Errorf("gave up waiting: %v; %v", st, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (wt *walk) print(step string) {
	st, s := wt.state()
	fmt.Fprintf(wt.w, "\n%s\n  state:      %v\n  statistics: %v\n", step, st, s)
}
