package runtime

import (
	"net"
	"testing"
	"time"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver's direct descriptors (uring_fixed.go) at the edges a
// kernel does not reach on demand: the system's file limit failing an
// accept into the table, a hold's cancel of an accept into it, a shutdown
// or an install the submission queue refuses, an install whose wait gives
// up. Driven without a kernel: a stand-in ring records what is prepared
// and completes installs inline, as the kernel does.

// fakeFixedRing is fakeRing with the fixed file table's operations. Its
// Submit completes the installs submitted (with installFd, or not at all
// when it is 0), which Reap then hands out; the test hands every other
// completion to the driver itself.
type fakeFixedRing struct {
	*fakeRing
	installFd int32
	submitted int // entries of prepared the stand-in kernel has seen
	cq        []ring.Completion
	singles   int // single accepts into the table prepared
}

func (f *fakeFixedRing) FixedFile() {}
func (f *fakeFixedRing) PrepareAcceptMultishotDirect(_ int, ud uint64) error {
	return f.prep(ud)
}
func (f *fakeFixedRing) PrepareAcceptDirect(_ int, ud uint64) error {
	err := f.prep(ud)
	if err == nil {
		f.singles++
	}
	return err
}
func (f *fakeFixedRing) PrepareCloseDirect(_ int, ud uint64) error    { return f.prep(ud) }
func (f *fakeFixedRing) PrepareFixedFdInstall(_ int, ud uint64) error { return f.prep(ud) }

func (f *fakeFixedRing) Submit() error {
	for _, ud := range f.prepared[f.submitted:] {
		if uint8(ud>>56) == kindInstall && f.installFd != 0 {
			f.cq = append(f.cq, ring.Completion{UserData: ud, Res: f.installFd})
		}
	}
	f.submitted = len(f.prepared)
	return nil
}
func (f *fakeFixedRing) SubmitAndWait(time.Duration) error { return f.Submit() }
func (f *fakeFixedRing) Reap(dst []ring.Completion) int {
	n := copy(dst, f.cq)
	f.cq = f.cq[n:]
	return n
}
func (f *fakeFixedRing) Ready() int { return len(f.cq) }

// fixedTestLoop is a loop on an io_uring driver over fakeFixedRing, with
// a table of slots and that margin, its listener (descriptor lnfd)
// accepting into it.
func fixedTestLoop(t *testing.T, cfg Config, slots, margin, lnfd int) (*Loop, *uringDriver, *fakeFixedRing, *fakeClock) {
	t.Helper()
	cfg.BufferCount, cfg.BufferSize = 8, 16
	cfg.fixedMargin = &margin
	l, _, clock := newTestLoop(t, cfg, HandlerFunc(func(*Conn, []byte) {}))
	fr := &fakeFixedRing{fakeRing: &fakeRing{}}
	fb := &fakeBufs{}
	for range 8 {
		fb.mem = append(fb.mem, make([]byte, 16))
	}
	d := newUringDriverOn(l, l.env(), fr, fb, sys.NewWaker(sys.Eventfd(-1)), 8)
	l.d = d
	d.fx.r, d.fx.size = fr, slots
	l.lns[0].fd = lnfd
	if err := d.listen(0, lnfd); err != nil {
		t.Fatal(err)
	}
	if !d.lns[0].fixed || fr.count(kindAccept) != 1 {
		t.Fatalf("the listener accepts into the table %v, %d accepts armed", d.lns[0].fixed, fr.count(kindAccept))
	}
	return l, d, fr, clock
}

// acceptInto completes the listener's accept with the slot, more to come
// or not, and returns the connection opened on it.
func acceptInto(t *testing.T, l *Loop, d *uringDriver, slot int32, more bool) *Conn {
	t.Helper()
	e := ring.Completion{UserData: userData(kindAccept, 0, 0), Res: slot}
	if more {
		e.Flags = cqeMore
	}
	open := l.open
	d.complete(&e)
	if l.open != open+1 {
		t.Fatalf("accept into slot %d opened no connection", slot)
	}
	for _, c := range l.conns {
		if c != nil && c.ur.fixed == uint32(slot)+1 && !c.closed() {
			return c
		}
	}
	t.Fatalf("no connection on slot %d", slot)
	return nil
}

// An -ENFILE while the count says slots are free is the system's file
// limit (the kernel allocates a file for each socket before it looks for
// a slot, and a failure there leaves the connection in the backlog): it
// goes to the accept-failure policy of decision 0008 (a back-off that
// re-arms, counted; or, with none waiting, a poll first), not to the
// table-full state that waits for a close, which with idle connections
// open may never come. An -ENFILE with every slot in use is the table's:
// no accept until a slot's close.
func TestDirectDescriptorsSystemFileLimit(t *testing.T) {
	for _, waiting := range []bool{true, false} {
		l, d, fr, clock := fixedTestLoop(t, Config{}, 8, 2, 3)
		l.accept.waiting = func(int) bool { return waiting }
		acceptInto(t, l, d, 0, true) // one idle connection stays open
		d.complete(&ring.Completion{UserData: userData(kindAccept, 0, 0), Res: -int32(unix.ENFILE)})
		if d.fx.full || d.fx.starved {
			t.Fatalf("waiting %v: one slot of 8 in use, the system's -ENFILE taken for a full table", waiting)
		}
		if l.cnt[sAcceptErrors] != uint64(b2i(waiting)) {
			t.Fatalf("waiting %v: %d accept errors counted", waiting, l.cnt[sAcceptErrors])
		}
		accepts, polls := fr.count(kindAccept), fr.count(kindAcceptPoll)
		if waiting {
			if l.accept.holds&holdBackoff == 0 || accepts != 1 {
				t.Fatalf("no back-off: holds %#x, %d accepts armed", l.accept.holds, accepts)
			}
			tick(l, clock, acceptBackoffMin)
		} else {
			if polls != 1 {
				t.Fatalf("none waiting: %d polls armed, want one", polls)
			}
			d.complete(&ring.Completion{UserData: userData(kindAcceptPoll, 0, 0), Res: int32(unix.POLLIN)})
		}
		if got := fr.count(kindAccept); got != accepts+1 || d.lns[0].acceptOp != kindAccept {
			t.Fatalf("waiting %v: %d accepts armed after the back-off or the poll, want %d", waiting, got, accepts+1)
		}
		acceptInto(t, l, d, 1, true)
	}

	// The table's own -ENFILE: every slot in use. No accept until a slot
	// closes, however long the back-off would have been.
	l, d, fr, clock := fixedTestLoop(t, Config{}, 4, -1, 3)
	l.accept.waiting = func(int) bool { return true }
	var cs []*Conn
	for slot := range int32(4) {
		cs = append(cs, acceptInto(t, l, d, slot, true))
	}
	d.complete(&ring.Completion{UserData: userData(kindAccept, 0, 0), Res: -int32(unix.ENFILE)})
	if !d.fx.full || l.cnt[sAcceptErrors] != 1 || l.accept.holds != 0 {
		t.Fatalf("a full table's -ENFILE: full %v, %d errors, holds %#x", d.fx.full, l.cnt[sAcceptErrors], l.accept.holds)
	}
	accepts := fr.count(kindAccept)
	tick(l, clock, time.Second)
	if fr.count(kindAccept) != accepts {
		t.Fatal("an accept armed into a full table")
	}
	cs[2].Abort()
	d.complete(&ring.Completion{UserData: userData(kindCloseSlot, cs[2].slot, cs[2].gen)})
	if fr.count(kindAccept) != accepts+1 {
		t.Fatalf("no accept armed after a slot's close: %d", fr.count(kindAccept))
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitingListener is a loopback listener with a connection in its
// backlog, and its descriptor.
func waitingListener(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := unix.SetNonblock(int(f.Fd()), true); err != nil {
		t.Fatal(err)
	}
	return int(f.Fd())
}

// An accept into the table that a cancel ends, the hold's (pauseAccept)
// or the margin's (acceptedFixed), takes nothing past it: the listener is
// the loop's own, so what waits in its backlog is taken by the next
// accept armed into the table. It used to be accept4'd onto a descriptor
// (acceptCancelledWaiting, which exists for shared listeners): a
// connection off the table, past the hold.
func TestDirectDescriptorsCancelledAcceptTakesNone(t *testing.T) {
	t.Run("hold", func(t *testing.T) {
		lnfd := waitingListener(t)
		l, d, fr, clock := fixedTestLoop(t, Config{}, 8, 2, lnfd)
		l.accept.waiting = func(int) bool { return true }
		l.hold(holdBackoff)
		l.AfterFunc(acceptBackoffMin, func() { l.unhold(holdBackoff) })
		if fr.count(kindAcceptCancel) != 1 || d.loopOps != 2 {
			t.Fatalf("the hold: %d cancels, %d loop ops", fr.count(kindAcceptCancel), d.loopOps)
		}
		d.complete(&ring.Completion{UserData: userData(kindAccept, 0, 0), Res: -int32(unix.ECANCELED)})
		d.complete(&ring.Completion{UserData: userData(kindAcceptCancel, 0, 0), Res: 1})
		if l.open != 0 {
			t.Fatalf("the cancelled accept opened %d connections past the hold", l.open)
		}
		if d.loopOps != 0 || d.lns[0].acceptOp != 0 || d.fx.armed != 0 {
			t.Fatalf("after the cancel: %d loop ops, accept op %d, %d slots claimed", d.loopOps, d.lns[0].acceptOp, d.fx.armed)
		}
		if !sys.Readable(lnfd) {
			t.Fatal("the waiting connection left the backlog")
		}
		accepts := fr.count(kindAccept)
		tick(l, clock, acceptBackoffMin)
		if fr.count(kindAccept) != accepts+1 || d.lns[0].acceptOp != kindAccept || d.loopOps != 1 {
			t.Fatalf("after the hold: %d accepts armed (want %d), %d loop ops", fr.count(kindAccept), accepts+1, d.loopOps)
		}
	})
	t.Run("margin", func(t *testing.T) {
		lnfd := waitingListener(t)
		l, d, fr, _ := fixedTestLoop(t, Config{}, 8, 2, lnfd)
		for slot := range int32(6) {
			acceptInto(t, l, d, slot, true)
		}
		if fr.count(kindAcceptCancel) != 1 || d.lns[0].multishot {
			t.Fatalf("at the margin: %d cancels, multishot %v", fr.count(kindAcceptCancel), d.lns[0].multishot)
		}
		d.complete(&ring.Completion{UserData: userData(kindAccept, 0, 0), Res: -int32(unix.ECANCELED)})
		d.complete(&ring.Completion{UserData: userData(kindAcceptCancel, 0, 0), Res: 1})
		if l.open != 6 || fr.singles != 1 || d.loopOps != 1 || d.fx.armed != 1 {
			t.Fatalf("after the margin's cancel: %d open (want 6), %d single accepts, %d loop ops, %d claimed",
				l.open, fr.singles, d.loopOps, d.fx.armed)
		}
	})
}

// A slot's shutdown that the submission queue refuses is retried next
// turn, as a release is, and the connection stays open: it used to be
// closed with the error. Its slot's close waits for it meanwhile; a
// connection aborted meanwhile closes without it.
func TestDirectDescriptorsShutdownRetried(t *testing.T) {
	for _, abort := range []bool{false, true} {
		l, d, fr, _ := fixedTestLoop(t, Config{}, 8, 2, 3)
		c := acceptInto(t, l, d, 0, true)
		refusals := 2
		fr.full = func(k uint8) bool {
			if k != kindShutdown || refusals == 0 {
				return false
			}
			refusals--
			return true
		}
		if err := c.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if c.closed() || len(d.retry) != 1 {
			t.Fatalf("a refused shutdown: closed %v, %d to retry", c.closed(), len(d.retry))
		}
		if abort {
			c.Abort()
			if fr.count(kindCloseSlot) != 0 || SlotFreed(c) {
				t.Fatalf("aborted with its shutdown to retry: %d slot closes, slot freed %v", fr.count(kindCloseSlot), SlotFreed(c))
			}
			if err := turn(d, 0); err != nil {
				t.Fatal(err)
			}
			if len(d.retry) != 0 || fr.count(kindShutdown) != 0 || fr.count(kindCloseSlot) != 1 {
				t.Fatalf("aborted: %d to retry, %d shutdowns, %d slot closes; want 0, 0, 1",
					len(d.retry), fr.count(kindShutdown), fr.count(kindCloseSlot))
			}
			for _, k := range []uint8{kindCancel, kindCloseSlot} {
				if SlotFreed(c) {
					t.Fatalf("slot freed before the completion of kind %d", k)
				}
				d.complete(&ring.Completion{UserData: userData(k, c.slot, c.gen)})
			}
			d.complete(&ring.Completion{UserData: userData(kindRecv, c.slot, c.gen), Res: -int32(unix.ECANCELED)})
			if !SlotFreed(c) || d.fx.used != 0 {
				t.Fatalf("after its completions: slot freed %v, %d slots used", SlotFreed(c), d.fx.used)
			}
			continue
		}
		for n := 0; refusals > 0; n++ {
			if c.closed() || len(d.retry) != 1 || fr.count(kindShutdown) != 0 {
				t.Fatalf("turn %d: closed %v, %d to retry, %d shutdowns", n, c.closed(), len(d.retry), fr.count(kindShutdown))
			}
			if err := turn(d, 0); err != nil {
				t.Fatal(err)
			}
		}
		if err := turn(d, 0); err != nil { // the turn after the last refusal
			t.Fatal(err)
		}
		if c.closed() || len(d.retry) != 0 || fr.count(kindShutdown) != 1 {
			t.Fatalf("after the refusals: closed %v, %d to retry, %d shutdowns; want open, 0, 1",
				c.closed(), len(d.retry), fr.count(kindShutdown))
		}
		// A close while the shutdown is in flight waits for it.
		c.Abort()
		if fr.count(kindCloseSlot) != 0 {
			t.Fatal("the slot's close was queued under its shutdown")
		}
		d.complete(&ring.Completion{UserData: userData(kindShutdown, c.slot, c.gen)})
		if fr.count(kindCloseSlot) != 1 {
			t.Fatalf("%d slot closes after the shutdown completed", fr.count(kindCloseSlot))
		}
	}
}

// An install is prepared once the queue has room: a refusal (a kernel that
// takes no entries until completions are reaped) reaps and tries again
// within the install's wait, rather than fail Conn.Fd. One whose wait gives
// up stays counted among the loop's operations until its completion
// closes the descriptor it made: the loop does not exit with it in flight.
func TestDirectDescriptorsInstall(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		l, d, fr, _ := fixedTestLoop(t, Config{}, 8, 2, 3)
		c := acceptInto(t, l, d, 0, true)
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fr.installFd = int32(fd)
		refusals := 2
		fr.full = func(k uint8) bool {
			if k != kindInstall || refusals == 0 {
				return false
			}
			refusals--
			return true
		}
		if got := c.Fd(); got != fd {
			unix.Close(fd)
			t.Fatalf("Conn.Fd after two refusals: %d, want %d", got, fd)
		}
		c.Abort()
		if fr.count(kindClose) != 1 {
			t.Fatalf("%d closes of the installed descriptor queued", fr.count(kindClose))
		}
		unix.Close(fd)
	})
	t.Run("late", func(t *testing.T) {
		l, d, fr, _ := fixedTestLoop(t, Config{}, 8, 2, 3)
		c := acceptInto(t, l, d, 0, true)
		d.fx.wait = time.Millisecond
		if got := c.Fd(); got != -1 {
			t.Fatalf("Conn.Fd without an install's completion: %d", got)
		}
		if d.loopOps != 2 { // the accept, and the install in flight
			t.Fatalf("%d loop operations after an install gave up, want 2", d.loopOps)
		}
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ud uint64
		for _, u := range fr.prepared {
			if uint8(u>>56) == kindInstall {
				ud = u
			}
		}
		d.complete(&ring.Completion{UserData: ud, Res: int32(fd)})
		if d.loopOps != 1 {
			t.Fatalf("%d loop operations after the late install completed, want 1", d.loopOps)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != unix.EBADF {
			unix.Close(fd)
			t.Fatalf("the late install's descriptor is still open (%v)", err)
		}
	})
}
