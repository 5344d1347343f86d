//go:build linux

package runtime

import (
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver's skipped sends (UringSkipSends,
// docs/decisions/0051): a send that never waits for room in the socket
// (ring.PrepareSendNoWait: MSG_DONTWAIT with MSG_WAITALL) and posts no
// completion when it succeeds (IOSQE_CQE_SKIP_SUCCESS). The kernel issues
// it inline, within the enter that submits it, and either sends all of it
// there or fails it with what it could not do: -EAGAIN (the socket had
// no room) or the short count it sent. So once the enter has consumed the
// entry and every completion it posted has been reaped, a skipped send
// that posted nothing has sent everything, and its bytes of Conn.out are
// free. That is the buffer-lifetime signal a skipped completion needs, and
// what saves a request-response connection the second enter per round
// trip, which only reaped the send's completion.
//
// The bookkeeping: each such send is listed (skipped) with a sequence
// number that the connection holds while the send is the kernel's (its
// ufSendSkip flag). A failure completion clears the flag and sends the
// rest as an ordinary send, which may wait; dispatch completes the listed
// sends whose flag is still set once it may know (skipsDone). Until then
// the connection counts the send among its operations in the kernel, as
// an ordinary send: its slot is not freed, and release cancels it (a
// cancel that finds nothing, which is harmless).

// skipSend is a skipped send the kernel may still report a failure of.
type skipSend struct {
	c   *Conn
	seq uint32 // c.ur.skipSeq while this send is the kernel's
	n   int    // the bytes it hands over
}

// sendSkipped prepares the send of p (the head of c's queue) as a skipped
// send, under the send's user data ud, and lists it.
func (d *uringDriver) sendSkipped(c *Conn, p []byte, ud uint64) error {
	if err := d.r.PrepareSendNoWait(d.sock(c), p, ud); err != nil {
		return err
	}
	d.onSlot(c)
	d.r.SkipSuccess()
	d.skipSeq++
	if d.skipSeq == 0 {
		d.skipSeq = 1 // 0 marks a send that failed for good (dispatchSkipsFirst)
	}
	c.ur.flags |= ufSendSkip
	c.ur.skipSeq = d.skipSeq
	d.skipped = append(d.skipped, skipSend{c: c, seq: d.skipSeq, n: len(p)})
	return nil
}

// skipFailed handles the completion of a skipped send, which the kernel
// posts only when the send did not take all of its bytes: -EAGAIN (none,
// the socket was full), the bytes it took, or another error. The rest goes
// out as an ordinary send, which waits for room, and so does every send
// of the connection until its queue drains (ufSendFull).
func (d *uringDriver) skipFailed(c *Conn, res int32) {
	c.ur.flags &^= ufSendSkip
	c.ur.flags |= ufSendFull // a peer that reads slowly: no skipped send to fail each time
	switch {
	case res == -int32(unix.EAGAIN):
		res = 0
	case res < 0:
		d.sent(c, res)
		return
	}
	if d.l.sendResult(c, int(res), nil) {
		d.sendOut(c, false)
	}
}

// skipsKnown returns how many of the listed skipped sends dispatch may
// complete after reaping: all of them if the kernel has consumed every
// prepared entry (they were all prepared before the enter; dispatch lists
// more only after this is asked), none if some entries wait in the
// submission queue (an enter that stopped early, ring.ErrBusy), which may
// be listed sends not yet issued.
func (d *uringDriver) skipsKnown() int {
	if len(d.skipped) == 0 || d.r.Pending() != 0 {
		return 0
	}
	return len(d.skipped)
}

// skipsDone completes the first n listed skipped sends that posted no
// failure: each sent all of its bytes. It runs after the reaping of every
// completion ready, and not while the kernel holds completions back
// (overflowed): a failure may be among them, and the next enter delivers
// them first.
func (d *uringDriver) skipsDone(n int) {
	if n == 0 || d.r.Overflowed() {
		return
	}
	for i := 0; i < n; i++ {
		s := d.skipped[i]
		d.skipped[i] = skipSend{}
		c := s.c
		if c.ur.flags&ufSendSkip == 0 || c.ur.skipSeq != s.seq {
			continue // it failed, and was handled as it completed
		}
		c.ur.flags &^= ufSendSkip | ufSendCancel
		c.ur.ops--
		if d.l.sendResult(c, s.n, nil) {
			d.send(c) // listed after n
		}
		if c.closed() && c.ur.ops == 0 && !holdsSocket(c) {
			d.l.freeSlot(c)
		}
	}
	rest := copy(d.skipped, d.skipped[n:])
	clear(d.skipped[rest:])
	d.skipped = d.skipped[:rest]
}

// dispatchSkipsFirst is the start of a dispatch with known skipped sends
// to complete (skipsKnown). A handler must see its connection's queue as
// the kernel left it (Conn.Buffered, TryWrite and TryReserve, the outbound
// cap: decision 0049), so no handler runs before every skipped send the
// enter finished is accounted for. It reaps every completion ready (a
// failure may be any of them: the kernel posted them all before the enter
// returned), handles the skipped sends' failures among them, completes
// the listed sends that posted none (skipsDone), delivers the receives
// earlier turns deferred, and then dispatches the other completions in
// the order the kernel posted them.
func (d *uringDriver) dispatchSkipsFirst(known int) {
	// The kernel posted every failure before the enter returned: they
	// are among the completions ready now. More of those than a batch
	// holds grow the batch, once, to what the load needs (the completion
	// queue bounds it); later ones go through the ordinary reaping.
	// The grown batch is a slice of its own: the ordinary reaping keeps
	// its batch, so that buffers recycled in a batch go back to the
	// kernel as often as before.
	want := d.ready()
	buf := d.cqes
	if want > len(buf) {
		if cap(d.skipCqes) < want {
			d.skipCqes = make([]ring.Completion, want)
		}
		buf = d.skipCqes[:want]
	}
	n := 0
	for n < want {
		got := d.reap(buf[n:want])
		if got == 0 {
			break
		}
		n += got
	}
	cqes := buf[:n]
	// One pass: the OnClose and OnDrain these cause run once every
	// skipped send is accounted for.
	d.l.beginPass()
	for i := range cqes {
		e := &cqes[i]
		if uint8(e.UserData>>56) != kindSend {
			continue
		}
		if c := d.l.conn(uint32(e.UserData), uint32(e.UserData>>32)&genMask); c != nil && c.ur.flags&ufSendSkip != 0 {
			// A connection has one send in flight: this is its
			// skipped send's failure.
			if e.Res < 0 && e.Res != -int32(unix.EAGAIN) {
				// Failed for good (the peer reset): the connection
				// closes, so it is handled in the kernel's order, after
				// what the kernel posted before it (a receive of the
				// peer's last bytes); skipsDone passes it over (its
				// sequence is no listed send's).
				c.ur.skipSeq = 0
				continue
			}
			d.complete(e)
			e.UserData = 0 // handled: no kind is zero
		}
	}
	d.skipsDone(known)
	d.l.endPass()
	if len(d.deferred) > 0 {
		d.deliverDeferred()
	}
	for i := range cqes {
		if cqes[i].UserData != 0 {
			d.complete(&cqes[i])
		}
	}
	d.cnt[sCompletions] += uint64(n)
	d.bufs.Publish()
}

// skipsAwaited reports whether a connection whose skipped send dispatch
// has yet to complete has something waiting for it (more bytes queued than
// the send takes, or what Loop.sendAwaited lists):
// then the turn's enter must not sleep, or that would wait for an
// unrelated completion. A connection that only answered its request sleeps
// with its send uncompleted: nothing needs the send's end before the next
// completion, whose dispatch completes it.
func (d *uringDriver) skipsAwaited() bool {
	for _, s := range d.skipped {
		c := s.c
		if c.ur.flags&ufSendSkip == 0 || c.ur.skipSeq != s.seq {
			continue
		}
		// More queued than this send takes (the rest of a buffer past
		// maxSend, or bytes written since) waits for it too.
		if c.out.buffered() > s.n || d.l.sendAwaited(c) {
			return true
		}
	}
	return false
}
