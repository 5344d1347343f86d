//go:build linux

// Command scale holds thousands of silent connections open against a
// server and measures what the server does with them at scale: how long
// after its idle timeout it closes them, how long a live connection waits
// for its replies meanwhile, and (with a script that stops the server) how
// long the server takes to close them all at shutdown.
//
//	scale -addr 127.0.0.1:7001 -conns 15000 -proto lines -idle-timeout 3s
//	scale -addr 127.0.0.1:7000 -conns 18000 -proto echo -ready ready.txt
//
// It opens one live connection that sends a ping every millisecond and
// times each reply, then -conns connections that never send. It waits until
// the server has closed every silent connection (or -wait passes) and
// prints one JSON object: connections opened and closed, how late each was
// closed after its idle timeout (measured from the moment it opened), and
// the live connection's round trips. With -ready it writes the number of
// open connections to that file once they are open, for a script that
// then stops the server (scripts/scale.sh). With -slow the connections are
// slow consumers instead: each sends until the server stops reading it,
// and all close together once the script has removed the -ready file.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"time"
)

type options struct {
	addr        string
	conns       int
	proto       string
	idleTimeout time.Duration
	wait        time.Duration
	ready       string
	slow        bool
	churn       int
}

// result is what one run found. Durations are in milliseconds.
type result struct {
	Opened, Failed, Closed int
	// LateP50Ms and LateMaxMs: how long after its idle timeout (counted
	// from when it opened) the server closed a silent connection. Zero
	// without -idle-timeout.
	LateP50Ms, LateMaxMs float64
	// CloseSpanMs is the time from the first close to the last.
	CloseSpanMs float64
	// ChurnUsPerClose is the mean time of one server-side close with the
	// silent connections open (-churn): a dial, a line over the limit,
	// and the server's close.
	ChurnUsPerClose float64 `json:",omitempty"`
	// Pings is the live connection's round trips from before the first
	// silent connection opened to after the last was closed; PingP99Ms
	// and PingMaxMs their latency. ClosingPings, ClosingP99Ms and
	// ClosingMaxMs are those that overlapped the closes (from the first
	// to the last). PingErr says why the live connection stopped early,
	// if it did.
	Pings                      int
	PingP99Ms, PingMaxMs       float64
	ClosingPings               int
	ClosingP99Ms, ClosingMaxMs float64
	PingErr                    string `json:",omitempty"`
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:7000", "server address")
	flag.IntVar(&o.conns, "conns", 10000, "silent connections to hold")
	flag.StringVar(&o.proto, "proto", "echo", "the live connection's protocol: echo (any bytes come back) or lines (ping -> pong)")
	flag.DurationVar(&o.idleTimeout, "idle-timeout", 0, "the server's idle timeout, to measure how late it closes (0: not measured)")
	flag.DurationVar(&o.wait, "wait", time.Minute, "the longest wait for the server to close every silent connection")
	flag.StringVar(&o.ready, "ready", "", "write the number of open connections to this file once they are open")
	flag.IntVar(&o.churn, "churn", 0, "with the silent connections open, time this many server-side closes: each dials, sends a line longer than examples/lines accepts, and waits for the server to close it (-proto lines)")
	flag.BoolVar(&o.slow, "slow", false, "slow consumers instead: each connection sends until the server stops reading it (its outbound queue is full), never reads, and all close once every one is full")
	flag.Parse()
	if o.slow {
		n, err := slowConsumers(o)
		if err != nil {
			fmt.Fprintln(os.Stderr, "scale:", err)
			os.Exit(1)
		}
		fmt.Printf("{\"SlowConsumers\":%d}\n", n)
		return
	}
	r, err := run(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
	if r.Closed < r.Opened || r.PingErr != "" {
		os.Exit(1)
	}
}

// held is one silent connection: when it opened and when the server
// closed it.
type held struct {
	opened, closed time.Time
}

func run(ctx context.Context, o options) (result, error) {
	var ping, want []byte
	switch o.proto {
	case "echo":
		ping, want = []byte("ping\n"), []byte("ping\n")
	case "lines":
		ping, want = []byte("ping\n"), []byte("pong\n")
	default:
		return result{}, fmt.Errorf("unknown protocol %q (want echo or lines)", o.proto)
	}
	ctx, cancel := context.WithTimeout(ctx, o.wait+time.Minute)
	defer cancel()

	// The live connection pings from before the first silent one opens
	// until the last is closed.
	live, err := net.Dial("tcp", o.addr)
	if err != nil {
		return result{}, fmt.Errorf("live connection: %w", err)
	}
	defer live.Close()
	stop := make(chan struct{})
	pinged := make(chan pingResult, 1)
	go func() { pinged <- pingLoop(live, ping, want, stop) }()

	conns := make([]held, o.conns)
	var res result
	var mu sync.Mutex
	var dialers, readers sync.WaitGroup
	next := make(chan int)
	for range 64 {
		dialers.Go(func() {
			var d net.Dialer
			for i := range next {
				c, err := d.DialContext(ctx, "tcp", o.addr)
				mu.Lock()
				if err != nil {
					res.Failed++
					mu.Unlock()
					continue
				}
				res.Opened++
				mu.Unlock()
				conns[i].opened = time.Now()
				readers.Go(func() { conns[i].closed = awaitClose(c, o.wait) })
			}
		})
	}
	for i := range o.conns {
		next <- i
	}
	close(next)
	dialers.Wait()

	if o.ready != "" {
		if err := os.WriteFile(o.ready, fmt.Appendf(nil, "%d\n", res.Opened), 0o644); err != nil {
			return res, err
		}
	}
	if o.churn > 0 {
		us, err := churn(o.addr, o.churn)
		if err != nil {
			return res, err
		}
		res.ChurnUsPerClose = us
		close(stop)
		<-pinged
		return res, nil // the silent connections close with the process
	}
	readers.Wait()
	close(stop)
	p := <-pinged

	var lates []float64
	var first, last time.Time
	for _, h := range conns {
		if h.closed.IsZero() || h.opened.IsZero() {
			continue
		}
		res.Closed++
		if first.IsZero() || h.closed.Before(first) {
			first = h.closed
		}
		if h.closed.After(last) {
			last = h.closed
		}
		if o.idleTimeout > 0 {
			lates = append(lates, ms(h.closed.Sub(h.opened.Add(o.idleTimeout))))
		}
	}
	if len(lates) > 0 {
		slices.Sort(lates)
		res.LateP50Ms, res.LateMaxMs = lates[len(lates)/2], lates[len(lates)-1]
	}
	res.CloseSpanMs = ms(last.Sub(first))
	var all, closing []time.Duration
	for _, pg := range p.pings {
		all = append(all, pg.rtt)
		if !pg.sent.Add(pg.rtt).Before(first) && !pg.sent.After(last) {
			closing = append(closing, pg.rtt)
		}
	}
	res.Pings, res.PingP99Ms, res.PingMaxMs = summarize(all)
	res.ClosingPings, res.ClosingP99Ms, res.ClosingMaxMs = summarize(closing)
	if p.err != nil {
		res.PingErr = p.err.Error()
	}
	return res, nil
}

// awaitClose reads c until the server closes it or wait passes, and returns
// when the server closed it (zero if it did not).
func awaitClose(c net.Conn, wait time.Duration) time.Time {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	var b [64]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return time.Time{}
			}
			return time.Now()
		}
	}
}

type ping struct {
	sent time.Time
	rtt  time.Duration
}

type pingResult struct {
	pings []ping
	err   error
}

// summarize returns the count, p99 and maximum of rtts, in milliseconds.
func summarize(rtts []time.Duration) (n int, p99, maxMs float64) {
	if len(rtts) == 0 {
		return 0, 0, 0
	}
	slices.Sort(rtts)
	return len(rtts), ms(rtts[len(rtts)*99/100]), ms(rtts[len(rtts)-1])
}

// pingLoop sends msg on c every millisecond until stop is closed, and
// times each reply.
func pingLoop(c net.Conn, msg, want []byte, stop <-chan struct{}) pingResult {
	var r pingResult
	got := make([]byte, len(want))
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return r
		case <-tick.C:
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		t0 := time.Now()
		if _, err := c.Write(msg); err != nil {
			r.err = err
			return r
		}
		if _, err := io.ReadFull(c, got); err != nil {
			r.err = err
			return r
		}
		r.pings = append(r.pings, ping{t0, time.Since(t0)})
		if !bytes.Equal(got, want) {
			r.err = fmt.Errorf("reply %q, want %q", got, want)
			return r
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// slowConsumers opens o.conns connections that each send until the server
// stops reading them (a write makes no progress for a second) and never
// read; once every one is full it writes o.ready, closes them all and
// returns how many there were.
func slowConsumers(o options) (int, error) {
	conns := make([]net.Conn, 0, o.conns)
	for range o.conns {
		c, err := net.Dial("tcp", o.addr)
		if err != nil {
			return len(conns), err
		}
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	chunk := make([]byte, 64<<10)
	for _, c := range conns {
		wg.Go(func() {
			for {
				_ = c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if o.ready != "" {
		if err := os.WriteFile(o.ready, fmt.Appendf(nil, "%d\n", len(conns)), 0o644); err != nil {
			return len(conns), err
		}
		// The script samples the server, then removes the file: close.
		for deadline := time.Now().Add(o.wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(o.ready); errors.Is(err, os.ErrNotExist) {
				break
			}
		}
	}
	for _, c := range conns {
		c.Close()
	}
	return len(conns), nil
}

// churn times n server-side closes: each dials addr (from 127.0.0.2),
// sends a line longer than examples/lines accepts and reads until the
// server closes, and returns the mean in microseconds.
func churn(addr string, n int) (float64, error) {
	line := bytes.Repeat([]byte("x"), 1100)
	buf := make([]byte, 4096)
	// From another loopback address: with thousands of ports in use
	// from 127.0.0.1 to the server, connect's search for a free one
	// would be what is measured.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	t0 := time.Now()
	for range n {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return 0, err
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(line); err != nil {
			c.Close()
			return 0, err
		}
		for {
			if _, err := c.Read(buf); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					c.Close()
					return 0, fmt.Errorf("the server did not close a connection: %w", err)
				}
				break // EOF or a reset: closed
			}
		}
		c.Close()
	}
	return float64(time.Since(t0).Microseconds()) / float64(n), nil
}
