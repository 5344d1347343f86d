//go:build linux

package main

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The std engine in open loop (openloop.go): per connection, a pacer
// goroutine that wakes when each request falls due (its send lag is the
// time from the due time to that wake-up) and sends the waiting requests
// as far as credits allow; a reader goroutine verifies the replies and
// hands back a credit for each. With -reconnect every request gets a
// goroutine of its own that dials, sends, reads the reply and hands back
// the credit (one per connection: its requests go one at a time).

// stdOpenLoop runs connection id of an open-loop workload until ctx ends.
func stdOpenLoop(ctx context.Context, wl Workload, s schedule, id int, p payload, w *Worker) {
	o := &stdOpen{
		ctx: ctx, wl: wl, s: s, p: p, w: w, n: wl.depth(),
		bl:      backlog{id: id},
		credits: make(chan struct{}, wl.depth()),
		timer:   time.NewTimer(time.Hour),
	}
	defer o.timer.Stop()
	o.sent = make([]atomic.Int64, o.n)
	o.reqs = p.newBuffer(o.n)
	for range o.n {
		o.credits <- struct{}{}
	}
	if wl.Reconnect {
		o.churn()
		return
	}
	for ctx.Err() == nil {
		c, stop, err := dial(ctx, wl.Addr)
		if err != nil {
			failed(ctx, w, err)
			for until := time.Now().Add(retryDelay); ctx.Err() == nil && time.Now().Before(until); {
				o.pace(time.Until(until), false)
			}
			continue
		}
		err = o.stream(c)
		failed(ctx, w, err)
		stop()
		_ = c.Close()
	}
}

// stdOpen is one open-loop connection of the std engine.
type stdOpen struct {
	ctx     context.Context
	wl      Workload
	s       schedule
	p       payload
	w       *Worker
	n       int
	bl      backlog
	credits chan struct{} // one per request that may be sent now
	timer   *time.Timer
	reqs    []byte
	sent    []atomic.Int64 // due time of request seq (ns after s.start), at seq%n
	seq     uint64         // the last sequence number sent
}

// credit takes a credit if one is there.
func (o *stdOpen) credit() bool {
	select {
	case <-o.credits:
		return true
	default:
		return false
	}
}

// release releases every request that has fallen due by now (at most
// maxRelease of them: a generator far behind its schedule stays
// responsive, and its send lag shows it).
func (o *stdOpen) release() {
	now := time.Now()
	for range maxRelease {
		due := o.s.due(o.bl.id, o.bl.due)
		if due.After(now) {
			return
		}
		o.w.Paced(now.Sub(due))
		o.bl.due++
	}
}

// pace waits until the next request falls due, at most d, or the run
// ends, or (with credits, while requests wait) a credit comes back; it
// releases what fell due meanwhile. It reports whether a credit came back
// (and puts it back).
func (o *stdOpen) pace(d time.Duration, credits bool) bool {
	o.release()
	wait := min(time.Until(o.s.due(o.bl.id, o.bl.due)), d)
	o.timer.Reset(max(wait, 0))
	var ch chan struct{}
	if credits && o.bl.waiting() > 0 {
		ch = o.credits
	}
	got := false
	select {
	case <-o.ctx.Done():
	case <-o.timer.C:
	case <-ch:
		got = true
		o.credits <- struct{}{}
	}
	o.timer.Stop()
	o.release()
	return got
}

// stream drives connection c until it fails (or the run ends, which
// fails it by its deadline) and returns the error. Requests lost with a
// broken connection are not resent, and their credits come back.
func (o *stdOpen) stream(c *net.TCPConn) error {
	for len(o.credits) < o.n {
		o.credits <- struct{}{} // those of requests lost with the last connection
	}
	done := make(chan struct{})
	rerr := make(chan error, 1)
	first := o.seq + 1
	go func() { rerr <- o.read(c, first, done) }()
	var err error
	size := o.p.size()
	for err == nil && o.ctx.Err() == nil {
		k := 0
		for k < o.bl.waiting() && o.credit() {
			o.seq++
			o.p.stamp(o.reqs[k*size:(k+1)*size], o.seq)
			o.sent[o.seq%uint64(o.n)].Store(int64(o.bl.take(o.s).Sub(o.s.start)))
			k++
		}
		if k > 0 {
			if _, err = c.Write(o.reqs[:k*size]); err != nil {
				break
			}
		}
		select {
		case err = <-rerr:
			rerr <- err // for the wait below
		default:
			o.pace(time.Hour, true)
		}
	}
	close(done)
	_ = c.SetDeadline(pastDeadline) // unblocks the reader
	if e := <-rerr; err == nil {
		err = e
	}
	return err
}

// read verifies the replies from sequence number first on, handing back a
// credit for each, until a read fails or done is closed.
func (o *stdOpen) read(c *net.TCPConn, first uint64, done <-chan struct{}) error {
	reply := make([]byte, o.p.size())
	for seq := first; ; seq++ {
		if _, err := io.ReadFull(c, reply); err != nil {
			return err
		}
		d := time.Since(o.s.start) - time.Duration(o.sent[seq%uint64(o.n)].Load())
		if !o.p.check(reply, seq) {
			o.w.Mismatch()
			return errMismatch
		}
		o.w.Done(d)
		select {
		case o.credits <- struct{}{}:
		case <-done:
			return nil
		}
	}
}

// churn sends each request on a connection of its own, one at a time: a
// goroutine per request dials, sends, verifies the reply and hands back
// the credit, while this one keeps the schedule.
func (o *stdOpen) churn() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for o.ctx.Err() == nil {
		o.release()
		if o.bl.waiting() > 0 && o.credit() {
			o.seq++
			seq, due := o.seq, o.bl.take(o.s)
			wg.Go(func() { o.churnOne(seq, due) })
			continue
		}
		o.pace(time.Hour, true)
	}
}

// churnOne sends request seq, due at due, on a new connection.
func (o *stdOpen) churnOne(seq uint64, due time.Time) {
	defer func() { o.credits <- struct{}{} }()
	req := o.p.newBuffer(1)
	o.p.stamp(req, seq)
	c, stop, err := dial(o.ctx, o.wl.Addr)
	if err != nil {
		failed(o.ctx, o.w, err)
		return
	}
	defer func() {
		stop()
		_ = c.SetLinger(0)
		_ = c.Close()
	}()
	reply := make([]byte, o.p.size())
	if _, err = c.Write(req); err == nil {
		_, err = io.ReadFull(c, reply)
	}
	switch {
	case err != nil:
		failed(o.ctx, o.w, err)
	case !o.p.check(reply, seq):
		o.w.Mismatch()
	default:
		o.w.Done(time.Since(due))
	}
}
