//go:build linux

package runtime

import (
	"fmt"
	"net"
)

// The one door into a loop for other goroutines: Post, and Go for work that
// would block the loop.

// Post queues f to run on the loop's thread and wakes the loop. It is safe
// for concurrent use; wake-ups coalesce. Functions run in the order they
// were posted. The queue is bounded (Config.MaxPosted): when it is full,
// Post returns an error that matches ErrLoopBusy, f does not run, and
// Stats.PostRejects counts it; the caller sheds the work or retries later.
// After the loop stops, Post returns net.ErrClosed and f does not run.
func (l *Loop) Post(f func()) error { return l.post(f, false) }

// post is Post; force skips the bound, for the runtime's own functions
// (shutdown, and the continuations of work Go has already admitted).
func (l *Loop) post(f func(), force bool) error {
	l.postMu.Lock()
	if l.postClosed {
		l.postMu.Unlock()
		return fmt.Errorf("post to loop %d: %w", l.id, net.ErrClosed)
	}
	if !force && l.cfg.MaxPosted > 0 && len(l.posted) >= l.cfg.MaxPosted {
		l.postMu.Unlock()
		l.postRejects.Add(1)
		return fmt.Errorf("post to loop %d: %d functions queued: %w", l.id, l.cfg.MaxPosted, ErrLoopBusy)
	}
	l.posted = append(l.posted, f)
	l.postMu.Unlock()
	// Wake outside postMu: the wake-up's system call is where the kernel
	// hands the CPU to the loop it wakes when they share one, and a
	// poster preempted holding postMu would stop that loop at its next
	// runPosted until the poster ran again (milliseconds behind the
	// CPU's other threads, in a handshake storm). A function queued
	// before the door closed whose wake-up finds the descriptor's door
	// closed still runs: the loop runs what was posted once more after
	// it closes both (Loop.run).
	l.wakeIfOpen()
	return nil
}

// Go runs work on a new goroutine, for work that would block the loop, and
// then runs the function work returns (if not nil) on the loop's thread.
// It is safe for concurrent use. At most Config.MaxGo such goroutines run
// per loop: past that Go returns an error that matches ErrLoopBusy (counted
// in Stats.GoRejects) and work does not run. After the loop stops Go
// returns net.ErrClosed; a loop that stops while work runs cannot run its
// continuation, which is then dropped and counted in Stats.GoDropped.
func (l *Loop) Go(work func() (then func())) error {
	l.postMu.Lock()
	closed := l.postClosed
	l.postMu.Unlock()
	if closed {
		return fmt.Errorf("go on loop %d: %w", l.id, net.ErrClosed)
	}
	if n := l.goRunning.Add(1); l.cfg.MaxGo > 0 && n > int64(l.cfg.MaxGo) {
		l.goRunning.Add(-1)
		l.goRejects.Add(1)
		return fmt.Errorf("go on loop %d: %d goroutines running: %w", l.id, l.cfg.MaxGo, ErrLoopBusy)
	}
	go func() {
		defer l.goRunning.Add(-1)
		if then := work(); then != nil {
			if l.post(then, true) != nil {
				l.goDropped.Add(1)
			}
		}
	}()
	return nil
}

// runPosted runs what other loops pushed (cross-loop calls and their
// replies) and what other goroutines posted. Drivers call it after a
// wake-up.
func (l *Loop) runPosted() {
	if l.calls.inbound != nil {
		l.runCalls()
	}
	l.runWorkerResults()
	l.postMu.Lock()
	l.running, l.posted = l.posted, l.running[:0]
	l.postMu.Unlock()
	l.postedBatch = max(l.postedBatch, len(l.running))
	for i, f := range l.running {
		l.running[i] = nil
		l.cnt[sPosted]++
		l.safely("posted function", f)
	}
}
