//go:build linux

package runtime

import (
	"sync"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// fileWorkers are the threads an epoll loop runs its file operations on:
// regular files are always "ready" to epoll, and a read that misses the
// page cache, or an fdatasync, blocks the thread that makes it, so the
// loop hands each operation to a worker and goes on. At most max workers
// run (Config.FileWorkers); they start as operations arrive and wait for
// more until the loop stops. Each completed operation goes on done, and
// the first one after the loop last looked wakes it (the loop's own
// wake-up, coalesced); the loop runs the results on its thread
// (Loop.runPosted). An operation belongs to a worker from the hand-off to
// the hand-back: the loop does not touch it in between.
type fileWorkers struct {
	mu      sync.Mutex
	cond    sync.Cond
	queue   []*fileOp
	done    []*fileOp
	running int
	idle    int
	max     int
	stopped bool
	wg      sync.WaitGroup
	wake    func()
}

func newFileWorkers(max int, wake func()) *fileWorkers {
	w := &fileWorkers{max: max, wake: wake}
	w.cond.L = &w.mu
	return w
}

// submit hands op to a worker, starting one if none is idle and fewer than
// max run. It never blocks the loop for longer than the lock.
func (w *fileWorkers) submit(op *fileOp) {
	w.mu.Lock()
	w.queue = append(w.queue, op)
	switch {
	case w.idle > 0:
		w.cond.Signal()
	case w.running < w.max:
		w.running++
		w.wg.Add(1)
		go w.work()
	}
	w.mu.Unlock()
}

func (w *fileWorkers) work() {
	defer w.wg.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for len(w.queue) == 0 && !w.stopped {
			w.idle++
			w.cond.Wait()
			w.idle--
		}
		if len(w.queue) == 0 {
			return // stopped, and nothing left
		}
		op := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.mu.Unlock()
		runFileOp(op)
		w.mu.Lock()
		w.done = append(w.done, op)
		if len(w.done) == 1 {
			w.wake()
		}
	}
}

// take returns the completed operations, into dst's storage.
func (w *fileWorkers) take(dst []*fileOp) []*fileOp {
	w.mu.Lock()
	dst = append(dst, w.done...)
	clear(w.done)
	w.done = w.done[:0]
	w.mu.Unlock()
	return dst
}

// stop ends the workers once the queue is empty and waits for them.
func (w *fileWorkers) stop() {
	w.mu.Lock()
	w.stopped = true
	w.cond.Broadcast()
	w.mu.Unlock()
	w.wg.Wait()
}

// offload hands op to the loop's file workers, starting them on first use.
func (l *Loop) offload(op *fileOp) {
	t := &l.files
	if t.workers == nil {
		t.workers = newFileWorkers(l.cfg.FileWorkers, l.d.wake)
	}
	l.cnt[sFileOffloaded]++
	t.workers.submit(op)
}

// runWorkerResults runs the results the file workers handed back; the
// loop's wake-up (runPosted) calls it.
func (l *Loop) runWorkerResults() {
	t := &l.files
	if t.workers == nil {
		return
	}
	t.doneBatch = t.workers.take(t.doneBatch[:0])
	for i, op := range t.doneBatch {
		t.doneBatch[i] = nil
		op.pending = 0
		l.fileDone(op)
	}
}

// runFileOp runs op as blocking system calls, on a worker's thread, and
// records its results as the ring's completions would carry them.
func runFileOp(op *fileOp) {
	fd := op.fd
	var n int
	var err error
	op.syncRes = 0
	switch w := op.work.(type) {
	case *openOp:
		name := string(w.path[:len(w.path)-1])
		if w.beneath {
			n, err = sys.Openat2Retry(w.dirfd, name, &w.how)
		} else {
			n, err = sys.Openat(w.dirfd, name, w.flag, w.perm)
		}
	case *readOp:
		n, err = sys.Pread(fd, w.buf[w.moved:w.want], w.off+int64(w.moved))
	case *readvOp:
		n, err = sys.Preadv(fd, w.bufs, w.off)
	case *writeOp:
		p := w.buf[w.moved:w.want]
		if w.off < 0 {
			n, err = sys.Write(fd, p)
		} else {
			n, err = sys.Pwrite(fd, p, w.off+int64(w.moved))
		}
		if w.sync {
			// As the ring's linked sync: cancelled unless the write
			// wrote all it was given.
			switch {
			case err != nil || n < len(p):
				op.syncRes = -int32(unix.ECANCELED)
			default:
				op.syncRes = result(0, sys.Fsync(fd, true))
			}
		}
	case *syncOp:
		err = sys.Fsync(fd, w.data)
	case *allocOp:
		err = sys.Fallocate(fd, w.mode, w.off, w.size)
	case *statOp:
		err = sys.Statx(fd, &w.st)
	case *closeOp:
		err = sys.Close(fd) // never retried: the descriptor is gone either way
	}
	op.res = result(n, err)
}

// result is a system call's outcome as an io_uring result: n, or the
// negated errno.
func result(n int, err error) int32 {
	if err != nil {
		return -int32(errnoOf(err))
	}
	return int32(n)
}

// inlineDone queues the result of an operation the driver completed on
// the loop's thread: it runs from a timer of the next turn, so that no
// callback runs inside the call that started its operation.
func (l *Loop) inlineDone(op *fileOp) {
	t := &l.files
	t.inline = append(t.inline, op)
	if len(t.inline) == 1 {
		l.AfterFunc(0, l.runInline)
	}
}

func (l *Loop) runInline() {
	t := &l.files
	t.inlineRun, t.inline = t.inline, t.inlineRun[:0]
	for i, op := range t.inlineRun {
		t.inlineRun[i] = nil
		op.pending = 0
		l.fileDone(op)
	}
}
