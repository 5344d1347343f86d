//go:build linux

package main

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// stdEngine runs the workload on goroutines and the standard library's net
// package: one goroutine per connection (two when pipelining), buffers
// allocated once per connection, io.ReadFull for the replies. Nothing is
// allocated per request except in -reconnect mode, where dialing allocates.
type stdEngine struct{}

// errMismatch ends a connection whose reply differed from its request: the
// stream can no longer be trusted to be in step.
var errMismatch = errors.New("reply differs from request")

// retryDelay is how long a worker waits after a failed dial before trying
// again, so that a server that refuses connections is not hammered.
const retryDelay = 20 * time.Millisecond

// pastDeadline is a deadline that has passed: setting it makes blocked reads
// and writes return at once.
var pastDeadline = time.Unix(1, 0)

// Run implements Engine.
func (stdEngine) Run(ctx context.Context, wl Workload, rec *Recorder) error {
	var wg sync.WaitGroup
	s := newSchedule(wl, time.Now())
	for id := range wl.Conns {
		w := rec.NewWorker()
		p := newPayload(wl.Bytes, id)
		switch {
		case wl.open():
			wg.Go(func() { stdOpenLoop(ctx, wl, s, id, p, w) })
		case wl.Reconnect:
			wg.Go(func() { stdChurn(ctx, wl.Addr, p, w) })
		case wl.Pipeline > 1:
			wg.Go(func() { stdPipelined(ctx, wl.Addr, wl.Pipeline, p, w) })
		default:
			wg.Go(func() { stdClosedLoop(ctx, wl.Addr, p, w) })
		}
	}
	wg.Wait()
	return nil
}

// dial connects to addr and arranges for the connection's blocked calls to
// return once ctx is done; call the returned stop before closing it.
func dial(ctx context.Context, addr string) (*net.TCPConn, func() bool, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	tc := c.(*net.TCPConn)
	stop := context.AfterFunc(ctx, func() { _ = tc.SetDeadline(pastDeadline) })
	return tc, stop, nil
}

// wait sleeps for d or until ctx is done.
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// failed counts err against w unless the run is over (then the error is the
// deadline that ended it) or it was a mismatch (counted already).
func failed(ctx context.Context, w *Worker, err error) {
	if ctx.Err() == nil && !errors.Is(err, errMismatch) {
		w.Error()
	}
}

// stdClosedLoop keeps one request in flight on one connection, reconnecting
// after a failure.
func stdClosedLoop(ctx context.Context, addr string, p payload, w *Worker) {
	req := p.newBuffer(1)
	reply := make([]byte, p.size())
	var seq uint64
	for ctx.Err() == nil {
		c, stop, err := dial(ctx, addr)
		if err != nil {
			failed(ctx, w, err)
			wait(ctx, retryDelay)
			continue
		}
		for {
			seq++
			p.stamp(req, seq)
			start := time.Now()
			if _, err = c.Write(req); err != nil {
				break
			}
			if _, err = io.ReadFull(c, reply); err != nil {
				break
			}
			d := time.Since(start)
			if !p.check(reply, seq) {
				w.Mismatch()
				err = errMismatch
				break
			}
			w.Done(d)
		}
		failed(ctx, w, err)
		stop()
		_ = c.Close()
	}
}

// stdChurn opens a new connection for every request and closes it with a
// reset (SO_LINGER 0) so that the client's ports are not all left in
// TIME_WAIT. The latency includes the connect.
func stdChurn(ctx context.Context, addr string, p payload, w *Worker) {
	req := p.newBuffer(1)
	reply := make([]byte, p.size())
	var seq uint64
	for ctx.Err() == nil {
		seq++
		p.stamp(req, seq)
		start := time.Now()
		c, stop, err := dial(ctx, addr)
		if err != nil {
			failed(ctx, w, err)
			wait(ctx, retryDelay)
			continue
		}
		if _, err = c.Write(req); err == nil {
			_, err = io.ReadFull(c, reply)
		}
		d := time.Since(start)
		switch {
		case err != nil:
			failed(ctx, w, err)
		case !p.check(reply, seq):
			w.Mismatch()
		default:
			w.Done(d)
		}
		stop()
		_ = c.SetLinger(0)
		_ = c.Close()
	}
}

// stdPipelined keeps n requests in flight on one connection, reconnecting
// after a failure.
func stdPipelined(ctx context.Context, addr string, n int, p payload, w *Worker) {
	pl := newPipeline(n, p)
	for ctx.Err() == nil {
		c, stop, err := dial(ctx, addr)
		if err != nil {
			failed(ctx, w, err)
			wait(ctx, retryDelay)
			continue
		}
		err = pl.run(c, w)
		failed(ctx, w, err)
		stop()
		_ = c.Close()
	}
}

// pipeline is the state of one pipelined connection, allocated once and
// reused across reconnects. A reader goroutine reads the replies one by one
// and hands a credit to the writer for each; the writer sends as many new
// requests as it holds credits, in one write. The reader always reads, so a
// large pipeline of large requests cannot deadlock on full socket buffers.
type pipeline struct {
	p       payload
	n       int
	reqs    []byte         // n requests, written by the writer only
	reply   []byte         // one reply, read by the reader only
	sent    []atomic.Int64 // send time of request seq, at seq%n
	credits chan struct{}
	base    time.Time
	seq     uint64 // the last sequence number sent or verified
}

func newPipeline(n int, p payload) *pipeline {
	return &pipeline{
		p:       p,
		n:       n,
		reqs:    p.newBuffer(n),
		reply:   make([]byte, p.size()),
		sent:    make([]atomic.Int64, n),
		credits: make(chan struct{}, n),
		base:    time.Now(),
	}
}

// run drives connection c until it fails (or the run ends, which fails it by
// its deadline) and returns the error. A new connection starts numbering
// where the last one stopped; requests lost with a broken connection are
// not counted.
func (pl *pipeline) run(c *net.TCPConn, w *Worker) error {
	for len(pl.credits) > 0 {
		<-pl.credits // left over from a previous connection
	}
	first := pl.seq + 1
	done := make(chan struct{})
	werr := make(chan error, 1)
	go func() { werr <- pl.write(c, first, done) }()

	var err error
	for seq := first; ; seq++ {
		if _, err = io.ReadFull(c, pl.reply); err != nil {
			break
		}
		d := time.Duration(int64(time.Since(pl.base)) - pl.sent[seq%uint64(pl.n)].Load())
		if !pl.p.check(pl.reply, seq) {
			w.Mismatch()
			err = errMismatch
			break
		}
		w.Done(d)
		pl.seq = seq
		pl.credits <- struct{}{}
	}
	close(done)
	_ = c.SetDeadline(pastDeadline) // unblocks the writer's Write
	if e := <-werr; err == nil {
		err = e
	}
	return err
}

// write sends the first n requests, then one more for every credit, until
// done is closed or a write fails.
func (pl *pipeline) write(c *net.TCPConn, seq uint64, done <-chan struct{}) error {
	k := pl.n
	for {
		size := pl.p.size()
		for i := range k {
			pl.p.stamp(pl.reqs[i*size:(i+1)*size], seq)
			pl.sent[seq%uint64(pl.n)].Store(int64(time.Since(pl.base)))
			seq++
		}
		if _, err := c.Write(pl.reqs[:k*size]); err != nil {
			return err
		}
		select {
		case <-done:
			return nil
		case <-pl.credits:
		}
		k = 1
		for k < pl.n && len(pl.credits) > 0 {
			<-pl.credits
			k++
		}
	}
}
