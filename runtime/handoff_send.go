//go:build linux

package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// handoffOut is the old process's sender: one goroutine that takes the
// loops' batches, sends them to the new process as messages
// (handoff_wire.go) with blocking calls the loops must not make, and posts
// each loop its report (Loop.handoffDone). One message is in flight at a
// time: the next waits for the last one's acknowledgement.
type handoffOut struct {
	rt   *Runtime
	conn *net.UnixConn
	ctx  context.Context

	mu     sync.Mutex
	jobs   []handoffJob
	closed bool
	wake   chan struct{} // a job was queued (capacity 1)
	quit   chan struct{} // stop: the loops have exited
	done   chan struct{} // run returned
	dead   atomic.Bool   // the new process is gone or broke the protocol
	seq    uint32

	msg, oob, ack []byte
	fds           []int
}

// handoffJob is one loop's batch.
type handoffJob struct {
	l     *Loop
	batch []handoffEntry
}

func newHandoffOut(rt *Runtime, uc *net.UnixConn, ctx context.Context) *handoffOut {
	return &handoffOut{
		rt: rt, conn: uc, ctx: ctx,
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		msg: make([]byte, 0, handoffMsgMax), ack: make([]byte, handoffAckLen+1),
	}
}

// failed reports that nothing more can be handed over.
func (o *handoffOut) failed() bool { return o.dead.Load() }

// submit queues l's batch; it reports false once the sender has stopped
// (the caller keeps the connections).
func (o *handoffOut) submit(l *Loop, batch []handoffEntry) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return false
	}
	o.jobs = append(o.jobs, handoffJob{l, batch})
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return true
}

// stop ends the sender once the loops have exited, and waits for it: the
// channel closes, which tells the new process the hand-over is over.
func (o *handoffOut) stop() {
	close(o.quit)
	<-o.done
}

func (o *handoffOut) run() {
	defer close(o.done)
	defer o.conn.Close()
	defer func() {
		// Nothing more is taken; a batch queued after the last drain
		// (none: the loops have exited) would be given back.
		o.mu.Lock()
		o.closed = true
		jobs := o.jobs
		o.jobs = nil
		o.mu.Unlock()
		for _, j := range jobs {
			for _, e := range j.batch {
				_ = sys.Close(e.fd)
			}
			l, batch := j.l, j.batch
			_ = l.post(func() { l.handoffDone(batch) }, true)
		}
	}()
	for {
		select {
		case <-o.wake:
		case <-o.quit:
			o.drain()
			return
		case <-o.ctx.Done():
			o.fail(fmt.Errorf("the deadline passed: %w", o.ctx.Err()))
			// Wait for the loops to exit (Close follows the deadline);
			// what they still submit is given back.
			for {
				select {
				case <-o.wake:
					o.drain()
				case <-o.quit:
					o.drain()
					return
				}
			}
		}
		o.drain()
	}
}

// drain sends every queued batch (or gives it back once the sender has
// failed) and reports each to its loop.
func (o *handoffOut) drain() {
	for {
		o.mu.Lock()
		jobs := o.jobs
		o.jobs = nil
		if len(jobs) == 0 {
			o.closed = o.closed || o.dead.Load()
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		for _, j := range jobs {
			o.send(j.batch)
			for _, e := range j.batch {
				_ = sys.Close(e.fd) // the duplicate: the new process has its own, or none
			}
			l, batch := j.l, j.batch
			// A loop that stopped has closed its connections already.
			_ = l.post(func() { l.handoffDone(batch) }, true)
		}
	}
}

// fail marks the sender dead, once, with a log line: the loops keep and
// close the protocol's way what is not handed over yet.
func (o *handoffOut) fail(err error) {
	if o.dead.CompareAndSwap(false, true) {
		o.rt.cfg.Logger.Error("percore: hand-over to the new process stopped; this process serves the connections it still holds and closes them the protocol's way",
			"err", err)
	}
}

// send hands batch over in messages of at most handoffMsgMax bytes,
// setting taken on each entry the new process acknowledged.
func (o *handoffOut) send(batch []handoffEntry) {
	for len(batch) > 0 && !o.dead.Load() {
		n, size := 0, handoffHeader
		for n < len(batch) && (n == 0 || size+recordLen(batch[n].ln, batch[n].state) <= handoffMsgMax) {
			size += recordLen(batch[n].ln, batch[n].state)
			n++
		}
		taken, err := o.message(batch[:n])
		if err != nil {
			o.fail(err)
			return
		}
		for i := range taken {
			batch[i].taken = true
		}
		batch = batch[n:]
	}
}

// message sends one message and waits for its acknowledgement; it returns
// how many of its descriptors the new process took.
func (o *handoffOut) message(recs []handoffEntry) (int, error) {
	o.seq++
	o.msg = appendHeader(o.msg[:0], o.seq, len(recs))
	o.fds = o.fds[:0]
	for _, e := range recs {
		o.msg = appendRecord(o.msg, e.ln, e.state)
		o.fds = append(o.fds, e.fd)
	}
	o.oob = unix.UnixRights(o.fds...)
	deadline, ok := o.ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(handoffTimeout)
	}
	_ = o.conn.SetDeadline(deadline)
	if _, _, err := o.conn.WriteMsgUnix(o.msg, o.oob, nil); err != nil {
		return 0, fmt.Errorf("send %d connections: %w", len(recs), err)
	}
	// The acknowledgement: also the new process's death (EOF, a reset)
	// or the deadline shows up here.
	n, err := o.conn.Read(o.ack)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The new process is alive but silent: it may hold the
		// descriptors, so this one must not serve them too. They count
		// as handed over; it stops here.
		o.fail(fmt.Errorf("no acknowledgement of %d connections before the deadline", len(recs)))
		return len(recs), nil
	case err != nil:
		return 0, fmt.Errorf("acknowledgement of %d connections: %w", len(recs), err)
	case n != handoffAckLen:
		return 0, fmt.Errorf("acknowledgement of %d bytes", n)
	}
	seq, taken := binary.LittleEndian.Uint32(o.ack), binary.LittleEndian.Uint32(o.ack[4:])
	if seq != o.seq || taken > uint32(len(recs)) {
		return 0, errors.New("acknowledgement out of order")
	}
	if int(taken) < len(recs) {
		o.rt.cfg.Logger.Warn("percore: hand-over: the new process took part of a batch; the rest close the protocol's way",
			"sent", len(recs), "taken", taken)
	}
	return int(taken), nil
}

// handoffTimeout bounds the acknowledgement wait when ctx has no
// deadline: a new process that stops answering must not hold the old one
// for ever.
const handoffTimeout = 10 * time.Second
