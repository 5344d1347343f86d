//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/examples/bench/gwproto"
)

const stepTimeout = 10 * time.Second // one dial, handshake, or acknowledgement

type runner struct {
	cfg    config
	stderr io.Writer
	res    Result
	http   *http.Client

	errors, mismatches atomic.Uint64
	retries, pings     atomic.Uint64
	closing            atomic.Bool // the tool is closing connections: read errors are expected
	logged             atomic.Int32
	logMu              sync.Mutex // stderr may be any writer
	loopback           bool
	selfBefore         memory
	cpuStart           time.Duration
}

// prepare reads the address and makes the HTTP client.
func (r *runner) prepare() error {
	host, _, err := net.SplitHostPort(r.cfg.addr)
	if err != nil {
		return err
	}
	r.loopback = host == "127.0.0.1"
	r.http = &http.Client{Timeout: stepTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	return nil
}

func (r *runner) run(ctx context.Context) (*Result, error) {
	r.res = Result{Mode: r.cfg.mode, Addr: r.cfg.addr, Conns: r.cfg.conns}
	if r.cfg.mode == "fanout" || r.cfg.mode == "echo" {
		r.res.Bytes = r.cfg.bytes
	}
	var err error
	if err = r.prepare(); err != nil {
		return nil, err
	}
	if r.cfg.serverPID != 0 {
		if _, err := procCPU(r.cfg.serverPID); err != nil {
			return nil, fmt.Errorf("-server-pid: %w", err)
		}
	}
	settleGC()
	r.selfBefore, _ = procMemory(0)
	r.cpuStart = selfCPU()
	switch r.cfg.mode {
	case "idle":
		err = r.idle(ctx)
	case "fanout":
		err = r.fanout(ctx)
	case "echo":
		err = r.echo(ctx)
	case "storm":
		err = r.storm(ctx)
	case "halfopen":
		err = r.halfopen(ctx)
	}
	if err != nil {
		return nil, err
	}
	r.res.Errors += r.errors.Load()
	r.res.Mismatches += r.mismatches.Load()
	r.res.DialRetries += r.retries.Load()
	r.res.ServerPingsSeen = r.pings.Load()
	r.res.ClientCPUS = (selfCPU() - r.cpuStart).Seconds()
	return &r.res, nil
}

func (r *runner) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.stderr, "wsload: "+format+"\n", args...)
}

// fail counts a failure and says what it was, the first few times.
func (r *runner) fail(format string, args ...any) {
	r.errors.Add(1)
	if r.logged.Add(1) <= 5 {
		r.logf(format, args...)
	}
}

func (r *runner) mismatch(format string, args ...any) {
	r.mismatches.Add(1)
	if r.logged.Add(1) <= 5 {
		r.logf(format, args...)
	}
}

// clientCost records the client's memory and goroutines for n connections.
func (r *runner) clientCost(n int) {
	settleGC()
	m, _ := procMemory(0)
	r.res.ClientRSSKiB = m.rssKiB
	if m.rssKiB > r.selfBefore.rssKiB {
		r.res.ClientRSSPerConnBytes = float64(m.rssKiB-r.selfBefore.rssKiB) * 1024 / float64(n)
	}
	r.res.ClientGoroutines = runtime.NumGoroutine()
}

func user(id int) string { return "u" + strconv.Itoa(id) }

// dialOnce opens connection id and performs the handshake.
func (r *runner) dialOnce(id int) (*gwproto.Client, error) {
	d := net.Dialer{Timeout: stepTimeout}
	if r.loopback && r.cfg.srcIPs > 1 {
		d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+id%r.cfg.srcIPs))}
	}
	conn, err := d.Dial("tcp", r.cfg.addr)
	if err != nil {
		return nil, err
	}
	c, err := gwproto.Handshake(conn, r.cfg.addr, gwproto.URL(r.cfg.secret, user(id)), stepTimeout)
	if err != nil {
		abort(conn)
		return nil, err
	}
	return c, nil
}

// dial opens connection id, subscribed to the topic when sub, retrying
// with exponential back-off (5 ms to 1 s, jittered) until ctx ends; a 401
// is not retried. It returns the number of retries.
func (r *runner) dial(ctx context.Context, id int, sub bool) (*gwproto.Client, int, error) {
	backoff := 5 * time.Millisecond
	for attempt := 0; ; attempt++ {
		c, err := r.dialOnce(id)
		if err == nil && sub {
			err = r.subscribe(c)
			if err != nil {
				abort(c.Conn())
			}
		}
		if err == nil {
			return c, attempt, nil
		}
		var se *gwproto.StatusError
		if errors.As(err, &se) && se.Code == http.StatusUnauthorized {
			return nil, attempt, fmt.Errorf("the gateway refused the token (is -secret the gateway's?): %w", err)
		}
		d := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return nil, attempt, fmt.Errorf("connection %d: %w (last error: %v)", id, ctx.Err(), err)
		case <-time.After(d):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (r *runner) subscribe(c *gwproto.Client) error {
	if err := c.Conn().SetDeadline(time.Now().Add(stepTimeout)); err != nil {
		return err
	}
	if err := c.Command(true, r.cfg.topic, nil); err != nil {
		return err
	}
	return c.Conn().SetDeadline(time.Time{})
}

// openAll opens n connections (ids 0..n-1), -dial-concurrency at a time.
func (r *runner) openAll(ctx context.Context, n int, sub bool) ([]*gwproto.Client, error) {
	start := time.Now()
	cs := make([]*gwproto.Client, n)
	ids := make(chan int)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for range min(r.cfg.dialConc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				c, retries, err := r.dial(ctx, id, sub)
				r.retries.Add(uint64(retries))
				if err != nil {
					cancel(err)
					continue
				}
				cs[id] = c
			}
		}()
	}
	last := time.Now()
	for id := 0; id < n && ctx.Err() == nil; id++ {
		select {
		case ids <- id:
		case <-ctx.Done():
		}
		if time.Since(last) > time.Second {
			r.logf("%d of %d connections open", id, n)
			last = time.Now()
		}
	}
	close(ids)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		closeAll(cs)
		return nil, fmt.Errorf("opening %d connections: %w", n, err)
	}
	r.res.OpenS = time.Since(start).Seconds()
	return cs, nil
}

// abort closes conn with a reset, leaving no TIME_WAIT behind.
func abort(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

func closeAll(cs []*gwproto.Client) {
	for _, c := range cs {
		if c != nil {
			abort(c.Conn())
		}
	}
}

// read reads c until it fails, handing every message to fn. A failure
// while the tool is not closing connections counts as an error.
func (r *runner) read(c *gwproto.Client, fn func(op byte, p []byte)) {
	defer func() { r.pings.Add(uint64(c.Pings)) }()
	for {
		op, p, err := c.ReadMessage()
		if err != nil {
			if !r.closing.Load() {
				r.fail("a connection failed: %v", err)
			}
			return
		}
		fn(op, p)
	}
}

// publish posts body to the topic and returns how many subscribers the
// gateway says it reached.
func (r *runner) publish(body []byte) (int, error) {
	resp, err := r.http.Post("http://"+r.cfg.addr+"/publish?topic="+r.cfg.topic, "text/plain", strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("publish: %s: %.100s", resp.Status, b)
	}
	return strconv.Atoi(string(b))
}

// check publishes body and waits (at most stepTimeout) until got reaches
// n: every connection open and subscribed. It sets Checked.
func (r *runner) check(ctx context.Context, body []byte, n int, got *atomic.Uint64) {
	reached, err := r.publish(body)
	if err != nil {
		r.fail("the final publish: %v", err)
		return
	}
	if reached != n {
		r.res.ShortCounts++
	}
	deadline := time.Now().Add(stepTimeout)
	for got.Load() < uint64(n) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond) // polling a counter, not synchronising
	}
	r.res.Checked = got.Load()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *runner) serverCPU() time.Duration {
	if r.cfg.serverPID == 0 {
		return 0
	}
	d, err := procCPU(r.cfg.serverPID)
	if err != nil {
		r.fail("reading the server's CPU: %v", err)
	}
	return d
}
