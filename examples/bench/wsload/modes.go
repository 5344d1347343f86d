//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/examples/bench/gwproto"
	"github.com/percore/percore/internal/hist"
)

// checkBody is the final publish of idle and storm.
func checkBody() []byte { return []byte("check " + strconv.FormatInt(time.Now().UnixNano(), 10)) }

func (r *runner) idle(ctx context.Context) error {
	var before memory
	if r.cfg.serverPID != 0 {
		var err error
		if before, err = procMemory(r.cfg.serverPID); err != nil {
			return err
		}
	}
	cs, err := r.openAll(ctx, r.cfg.conns, true)
	if err != nil {
		return err
	}
	body := checkBody()
	var got atomic.Uint64
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.read(c, func(op byte, p []byte) {
				if op == gwproto.OpText && bytes.Equal(p, body) {
					got.Add(1)
					return
				}
				r.mismatch("an idle connection received %.60q", p)
			})
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
		r.res.ServerRSSPerConnBytes = (float64(after.rssKiB) - float64(before.rssKiB)) * 1024 / float64(r.cfg.conns)
	}
	r.clientCost(r.cfg.conns)
	r.check(ctx, body, r.cfg.conns, &got)
	r.closing.Store(true)
	closeAll(cs)
	wg.Wait()
	return nil
}

// The fan-out payload: "SEQ TIME " in fixed-width decimal, then 'x' up to -bytes.
const seqWidth, timeWidth = 20, 20

func payload(b []byte, seq int, t int64) {
	for i := range b {
		b[i] = 'x'
	}
	s := strconv.AppendInt(nil, int64(seq), 10)
	copy(b[seqWidth-len(s):], s)
	for i := 0; i < seqWidth-len(s); i++ {
		b[i] = '0'
	}
	b[seqWidth] = ' '
	ts := strconv.AppendInt(nil, t, 10)
	copy(b[seqWidth+1+timeWidth-len(ts):], ts)
	for i := seqWidth + 1; i < seqWidth+1+timeWidth-len(ts); i++ {
		b[i] = '0'
	}
	b[seqWidth+1+timeWidth] = ' '
}

// parsePayload returns the sequence number and time in p, checking the rest.
func parsePayload(p []byte, size int) (seq int, t int64, ok bool) {
	if len(p) != size || p[seqWidth] != ' ' || p[seqWidth+1+timeWidth] != ' ' {
		return 0, 0, false
	}
	s, err1 := strconv.ParseInt(string(p[:seqWidth]), 10, 64)
	ts, err2 := strconv.ParseInt(string(p[seqWidth+1:seqWidth+1+timeWidth]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	for _, c := range p[seqWidth+2+timeWidth:] {
		if c != 'x' {
			return 0, 0, false
		}
	}
	return int(s), ts, true
}

func (r *runner) fanout(ctx context.Context) error {
	n := r.cfg.conns
	P := r.cfg.publishes
	if P == 0 {
		P = max(1, int(r.cfg.seconds/r.cfg.interval))
	}
	r.res.Publishes = P
	cs, err := r.openAll(ctx, n, true)
	if err != nil {
		return err
	}
	lastRecv := make([]atomic.Int64, P)
	count := make([]atomic.Int32, P)
	var lat shards
	var delivered, dups, reord atomic.Uint64
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := make([]uint64, (P+63)/64)
			next := 0
			r.read(c, func(op byte, p []byte) {
				now := time.Now().UnixNano()
				seq, t, ok := parsePayload(p, r.cfg.bytes)
				if op != gwproto.OpText || !ok || seq < 0 || seq >= P {
					r.mismatch("subscriber %d received %.60q", i, p)
					return
				}
				if seen[seq/64]&(1<<(seq%64)) != 0 {
					dups.Add(1)
					return
				}
				seen[seq/64] |= 1 << (seq % 64)
				if seq < next { // after a later one; a gap alone is a loss
					reord.Add(1)
				}
				next = max(next, seq+1)
				lat.record(i, now-t)
				count[seq].Add(1)
				delivered.Add(1)
				for {
					old := lastRecv[seq].Load()
					if now <= old || lastRecv[seq].CompareAndSwap(old, now) {
						break
					}
				}
			})
		}()
	}
	r.clientCost(n)
	sent := make([]int64, P)
	rtts := make([]int64, P)
	var pubRTT hist.Histogram
	rs := r.startRestarts(ctx)
	cpu0, self0 := r.serverCPU(), selfCPU()
	start := time.Now()
	body := make([]byte, r.cfg.bytes)
	for seq := range P {
		due := start.Add(time.Duration(seq) * r.cfg.interval)
		if d := time.Until(due); d > 0 {
			if err := sleep(ctx, d); err != nil {
				break
			}
		}
		if time.Since(due) > r.cfg.interval {
			r.res.LatePublish++
		}
		t := time.Now()
		payload(body, seq, t.UnixNano())
		sent[seq] = t.UnixNano()
		reached, err := r.publish(body)
		rtts[seq] = int64(time.Since(t))
		pubRTT.Record(rtts[seq])
		if err != nil {
			r.fail("publish %d: %v", seq, err)
			continue
		}
		if reached != n {
			r.res.ShortCounts++
		}
	}
	want := uint64(n) * uint64(P)
	deadline := time.Now().Add(r.cfg.drain)
	for delivered.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(time.Millisecond) // polling a counter, not synchronising
	}
	cpu1, self1 := r.serverCPU(), selfCPU()
	elapsed := time.Since(start)
	r.closing.Store(true)
	closeAll(cs)
	wg.Wait()
	if r.cfg.serverPID != 0 {
		r.res.ServerBusyPct = 100 * float64(cpu1-cpu0) / float64(elapsed)
	}
	r.res.ClientBusyPct = 100 * float64(self1-self0) / float64(elapsed)
	d := delivered.Load()
	r.res.Delivered = d
	r.res.Lost = want - d
	r.res.Duplicates, r.res.Reordered = dups.Load(), reord.Load()
	if d > 0 && cpu1 > cpu0 {
		r.res.ServerCPUUsPerDelivery = float64(cpu1-cpu0) / 1e3 / float64(d)
	}
	h := lat.merged()
	r.res.LatP50us, r.res.LatP99us, r.res.LatP999us, r.res.LatMaxUs = us(h, 0.5), us(h, 0.99), us(h, 0.999), us(h, 1)
	var last hist.Histogram
	for seq := range P {
		if count[seq].Load() > 0 {
			last.Record(lastRecv[seq].Load() - sent[seq])
		}
	}
	r.res.LastP50us, r.res.LastP99us, r.res.LastMaxUs = us(&last, 0.5), us(&last, 0.99), us(&last, 1)
	r.res.PublishP99us = us(&pubRTT, 0.99)
	lasts := make([]int64, P)
	for seq := range P {
		if count[seq].Load() > 0 {
			lasts[seq] = lastRecv[seq].Load()
		}
	}
	rs.report(&r.res, sent, lasts, rtts)
	return nil
}

func (r *runner) echo(ctx context.Context) error {
	n := r.cfg.conns
	cs, err := r.openAll(ctx, n, false)
	if err != nil {
		return err
	}
	var inWindow, stop atomic.Bool
	var msgs atomic.Uint64
	var rtt shards
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { r.pings.Add(uint64(c.Pings)) }()
			msg := make([]byte, r.cfg.bytes)
			for j := 16; j < len(msg); j++ {
				msg[j] = byte(i + j)
			}
			for seq := uint64(0); !stop.Load(); seq++ {
				t := time.Now()
				binary.LittleEndian.PutUint64(msg, seq)
				binary.LittleEndian.PutUint64(msg[8:], uint64(t.UnixNano()))
				if err := c.WriteBinary(msg); err != nil {
					if !r.closing.Load() {
						r.fail("echo write: %v", err)
					}
					return
				}
				op, p, err := c.ReadMessage()
				if err != nil {
					if !r.closing.Load() {
						r.fail("echo read: %v", err)
					}
					return
				}
				if op != gwproto.OpBinary || !bytes.Equal(p, msg) {
					r.mismatch("connection %d: echo %d differs (%d bytes, opcode %d)", i, seq, len(p), op)
					return
				}
				if inWindow.Load() {
					rtt.record(i, int64(time.Since(t)))
					msgs.Add(1)
				}
			}
		}()
	}
	if err := sleep(ctx, r.cfg.warmup); err != nil {
		return err
	}
	r.clientCost(n)
	cpu0, self0 := r.serverCPU(), selfCPU()
	start := time.Now()
	inWindow.Store(true)
	err = sleep(ctx, r.cfg.seconds)
	inWindow.Store(false)
	elapsed := time.Since(start)
	cpu1, self1 := r.serverCPU(), selfCPU()
	stop.Store(true)
	r.closing.Store(true)
	closeAll(cs)
	wg.Wait()
	if err != nil {
		return err
	}
	m := msgs.Load()
	r.res.Messages = m
	r.res.MsgsPerS = float64(m) / elapsed.Seconds()
	h := rtt.merged()
	r.res.RttP50us, r.res.RttP99us, r.res.RttMaxUs = us(h, 0.5), us(h, 0.99), us(h, 1)
	if m > 0 && r.cfg.serverPID != 0 {
		r.res.ServerCPUUsPerMsg = float64(cpu1-cpu0) / 1e3 / float64(m)
		r.res.ServerBusyPct = 100 * float64(cpu1-cpu0) / float64(elapsed)
	}
	r.res.ClientBusyPct = 100 * float64(self1-self0) / float64(elapsed)
	return nil
}

// storm phases.
const (
	calm = iota
	storming
	ending
)

func (r *runner) storm(ctx context.Context) error {
	n := r.cfg.conns
	cs, err := r.openAll(ctx, n, true)
	if err != nil {
		return err
	}
	live, err := r.startLive(ctx, n)
	if err != nil {
		closeAll(cs)
		return err
	}
	defer live.kill()
	var phase atomic.Int32
	var resub, stormRetries atomic.Uint64
	var doneAt atomic.Int64
	body := checkBody()
	var got atomic.Uint64
	current := make([]atomic.Pointer[gwproto.Client], n)
	var wg sync.WaitGroup
	for i, c := range cs {
		current[i].Store(c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			redialed := false
			for {
				c := current[i].Load()
				for {
					op, p, err := c.ReadMessage()
					if err != nil {
						break
					}
					if op == gwproto.OpText && bytes.Equal(p, body) {
						got.Add(1)
						continue
					}
					r.mismatch("subscriber %d received %.60q", i, p)
				}
				r.pings.Add(uint64(c.Pings))
				switch {
				case phase.Load() == ending:
					return
				case phase.Load() != storming || redialed:
					r.fail("subscriber %d failed outside the storm", i)
					return
				}
				redialed = true
				c2, retries, err := r.dial(ctx, i, true)
				stormRetries.Add(uint64(retries))
				if err != nil {
					r.fail("subscriber %d could not come back: %v", i, err)
					return
				}
				current[i].Store(c2)
				now := time.Now().UnixNano()
				for {
					old := doneAt.Load()
					if now <= old || doneAt.CompareAndSwap(old, now) {
						break
					}
				}
				resub.Add(1)
			}
		}()
	}
	if err := sleep(ctx, r.cfg.liveBefore); err != nil {
		return err
	}
	r.clientCost(n)
	cpu0 := r.serverCPU()
	t0 := time.Now()
	phase.Store(storming)
	if err := live.say("storm"); err != nil {
		r.fail("the live client: %v", err)
	}
	for _, c := range cs {
		abort(c.Conn())
	}
	for resub.Load() < uint64(n) && ctx.Err() == nil && r.errors.Load() == 0 {
		time.Sleep(time.Millisecond) // polling a counter, not synchronising
	}
	cpu1 := r.serverCPU()
	if err := live.say("end"); err != nil {
		r.fail("the live client: %v", err)
	}
	if resub.Load() == uint64(n) {
		r.res.StormS = float64(doneAt.Load()-t0.UnixNano()) / 1e9
	}
	r.res.ServerCPUStormMs = float64(cpu1-cpu0) / 1e6
	r.check(ctx, body, n, &got)
	phase.Store(ending)
	r.closing.Store(true)
	for i := range current {
		abort(current[i].Load().Conn())
	}
	wg.Wait()
	lr, err := live.finish()
	if err != nil {
		r.fail("%v", err)
	} else if lr.Problem != "" {
		r.fail("the live client: %s", lr.Problem)
	}
	r.pings.Add(lr.Pings)
	r.res.StormRetries = stormRetries.Load()
	r.res.LiveBeforeP99us = lr.BeforeP99us
	r.res.LiveDuringP50us, r.res.LiveDuringP99us, r.res.LiveDuringMaxUs = lr.DuringP50us, lr.DuringP99us, lr.DuringMaxUs
	r.res.LiveDuringRTTs = lr.DuringRTTs
	if ctx.Err() != nil {
		return fmt.Errorf("storm: %w after %d of %d resubscribed", ctx.Err(), resub.Load(), n)
	}
	return nil
}
