package runtime

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/poller"
	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// Each driver driven by a stand-in loop: the loopSide of driver.go
// implemented by a recorder, with no *Loop behind it. What a driver may
// call on its loop is exactly the interface, so these tests see the whole
// of what it reports, in order: the contract in both directions, checked
// for one connection's path (open, receive, write, send, close, the slot
// freed once the kernel holds nothing of it) on each backend.

// standInLoop is a loopSide that records the driver's calls and keeps the
// little state they need: the connections by slot and their queues.
type standInLoop struct {
	cfg   Config
	cnt   [numStats]uint64
	conns map[uint32]*Conn
	calls []string
	freed map[*Conn]int
}

func newStandInLoop(cfg Config) *standInLoop {
	cfg.Logger = slog.New(slog.DiscardHandler)
	return &standInLoop{cfg: cfg.withDefaults(), conns: map[uint32]*Conn{}, freed: map[*Conn]int{}}
}

func (s *standInLoop) env() driverEnv {
	return driverEnv{cfg: &s.cfg, cnt: &s.cnt, log: s.cfg.Logger, id: 0}
}

func (s *standInLoop) record(format string, args ...any) {
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
}

// open puts a connection in slot with descriptor fd, as the loop's
// accepted does before the driver's start.
func (s *standInLoop) open(slot uint32, fd int) *Conn {
	c := &Conn{slot: slot, gen: 1, fd: int32(fd)}
	s.conns[slot] = c
	return c
}

// take returns the calls recorded since the last take.
func (s *standInLoop) take() []string {
	c := s.calls
	s.calls = nil
	return c
}

func (s *standInLoop) runPosted()                             { s.record("runPosted") }
func (s *standInLoop) beginPass()                             {}
func (s *standInLoop) endPass()                               {}
func (s *standInLoop) AfterFunc(time.Duration, func()) *Timer { s.record("AfterFunc"); return nil }
func (s *standInLoop) accepting() bool                        { return true }
func (s *standInLoop) stopForced() bool                       { return false }
func (s *standInLoop) ownPlainListener(int) bool              { return false }

func (s *standInLoop) acceptResult(fd int, errno unix.Errno, ln int) acceptOutcome {
	s.record("acceptResult %d %v %d", fd, errno, ln)
	return acceptNext
}

func (s *standInLoop) conn(slot, gen uint32) *Conn {
	if c := s.conns[slot]; c != nil && c.gen == gen {
		return c
	}
	return nil
}

func (s *standInLoop) readResult(c *Conn, data []byte, n int, call string) {
	if n > 0 {
		s.record("readResult %d %q", c.slot, data[:n])
		return
	}
	s.record("readResult %d %d", c.slot, n)
}

func (s *standInLoop) queue(c *Conn, p []byte) {
	if c.out == nil {
		c.out = new(outQueue)
	}
	c.out.next = append(c.out.next, p...)
}

func (s *standInLoop) sendResult(c *Conn, n int, err error) bool {
	s.record("sendResult %d %d %v", c.slot, n, err)
	if err != nil {
		return false
	}
	q := c.out
	q.sent += n
	if q.sent >= len(q.sending) {
		q.sending, q.sent = nil, 0
	}
	return q.buffered() > 0
}

func (s *standInLoop) sendAwaited(c *Conn) bool     { return false }
func (s *standInLoop) wroteDirect(n int)            { s.record("wroteDirect %d", n) }
func (s *standInLoop) connected(c *Conn, err error) { s.record("connected %d %v", c.slot, err) }
func (s *standInLoop) fail(c *Conn, op string, err error) {
	s.record("fail %d %s %v", c.slot, op, err)
}

func (s *standInLoop) freeSlot(c *Conn) {
	s.record("freeSlot %d", c.slot)
	s.freed[c]++
	delete(s.conns, c.slot)
}

func (s *standInLoop) slotsInUse() bool    { return len(s.conns) > 0 }
func (s *standInLoop) getBuf(n int) []byte { return make([]byte, 0, n) }
func (s *standInLoop) putBuf([]byte)       {}
func (s *standInLoop) packetIn(*PacketConn, []byte, int, bool, netip.AddrPort, []byte) {
	s.record("packetIn")
}
func (s *standInLoop) packetRecvFailed() { s.record("packetRecvFailed") }
func (s *standInLoop) packetSent(n, count int, err error) {
	s.record("packetSent %d %d %v", n, count, err)
}
func (s *standInLoop) gsoRefused(*PacketConn, unix.Errno) { s.record("gsoRefused") }
func (s *standInLoop) gsoPending() int                    { return 0 }
func (s *standInLoop) listenersClosed() bool              { return false }
func (s *standInLoop) fileOpAt(uint32, uint32) *fileOp    { return nil }
func (s *standInLoop) fileResult(*fileOp, int32, bool)    { s.record("fileResult") }
func (s *standInLoop) offload(*fileOp)                    { s.record("offload") }
func (s *standInLoop) inlineDone(*fileOp)                 { s.record("inlineDone") }
func (s *standInLoop) filesBusy() bool                    { return false }
func (s *standInLoop) fileSent(*Conn, int, error) bool    { s.record("fileSent"); return false }
func (s *standInLoop) deadFileSendDone(*Conn)             { s.record("deadFileSendDone") }
func (s *standInLoop) pipes() *pipePool                   { return nil }
func (s *standInLoop) rewake(id uint32)                   { s.record("rewake %d", id) }

var _ loopSide = (*standInLoop)(nil)

// turn runs a driver's part of a loop turn: its wait, then its dispatch.
func turn(d driver, timeout time.Duration) error {
	if err := d.enter(timeout); err != nil {
		return err
	}
	d.dispatch()
	return nil
}

func wantCalls(t *testing.T, step string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: the driver called\n\t%q\nwant\n\t%q", step, got, want)
	}
}

func TestUringDriverOnAStandInLoop(t *testing.T) {
	s := newStandInLoop(Config{})
	fr, fb := &fakeRing{}, &fakeBufs{}
	for range 4 {
		fb.mem = append(fb.mem, make([]byte, 16))
	}
	d := newUringDriverOn(s, s.env(), fr, fb, sys.NewWaker(sys.Eventfd(-1)), 8)
	c := s.open(0, fakeFd)
	if err := d.start(c); err != nil || fr.count(kindRecv) != 1 {
		t.Fatalf("start: %v, %d receives armed", err, fr.count(kindRecv))
	}

	recv(d, fb, c, 2, "hello")
	wantCalls(t, "a receive", s.take(), `readResult 0 "hello"`)
	if !slices.Equal(fb.recycled, []uint16{2}) {
		t.Fatalf("buffers recycled %v, want [2]", fb.recycled)
	}

	// A write is queued and sent at the turn's prepare, in one send.
	d.write(c, []byte("ab"))
	d.writev(c, [][]byte{[]byte("c"), []byte("de")})
	if fr.count(kindSend) != 0 {
		t.Fatal("a send was prepared before the turn's prepare")
	}
	d.prepare()
	if fr.count(kindSend) != 1 || string(c.out.pending()) != "abcde" {
		t.Fatalf("prepare: %d sends, pending %q; want 1 of \"abcde\"", fr.count(kindSend), c.out.pending())
	}
	d.complete(&ring.Completion{UserData: userData(kindSend, c.slot, c.gen), Res: 3})
	// The rest goes out at once from the completion.
	wantCalls(t, "a short send", s.take(), "sendResult 0 3 <nil>")
	if fr.count(kindSend) != 2 {
		t.Fatalf("%d sends after a short one, want the rest sent (2)", fr.count(kindSend))
	}
	d.complete(&ring.Completion{UserData: userData(kindSend, c.slot, c.gen), Res: 2})
	wantCalls(t, "the rest sent", s.take(), "sendResult 0 2 <nil>")

	// The release cancels the receive and closes; the slot is freed with
	// the last completion, not before.
	c.state |= stClosed
	d.release(c)
	if c.fd >= 0 || fr.count(kindCancel) != 1 || fr.count(kindClose) != 1 {
		t.Fatalf("release: fd %d, %d cancels, %d closes; want -1, 1, 1", c.fd, fr.count(kindCancel), fr.count(kindClose))
	}
	wantCalls(t, "the release", s.take())
	for _, e := range []ring.Completion{
		{UserData: userData(kindCancel, c.slot, c.gen)},
		{UserData: userData(kindRecv, c.slot, c.gen), Res: -int32(unix.ECANCELED)},
		{UserData: userData(kindClose, c.slot, c.gen)},
	} {
		d.complete(&e)
	}
	wantCalls(t, "the last completions", s.take(), "freeSlot 0")
	if s.freed[c] != 1 || !d.idle() {
		t.Fatalf("slot freed %d times, driver idle %v; want once, idle", s.freed[c], d.idle())
	}
}

// standInPoller is an epoll set and socket for the epoll driver: it
// records the interest registered, reports the events the test queues,
// and reads and writes scripted bytes.
type standInPoller struct {
	interest map[int]uint32
	events   []poller.Event
	input    map[int][]byte
	written  map[int][]byte
	take     int // how many bytes a write takes (0: all)
	closed   []int
}

func newStandInPoller() *standInPoller {
	return &standInPoller{interest: map[int]uint32{}, input: map[int][]byte{}, written: map[int][]byte{}}
}

func (p *standInPoller) Add(fd int, ev uint32, _ uint64) error    { p.interest[fd] = ev; return nil }
func (p *standInPoller) Modify(fd int, ev uint32, _ uint64) error { p.interest[fd] = ev; return nil }
func (p *standInPoller) Delete(fd int) error                      { delete(p.interest, fd); return nil }
func (p *standInPoller) Wait(time.Duration) ([]poller.Event, error) {
	evs := p.events
	p.events = nil
	return evs, nil
}
func (p *standInPoller) Drain()        {}
func (p *standInPoller) Wake() error   { return nil }
func (p *standInPoller) Waits() uint64 { return 0 }
func (p *standInPoller) Close() error  { return nil }

func (p *standInPoller) read(fd int, b []byte) (int, unix.Errno) {
	if len(p.input[fd]) == 0 {
		return 0, unix.EAGAIN
	}
	n := copy(b, p.input[fd])
	p.input[fd] = p.input[fd][n:]
	return n, 0
}

func (p *standInPoller) write(fd int, b []byte) (int, unix.Errno) {
	n := len(b)
	if p.take > 0 {
		n = min(n, p.take)
	}
	p.written[fd] = append(p.written[fd], b[:n]...)
	return n, 0
}

func (p *standInPoller) writev(fd int, iov []unix.Iovec) (int, unix.Errno) {
	n := 0
	for _, v := range iov {
		m, _ := p.write(fd, unsafe.Slice(v.Base, v.Len))
		n += m
	}
	return n, 0
}

func (p *standInPoller) sendfile(int, int, *int64, int) (int, error) { return 0, unix.ENOSYS }
func (p *standInPoller) preadNowait(int, []byte, int64) (int, error) { return 0, unix.EAGAIN }
func (p *standInPoller) shutdownWrite(int) error                     { return nil }
func (p *standInPoller) close(fd int) error                          { p.closed = append(p.closed, fd); return nil }

func TestEpollDriverOnAStandInLoop(t *testing.T) {
	s := newStandInLoop(Config{BufferSize: 64})
	p := newStandInPoller()
	d := newEpollDriverOn(s, s.env(), p, p)
	c := s.open(0, fakeFd)
	if err := d.start(c); err != nil || p.interest[fakeFd] != poller.In|poller.RDHup {
		t.Fatalf("start: %v, interest %#x", err, p.interest[fakeFd])
	}

	p.input[fakeFd] = []byte("hello")
	p.events = []poller.Event{poller.NewEvent(poller.In, connTag(c))}
	if err := turn(d, 0); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, "a readable connection", s.take(), `readResult 0 "hello"`)

	// A turn's first write goes straight to the socket; the later ones
	// wait for the turn's prepare and go out together.
	s.cnt[sTurns]++
	d.write(c, []byte("ab"))
	wantCalls(t, "the turn's first write", s.take(), "wroteDirect 2")
	d.write(c, []byte("c"))
	d.writev(c, [][]byte{[]byte("d"), []byte("e")})
	wantCalls(t, "later writes", s.take())
	p.take = 2
	d.prepare()
	// The socket takes 2 of 3: the connection waits for writability.
	wantCalls(t, "the gathered writes", s.take(), "sendResult 0 2 <nil>")
	if p.interest[fakeFd]&poller.Out == 0 {
		t.Fatalf("a full socket is not polled for writability: %#x", p.interest[fakeFd])
	}
	p.take = 0
	p.events = []poller.Event{poller.NewEvent(poller.Out, connTag(c))}
	if err := turn(d, 0); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, "writable", s.take(), "sendResult 0 1 <nil>")
	if got := string(p.written[fakeFd]); got != "abcde" || p.interest[fakeFd]&poller.Out != 0 {
		t.Fatalf("written %q, interest %#x; want \"abcde\" and no writability", got, p.interest[fakeFd])
	}

	c.state |= stClosed
	d.release(c)
	wantCalls(t, "the release", s.take(), "freeSlot 0")
	if !slices.Equal(p.closed, []int{fakeFd}) || s.freed[c] != 1 {
		t.Fatalf("closed %v, slot freed %d times; want the descriptor closed and the slot freed once", p.closed, s.freed[c])
	}
}
