package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// The io_uring driver's accounting of deferred receives (the turn budget,
// the provided buffers they hold, copies once a quarter is held, receives
// parked while reading is paused), driven without a kernel: a stand-in
// ring records what is prepared and a stand-in buffer set hands out bytes.

// fakeRing records what is prepared. full, when set, makes the preparation
// of entries of the kinds it returns true for fail, as a submission queue
// that the kernel takes nothing from does.
type fakeRing struct {
	prepared []uint64
	full     func(kind uint8) bool
}

var errFakeQueueFull = errors.New("submission queue full (stand-in)")

func (f *fakeRing) prep(ud uint64) error {
	if f.full != nil && f.full(uint8(ud>>56)) {
		return errFakeQueueFull
	}
	f.prepared = append(f.prepared, ud)
	return nil
}

func (f *fakeRing) PrepareAccept(_ int, ud uint64) error          { return f.prep(ud) }
func (f *fakeRing) PrepareAcceptMultishot(_ int, ud uint64) error { return f.prep(ud) }
func (f *fakeRing) PrepareCancel(_, ud uint64) error              { return f.prep(ud) }
func (f *fakeRing) PrepareClose(_ int, ud uint64) error           { return f.prep(ud) }
func (f *fakeRing) PrepareConnect(_ int, _ unsafe.Pointer, _ uint32, ud uint64) error {
	return f.prep(ud)
}
func (f *fakeRing) PrepareMsgRing(_ int, _ uint32, _, ud uint64) error           { return f.prep(ud) }
func (f *fakeRing) PreparePollIn(_ int, ud uint64) error                         { return f.prep(ud) }
func (f *fakeRing) PrepareRead(_ int, _ []byte, _ uint64, ud uint64) error       { return f.prep(ud) }
func (f *fakeRing) PrepareRecvMultishot(_ int, _ *ring.BufRing, ud uint64) error { return f.prep(ud) }
func (f *fakeRing) PrepareRecvMultishotBundle(_ int, _ *ring.BufRing, ud uint64) error {
	return f.prep(ud)
}
func (f *fakeRing) PrepareRecvSelect(_ int, _ *ring.BufRing, ud uint64) error { return f.prep(ud) }
func (f *fakeRing) PrepareSend(_ int, _ []byte, ud uint64) error              { return f.prep(ud) }
func (f *fakeRing) PrepareSendNoWait(_ int, _ []byte, ud uint64) error        { return f.prep(ud) }
func (f *fakeRing) SkipSuccess()                                              {}
func (f *fakeRing) PrepareSendmsg(_ int, _ *unix.Msghdr, ud uint64) error     { return f.prep(ud) }
func (f *fakeRing) PrepareRecvmsgMultishot(_ int, _ *unix.Msghdr, _ uint32, _ *ring.BufRing, ud uint64) error {
	return f.prep(ud)
}
func (f *fakeRing) PrepareShutdown(_, _ int, ud uint64) error { return f.prep(ud) }
func (f *fakeRing) Submit() error                             { return nil }
func (f *fakeRing) SubmitAndWait(time.Duration) error         { return nil }
func (f *fakeRing) Reap([]ring.Completion) int                { return 0 }
func (f *fakeRing) Ready() int                                { return 0 }
func (f *fakeRing) Pending() uint32                           { return 0 }
func (f *fakeRing) Overflowed() bool                          { return false }
func (f *fakeRing) Enters() uint64                            { return 0 }
func (f *fakeRing) Fd() int                                   { return -1 }
func (f *fakeRing) Close() error                              { return nil }

// prepared returns how many entries of kind were prepared.
func (f *fakeRing) count(kind uint8) int {
	n := 0
	for _, ud := range f.prepared {
		if uint8(ud>>56) == kind {
			n++
		}
	}
	return n
}

type fakeBufs struct {
	mem       [][]byte
	recycled  []uint16
	published int
}

func (b *fakeBufs) Bytes(id uint16, n int) []byte { return b.mem[id][:n] }
func (b *fakeBufs) Recycle(id uint16)             { b.recycled = append(b.recycled, id) }
func (b *fakeBufs) Publish()                      { b.published++ }
func (b *fakeBufs) Size() int                     { return len(b.mem[0]) }
func (b *fakeBufs) Discard() error                { return nil }
func (b *fakeBufs) Close() error                  { return nil }

// collector is a handler that keeps every payload it gets.
type collector struct{ got *[]string }

func (h collector) OnData(_ *Conn, data []byte) { *h.got = append(*h.got, string(data)) }

// uringTestLoop is a loop on an io_uring driver over the stand-ins, with
// one open connection: 8 buffers of 16 bytes (so 2 may be held) and a turn
// budget of 32 bytes.
func uringTestLoop(t *testing.T) (*Loop, *uringDriver, *fakeRing, *fakeBufs, *Conn, *[]string) {
	t.Helper()
	var got []string
	l, _, _ := newTestLoop(t, Config{BufferCount: 8, BufferSize: 16, TurnBudget: 32}, collector{&got})
	fr, fb := &fakeRing{}, &fakeBufs{}
	for range 8 {
		fb.mem = append(fb.mem, make([]byte, 16))
	}
	d := newUringDriverOn(l, l.env(), fr, fb, sys.NewWaker(sys.Eventfd(-1)), 8)
	l.d = d
	l.acceptResult(fakeFd, 0, 0)
	c := l.conns[0]
	if c.ur.flags&ufRecvArmed == 0 || fr.count(kindRecv) != 1 {
		t.Fatalf("the connection's receive is not armed: flags %#x", c.ur.flags)
	}
	return l, d, fr, fb, c, &got
}

// recv hands d a multishot receive completion for c: payload in buffer id.
func recv(d *uringDriver, fb *fakeBufs, c *Conn, id uint16, payload string) {
	copy(fb.mem[id], payload)
	const bufferFlag, moreFlag = 1, 2
	e := ring.Completion{UserData: userData(kindRecv, c.slot, c.gen), Res: int32(len(payload)),
		Flags: uint32(id)<<16 | bufferFlag | moreFlag}
	d.complete(&e)
}

// nextTurn starts a loop turn and delivers what earlier turns deferred.
func nextTurn(l *Loop, d *uringDriver) {
	l.cnt[sTurns]++
	d.deliverDeferred()
}

func payload(i int) string { return fmt.Sprintf("message %02d......", i)[:16] }

func TestDeferredReceivesUnderTheBudget(t *testing.T) {
	l, d, fr, fb, c, got := uringTestLoop(t)
	for i := range 5 {
		recv(d, fb, c, uint16(i), payload(i))
	}
	// 32 bytes per turn: two delivered; the third goes over and stops the
	// receive (one cancel); two provided buffers held, then a copy.
	if len(*got) != 2 {
		t.Fatalf("%d payloads delivered in the first turn, want 2", len(*got))
	}
	if d.waitingBufs != 2 || held(c) != 3 || len(d.deferred) != 1 {
		t.Fatalf("held %d buffers, %d receives (%d connections listed); want 2, 3, 1", d.waitingBufs, held(c), len(d.deferred))
	}
	if n := fr.count(kindCancel); n != 1 || c.ur.flags&(ufRecvStopped|ufThrottled) != ufRecvStopped|ufThrottled {
		t.Fatalf("%d cancels, flags %#x; want one cancel, budget held and throttled", n, c.ur.flags)
	}
	if !slices.Equal(fb.recycled, []uint16{0, 1, 4}) {
		t.Fatalf("recycled %v, want the two delivered and the copied one", fb.recycled)
	}
	if !c.ur.held()[2].copied {
		t.Fatal("the receive past the held quarter was not copied out")
	}

	nextTurn(l, d) // two more, then the budget again
	if len(*got) != 4 || d.waitingBufs != 0 || held(c) != 1 {
		t.Fatalf("second turn: %d delivered, %d held, %d deferred; want 4, 0, 1", len(*got), d.waitingBufs, held(c))
	}
	nextTurn(l, d)
	if len(*got) != 5 || held(c) != 0 || c.ur.flags&ufRecvStopped != 0 {
		t.Fatalf("third turn: %d delivered, %d deferred, flags %#x", len(*got), held(c), c.ur.flags)
	}
	if !slices.Contains(d.rearm, c) {
		t.Error("the connection was not listed to receive again")
	}
	if c.ur.waits != nil || len(d.spareWaits) != 1 {
		t.Errorf("all delivered: waits %p, %d spare; want none held and one spare (decision 0072)", c.ur.waits, len(d.spareWaits))
	}
	for i, p := range *got {
		if p != payload(i) {
			t.Fatalf("payload %d is %q, want %q: out of order", i, p, payload(i))
		}
	}
	if l.cnt[sDeferrals] != 3 {
		t.Errorf("%d deferrals counted, want 3", l.cnt[sDeferrals])
	}
}

func TestReceivesParkWhilePaused(t *testing.T) {
	l, d, fr, fb, c, got := uringTestLoop(t)
	c.PauseRead()
	if fr.count(kindCancel) != 1 {
		t.Fatal("pausing did not cancel the receive")
	}
	// Completions already on their way when the cancel was queued.
	recv(d, fb, c, 0, payload(0))
	recv(d, fb, c, 1, payload(1))
	if len(*got) != 0 {
		t.Fatalf("%d payloads delivered while paused", len(*got))
	}
	if len(d.deferred) != 0 || held(c) != 2 {
		t.Fatalf("%d listed for the next turn (it would spin), %d held; want 0 and 2", len(d.deferred), held(c))
	}
	nextTurn(l, d)
	if len(*got) != 0 {
		t.Fatal("a turn delivered parked receives")
	}
	c.ResumeRead()
	nextTurn(l, d)
	if !slices.Equal(*got, []string{payload(0), payload(1)}) {
		t.Fatalf("after resume: %q", *got)
	}
}

func TestClosingAPausedConnectionGivesItsBuffersBack(t *testing.T) {
	_, d, fr, fb, c, _ := uringTestLoop(t)
	c.PauseRead()
	recv(d, fb, c, 3, payload(3))
	recv(d, fb, c, 5, payload(5))
	c.Abort()
	if d.waitingBufs != 0 || held(c) != 0 {
		t.Fatalf("after the close: %d buffers held, %d receives", d.waitingBufs, held(c))
	}
	if !slices.Equal(fb.recycled, []uint16{3, 5}) {
		t.Fatalf("recycled %v, want the parked buffers", fb.recycled)
	}
	// The pause's cancel covers the receive: the release queues none of
	// its own for it, and one close.
	if n, m := fr.count(kindCancel), fr.count(kindClose); n != 1 || m != 1 {
		t.Fatalf("%d cancels, %d closes; want 1 and 1", n, m)
	}
}

// TestDeferredAndPausedReceivesStayInOrder: a receive held back by the
// budget, then a pause from outside the connection's callbacks (a proxy
// pausing a client), then a receive that arrives while paused: after the
// resume they are delivered in arrival order. (They used to come out 0, 1,
// 3, 2: the held receive went behind the one that arrived while paused.)
func TestDeferredAndPausedReceivesStayInOrder(t *testing.T) {
	l, d, _, fb, c, got := uringTestLoop(t)
	for i := range 3 {
		recv(d, fb, c, uint16(i), payload(i)) // the third goes over the budget
	}
	c.PauseRead()
	recv(d, fb, c, 3, payload(3))
	nextTurn(l, d)
	if len(*got) != 2 {
		t.Fatalf("%d payloads delivered while paused, want the 2 before the pause", len(*got))
	}
	c.ResumeRead()
	nextTurn(l, d)
	nextTurn(l, d)
	want := []string{payload(0), payload(1), payload(2), payload(3)}
	if !slices.Equal(*got, want) {
		t.Fatalf("delivered %q, want %q", *got, want)
	}
}

// TestReceiveAfterAbortIsGivenBack: a receive that completes after the
// connection was paused and then aborted (the cancel was on its way) is
// given back at once, not held for a connection that will never read it.
func TestReceiveAfterAbortIsGivenBack(t *testing.T) {
	l, d, _, fb, c, got := uringTestLoop(t)
	c.PauseRead()
	c.Abort()
	recv(d, fb, c, 6, payload(6))
	nextTurn(l, d)
	if len(*got) != 0 {
		t.Fatalf("a closed connection got %q", *got)
	}
	if d.waitingBufs != 0 || !slices.Equal(fb.recycled, []uint16{6}) {
		t.Fatalf("after the close: %d buffers held, recycled %v; want 0 and [6]", d.waitingBufs, fb.recycled)
	}
	// The kernel finishes what it held: the receive's last completion, the
	// cancel and the close. Then nothing is left that could be filling a
	// buffer, and the pages can go.
	for _, kind := range []uint8{kindRecv, kindCancel, kindClose} {
		e := ring.Completion{UserData: userData(kind, c.slot, c.gen)}
		if kind == kindRecv {
			e.Res = -int32(unix.ECANCELED)
		}
		d.complete(&e)
	}
	if !d.discardBuffers() {
		t.Fatal("the buffers' pages cannot be given back")
	}
}

// TestExitWithReceivesInFlightKeepsTheirBuffers: a loop that exits with a
// receive still in the kernel (it gave up on its kernel after
// maxKernelErrors) closes its ring and leaves the buffers the kernel may
// still fill mapped; one that exits idle closes the ring, then unmaps
// them. The buffers used to be unmapped first, while the ring that writes
// into them was still open.
func TestExitWithReceivesInFlightKeepsTheirBuffers(t *testing.T) {
	for _, busy := range []bool{true, false} {
		k := newSimKernel()
		l, r, d := k.newLoop(0, Config{}, HandlerFunc(func(*Conn, []byte) {}))
		l.lns = []*loopListener{{info: &Listener{Network: "tcp"}, fd: simListenFd}}
		l.streams = 1
		if busy {
			l.acceptResult(simConnFd, 0, 0)
			if err := r.Submit(); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.close(); err != nil {
			t.Fatal(err)
		}
		if len(k.faults) > 0 {
			t.Fatalf("busy %v: %s", busy, strings.Join(k.faults, "; "))
		}
		if !r.closed || r.bufs.closed == busy {
			t.Errorf("busy %v: ring closed %v, buffers unmapped %v", busy, r.closed, r.bufs.closed)
		}
	}
}

// TestReleaseRetriesAFullQueue: a connection whose cancels or close cannot
// be queued is released in a later turn; it neither stays armed for good
// (the loop would never exit) nor gives its descriptor or slot up early
// (an entry still queued for it would reach whatever socket took the
// number).
func TestReleaseRetriesAFullQueue(t *testing.T) {
	for name, kind := range map[string]uint8{"cancel": kindCancel, "close": kindClose} {
		t.Run(name, func(t *testing.T) {
			_, d, fr, _, c, _ := uringTestLoop(t)
			failures := 3
			fr.full = func(k uint8) bool {
				if k != kind || failures == 0 {
					return false
				}
				failures--
				return true
			}
			c.Abort()
			for n := 0; failures > 0; n++ {
				if c.fd < 0 || SlotFreed(c) || len(d.retry) != 1 {
					t.Fatalf("turn %d, %d failures left: fd %d, slot freed %v, %d to retry; want the descriptor and slot kept, c listed",
						n, failures, c.fd, SlotFreed(c), len(d.retry))
				}
				if err := turn(d, 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := turn(d, 0); err != nil { // the turn after the last refusal
				t.Fatal(err)
			}
			if c.fd >= 0 || len(d.retry) != 0 || fr.count(kindClose) != 1 {
				t.Fatalf("after the queue took entries again: fd %d, %d to retry, %d closes queued; want -1, 0, 1",
					c.fd, len(d.retry), fr.count(kindClose))
			}
			// The kernel finishes what it holds: then, and only then, the
			// slot is free.
			for _, k := range []uint8{kindRecv, kindCancel, kindClose} {
				if SlotFreed(c) {
					t.Fatalf("slot freed before the completion of kind %d", k)
				}
				e := ring.Completion{UserData: userData(k, c.slot, c.gen)}
				if k == kindRecv {
					e.Res = -int32(unix.ECANCELED)
				}
				d.complete(&e)
			}
			if !SlotFreed(c) || !d.idle() {
				t.Fatalf("slot freed %v, driver idle %v; want both", SlotFreed(c), d.idle())
			}
		})
	}
}

// TestRecvWaitsGivenBack checks that a connection holds a queue of waiting
// receives only while one waits (decision 0072): the next deferral takes
// the spare back (one queue for every cycle of deferral and delivery),
// and a close gives it back with what it holds.
func TestRecvWaitsGivenBack(t *testing.T) {
	l, d, _, fb, c, got := uringTestLoop(t)
	cycle := func() {
		for i := range 3 {
			recv(d, fb, c, uint16(i), payload(i))
		}
		nextTurn(l, d)
		nextTurn(l, d)
		d.rearm = d.rearm[:0]
		*got = (*got)[:0]
	}
	cycle()
	if c.ur.waits != nil || len(d.spareWaits) != 1 {
		t.Fatalf("delivered: waits %p, %d spare; want none held and one spare", c.ur.waits, len(d.spareWaits))
	}
	spare := d.spareWaits[0]
	for i := range 3 {
		recv(d, fb, c, uint16(i), payload(i))
	}
	if c.ur.waits != spare || len(d.spareWaits) != 0 {
		t.Fatalf("deferred: waits %p (%d spare); want the spare %p", c.ur.waits, len(d.spareWaits), spare)
	}
	nextTurn(l, d)
	nextTurn(l, d)
	d.rearm = d.rearm[:0]
	*got = (*got)[:0]
	for range 10 {
		cycle()
		if len(d.spareWaits) != 1 || d.spareWaits[0] != spare {
			t.Fatalf("after a cycle: %d spare; want the one queue reused", len(d.spareWaits))
		}
	}

	for i := range 3 {
		recv(d, fb, c, uint16(i), payload(i))
	}
	d.dropWaiting(c) // what a close does with them
	if c.ur.waits != nil || len(d.spareWaits) != 1 || d.waitingBufs != 0 {
		t.Fatalf("dropped: waits %p, %d spare, %d buffers held; want none, one, none", c.ur.waits, len(d.spareWaits), d.waitingBufs)
	}
}
