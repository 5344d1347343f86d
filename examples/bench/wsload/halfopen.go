//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/examples/bench/gwproto"
	"github.com/percore/percore/internal/hist"
)

// halfopen (issue 27's bad input: "15,000 half-open upgrades are bounded by
// the head timeout"): -conns connections each send the start of an upgrade
// request, a valid request line and a few header lines but never the blank
// line that ends the head, and then wait. The gateway must close every one
// of them (with or without an answer such as 408) within -hold; the
// server's RSS growth per half-open connection is read once all are open
// and -settle has passed. A connection still open after -hold is an error.
func (r *runner) halfopen(ctx context.Context) error {
	n := r.cfg.conns
	var before memory
	if r.cfg.serverPID != 0 {
		var err error
		if before, err = procMemory(r.cfg.serverPID); err != nil {
			return err
		}
	}
	start := time.Now()
	conns := make([]net.Conn, n)
	opened := make([]time.Time, n)
	ids := make(chan int)
	var wg sync.WaitGroup
	var openErr atomic.Pointer[error]
	for range min(r.cfg.dialConc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				d := net.Dialer{Timeout: stepTimeout}
				if r.loopback && r.cfg.srcIPs > 1 {
					d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+id%r.cfg.srcIPs))}
				}
				c, err := d.DialContext(ctx, "tcp", r.cfg.addr)
				if err == nil {
					_, err = io.WriteString(c, "GET "+gwproto.URL(r.cfg.secret, user(id))+" HTTP/1.1\r\nHost: "+r.cfg.addr+
						"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n")
				}
				if err != nil {
					openErr.CompareAndSwap(nil, &err)
					if c != nil {
						abort(c)
					}
					continue
				}
				conns[id], opened[id] = c, time.Now()
			}
		}()
	}
	for id := 0; id < n && ctx.Err() == nil && openErr.Load() == nil; id++ {
		ids <- id
	}
	close(ids)
	wg.Wait()
	if p := openErr.Load(); p != nil || ctx.Err() != nil {
		for _, c := range conns {
			if c != nil {
				abort(c)
			}
		}
		if p != nil {
			return fmt.Errorf("opening half-open connections: %w", *p)
		}
		return ctx.Err()
	}
	r.res.OpenS = time.Since(start).Seconds()
	// Each waits for the server to close it (EOF, a reset, or an answer
	// and then either), at most until -hold after it was opened.
	closedAt := make([]time.Time, n)
	var closed atomic.Uint64
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(opened[i].Add(r.cfg.hold))
			buf := make([]byte, 512)
			for {
				_, err := c.Read(buf)
				if err == nil {
					continue // an answer (408, 400): the close follows
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return
				}
				closedAt[i] = time.Now()
				closed.Add(1)
				return
			}
		}()
	}
	if err := sleep(ctx, r.cfg.settle); err != nil {
		return err
	}
	if r.cfg.serverPID != 0 {
		after, err := procMemory(r.cfg.serverPID)
		if err != nil {
			return err
		}
		r.res.ServerRSSBeforeKiB, r.res.ServerRSSAfterKiB, r.res.ServerThreads = before.rssKiB, after.rssKiB, after.threads
		r.res.ServerRSSPerConnBytes = (float64(after.rssKiB) - float64(before.rssKiB)) * 1024 / float64(n)
	}
	r.clientCost(n)
	wg.Wait()
	for _, c := range conns {
		abort(c)
	}
	var h hist.Histogram
	for i := range conns {
		if !closedAt[i].IsZero() {
			h.Record(int64(closedAt[i].Sub(opened[i])))
		}
	}
	r.res.Checked = closed.Load() // closed by the server
	r.res.ClosedP50us, r.res.ClosedMaxUs = us(&h, 0.5), us(&h, 1)
	if left := uint64(n) - closed.Load(); left > 0 {
		r.fail("%d of %d half-open connections were still open %v after they were opened", left, n, r.cfg.hold)
	}
	return nil
}
