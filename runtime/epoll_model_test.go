package runtime

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/percore/percore/poller"
	"golang.org/x/sys/unix"
)

// The epoll driver's write path, driven without a kernel: a real Loop and
// epollDriver over a stand-in epoll instance and stand-in sockets and
// files (epollModel, through the driver's epollPoller and epollSys seams),
// with a fake clock. Seeded random sequences of steps: writes (Write,
// Writev, Reserve and Commit) and file sends (SendFile, zero-copy and the
// read-and-send fallback) made from posted functions, timers, OnData,
// OnDrain and file sends' done functions, so before, during and after
// queued bytes; peers that read random amounts (so writes are partial and
// sockets fill), peers that send (OnData) and end their streams; Close,
// CloseLinger, Abort, PauseRead and ResumeRead; and loop turns (Loop.turn,
// the real one). The oracle, after every step:
//
//   - the bytes a peer has read, and those its socket holds, are a prefix
//     of what was written to it, in call order (each byte once, in order);
//   - a connection with something to send (queued bytes, a zero-copy file
//     send) is on the end-of-turn list or waits for writability, and the
//     epoll interest registered is exactly what its state asks for: input
//     while it reads, writability exactly while its socket is full (never
//     with nothing to send: that would wake the loop on every wait);
//   - a fallback read in flight has its result's timer pending;
//
// and at every wait: the loop never waits past a timer that is due, nor
// with writes listed, and never waits without a limit while a connection
// has something to send that no writability event will announce. At the
// end, the peers read everything and the connections close: every byte
// written arrived, once and in order, and OnClose ran once, with nil.
//
// Run longer with -epollmodel.seeds and -epollmodel.steps; one seed alone
// with -epollmodel.seed.

var (
	epollModelSeeds = flag.Int("epollmodel.seeds", 80, "seeded sequences TestModelEpollWrite runs")
	epollModelSteps = flag.Int("epollmodel.steps", 200, "steps in each of TestModelEpollWrite's sequences")
	epollModelSeed  = flag.Uint64("epollmodel.seed", 0, "run only this seed of TestModelEpollWrite")
)

func TestModelEpollWrite(t *testing.T) {
	first, last := uint64(1), uint64(*epollModelSeeds)
	if *epollModelSeed != 0 {
		first, last = *epollModelSeed, *epollModelSeed
	}
	for seed := first; seed <= last; seed++ {
		runEpollModel(t, seed, *epollModelSteps)
		if t.Failed() {
			return
		}
	}
}

// FuzzModelEpollWrite runs the model on seeds the fuzzer picks (go test
// -fuzz FuzzModelEpollWrite ./runtime); without -fuzz, on a few.
func FuzzModelEpollWrite(f *testing.F) {
	for seed := uint64(1); seed <= 4; seed++ {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { runEpollModel(t, seed, *epollModelSteps) })
}

// epollModelFault stops a sequence at its first broken invariant.
type epollModelFault struct{ msg string }

func runEpollModel(t *testing.T, seed uint64, steps int) {
	t.Helper()
	m := newEpollModel(t, seed)
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(epollModelFault)
			if !ok {
				panic(r)
			}
			t.Fatalf("seed %d, step %d (%s): %s\nrerun: go test ./runtime -run TestModelEpollWrite -v -args -epollmodel.seed=%d",
				seed, m.step, m.last, f.msg, seed)
		}
	}()
	for m.step = 0; m.step < steps; m.step++ {
		m.randomStep()
		m.check()
	}
	m.last = "drain"
	m.drain()
	if seed%2 == 0 && m.d.cnt[sTurns] < 1<<32 {
		t.Fatalf("seed %d: the loop took %d turns, short of 2^32: the run did not cross the wrap it was set up for", seed, m.d.cnt[sTurns])
	}
}

// epollModel is the stand-in kernel, and the model's record of what each
// connection was sent.
type epollModel struct {
	t     *testing.T
	rng   *rand.Rand
	step  int
	last  string // the step being run, for the failure message
	l     *Loop
	d     *epollDriver
	clock *fakeClock

	socks    map[int]*epollModelSock
	interest map[int]uint32 // the epoll set: fd -> events
	tags     map[int]uint64 // fd -> event data
	woken    bool
	waits    uint64

	files   []*File
	content map[int][]byte // a file's bytes, by descriptor
	refuse  map[int]bool   // files sendfile refuses (EINVAL): they go by the fallback
	conns   []*epollModelConn
	nextFd  int
}

// epollModelSock is a stand-in socket: a send buffer of cap bytes the peer
// reads from, and the peer's input.
type epollModelSock struct {
	cap    int
	taken  []byte // every byte the socket took
	read   int    // how many of them the peer has read
	input  []byte // sent by the peer, not read by the loop yet
	inEOF  bool   // the peer ended its stream
	short  bool   // takes half of what fits: partial writes with room left
	shut   bool   // the write side is shut down
	closed bool
}

func (s *epollModelSock) room() int { return s.cap - (len(s.taken) - s.read) }

// epollModelConn is one connection of the model.
type epollModelConn struct {
	c       *Conn
	fd      int
	sock    *epollModelSock
	want    []byte // every byte written to it, in call order
	checked int    // how many of the socket's bytes check has compared with want
	seq     byte   // the next byte a write carries
	closes  []error
	closing bool // Close or CloseLinger called
	aborted bool // Abort called: what was queued may be lost
}

func newEpollModel(t *testing.T, seed uint64) *epollModel {
	m := &epollModel{t: t, rng: rand.New(rand.NewPCG(seed, 0xe9011)),
		socks: map[int]*epollModelSock{}, interest: map[int]uint32{}, tags: map[int]uint64{},
		content: map[int][]byte{}, refuse: map[int]bool{}, nextFd: fakeFd + 100}
	// No write timeout or linger bound: the fake clock jumps to the next
	// timer when the loop waits, and the model's peers are slow on
	// purpose. A small outbound cap: pauses and OnDrain.
	cfg := Config{WriteTimeout: -1, Linger: -1, LingerInput: -1, MaxOutbound: 48 << 10, BufferSize: 4 << 10}
	l, _, clock := newTestLoop(t, cfg, epollModelHandler{m})
	m.l, m.clock = l, clock
	m.d = newEpollDriverOn(l, l.env(), m, m)
	l.d = m.d
	if seed%2 == 0 {
		// Half the seeds run across turn 2^32, where a connection's last
		// direct write (epollConn.wrote, the turn's low 32 bits) of turn
		// 0 looks like the current turn's: its next write waits for the
		// turn's end, in order (decision 0075).
		m.d.cnt[sTurns] = 1<<32 - seed%64
	}
	for i := range 3 {
		fd := fakeFd + 10 + i
		n := 1 + m.rng.IntN(300<<10)
		off := m.rng.IntN(len(epollModelFiles) - n)
		m.content[fd] = epollModelFiles[off : off+n]
		m.refuse[fd] = i == 2
		m.files = append(m.files, l.addFile(fd, fmt.Sprintf("file%d", i), false))
	}
	return m
}

// epollModelFiles is what the model's files hold: windows of it.
var epollModelFiles = func() []byte {
	b := make([]byte, 1<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

func (m *epollModel) fail(format string, args ...any) {
	panic(epollModelFault{fmt.Sprintf(format, args...)})
}

// The steps.

func (m *epollModel) randomStep() {
	open := m.open()
	if len(open) == 0 || (len(m.conns) < 4 && m.rng.IntN(20) == 0) {
		m.last = "open"
		m.openConn()
		return
	}
	mc := open[m.rng.IntN(len(open))]
	switch r := m.rng.IntN(100); {
	case r < 25:
		m.last = "turn"
		m.turn()
	case r < 45:
		m.last = "act (posted)"
		m.l.safely("model", func() { m.act(mc, 0) })
	case r < 65:
		m.last = "peer reads"
		m.peerReads(mc.sock, m.rng.IntN(3) == 0)
	case r < 72:
		m.last = "peer sends"
		mc.sock.input = append(mc.sock.input, make([]byte, 1+m.rng.IntN(6<<10))...)
	case r < 78:
		m.last = "timer"
		m.l.AfterFunc(time.Duration(m.rng.IntN(3))*time.Millisecond, func() {
			if !mc.c.closed() {
				m.act(mc, 0)
			}
		})
	case r < 82:
		m.last = "socket turns short"
		mc.sock.short = !mc.sock.short
	case r < 86:
		m.last = "pause or resume"
		m.l.safely("model", func() {
			if mc.c.state&stPauseRead != 0 {
				mc.c.ResumeRead()
			} else {
				mc.c.PauseRead()
			}
		})
	case r < 88:
		m.last = "close"
		m.l.safely("model", func() { m.closeConn(mc) })
	case r < 89:
		m.last = "abort"
		mc.aborted = true
		m.l.safely("model", mc.c.Abort)
	default:
		m.last = "turn"
		m.turn()
	}
}

func (m *epollModel) open() []*epollModelConn {
	var open []*epollModelConn
	for _, mc := range m.conns {
		if !mc.c.closed() {
			open = append(open, mc)
		}
	}
	return open
}

func (m *epollModel) openConn() {
	fd := m.nextFd
	m.nextFd++
	sock := &epollModelSock{cap: 1 + m.rng.IntN(24<<10)}
	if m.rng.IntN(10) == 0 {
		sock.cap = 1 + m.rng.IntN(64) // a socket that takes a few bytes at a time
	}
	m.socks[fd] = sock
	mc := &epollModelConn{fd: fd, sock: sock}
	m.conns = append(m.conns, mc)
	n := len(m.l.conns)
	m.l.acceptResult(fd, 0, 0)
	for _, c := range m.l.conns[:max(n, len(m.l.conns))] {
		if c != nil && int(c.fd) == fd {
			mc.c = c
		}
	}
	if mc.c == nil {
		m.fail("the accepted connection is not in a slot")
	}
	mc.c.SetValue(mc)
}

func (m *epollModel) closeConn(mc *epollModelConn) {
	mc.closing = true
	if m.rng.IntN(2) == 0 {
		mc.c.CloseLinger()
	} else {
		mc.c.Close()
	}
}

// act makes a few random writes and file sends on mc from a callback;
// done functions and OnDrain act again, depth bounding the chain.
func (m *epollModel) act(mc *epollModelConn, depth int) {
	c := mc.c
	for range 1 + m.rng.IntN(3) {
		switch r := m.rng.IntN(100); {
		case r < 35:
			m.writeConn(mc, m.size())
		case r < 50:
			parts := make([][]byte, 1+m.rng.IntN(4))
			for i := range parts {
				parts[i] = mc.bytes(m.size())
			}
			if n, err := c.Writev(parts...); err == nil && n > 0 {
				for _, p := range parts {
					mc.want = append(mc.want, p...)
				}
			}
		case r < 62:
			n := m.size()
			room := c.Reserve(n)
			if room == nil {
				continue
			}
			k := m.rng.IntN(n + 1)
			copy(room, mc.bytes(k))
			if c.Commit(k) == nil {
				mc.want = append(mc.want, room[:k]...)
			}
		case r < 92:
			if c.fileSend() != nil {
				continue
			}
			f := m.files[m.rng.IntN(len(m.files))]
			content := m.content[f.fd]
			off := m.rng.IntN(len(content) + 1)
			n := m.rng.IntN(len(content) - off + 1)
			if m.rng.IntN(4) == 0 {
				n = min(n, 100)
			}
			err := c.SendFile(f, int64(off), int64(n), func(sent int64, err error) {
				if err != nil && !mc.aborted && !mc.c.closed() {
					m.fail("a file send failed: %v", err)
				}
				if err == nil && sent != int64(n) {
					m.fail("done(%d, nil) for a send of %d", sent, n)
				}
				if err == nil && depth < 3 && m.rng.IntN(2) == 0 {
					m.act(mc, depth+1)
				}
			})
			if err == nil {
				mc.want = append(mc.want, content[off:off+n]...)
			}
		case r < 95:
			if depth == 0 && m.rng.IntN(4) == 0 {
				m.closeConn(mc)
				return
			}
		default:
			if c.state&stPauseRead != 0 {
				c.ResumeRead()
			} else {
				c.PauseRead()
			}
		}
	}
}

// size is a write's length: mostly small, sometimes larger than a socket.
func (m *epollModel) size() int {
	switch r := m.rng.IntN(10); {
	case r < 6:
		return 1 + m.rng.IntN(200)
	case r < 9:
		return 1 + m.rng.IntN(16<<10)
	default:
		return 1 + m.rng.IntN(100<<10)
	}
}

func (m *epollModel) writeConn(mc *epollModelConn, n int) {
	p := mc.bytes(n)
	if _, err := mc.c.Write(p); err == nil {
		mc.want = append(mc.want, p...)
	}
}

// bytes returns n bytes that continue mc's sequence: a byte lost, doubled
// or moved shows as a mismatch.
func (mc *epollModelConn) bytes(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = mc.seq
		mc.seq++
	}
	return p
}

func (m *epollModel) peerReads(s *epollModelSock, all bool) {
	k := len(s.taken) - s.read
	if !all && k > 0 {
		k = 1 + m.rng.IntN(k)
	}
	s.read += k
}

func (m *epollModel) turn() {
	if err := m.l.turn(); err != nil {
		m.fail("turn: %v", err)
	}
}

// drain has every connection closed and every peer read all: each gets
// exactly what was written to it.
func (m *epollModel) drain() {
	m.l.safely("model", func() {
		for _, mc := range m.open() {
			if !mc.closing {
				m.closeConn(mc)
			}
		}
	})
	progress, still := 0, 0
	for len(m.open()) > 0 {
		n := len(m.open())
		for _, mc := range m.conns {
			n += mc.sock.read
		}
		if n != progress {
			progress, still = n, 0
		} else if still++; still > 100 {
			var b bytes.Buffer
			for _, mc := range m.open() {
				fmt.Fprintf(&b, " [fd %d: %d of %d bytes read, %d queued, file %v, full %v, batched %v, events %#x]",
					mc.fd, mc.sock.read, len(mc.want), mc.c.Buffered(), mc.c.fileSend() != nil, mc.c.ep.flags&efFull != 0, mc.c.ep.flags&efGathered != 0, m.interest[mc.fd])
				fmt.Fprintf(&b, " state %#x", mc.c.state)
			}
			m.fail("%d connections never finished:%s", len(m.open()), b.String())
		}
		for _, mc := range m.conns {
			m.peerReads(mc.sock, true)
			mc.sock.inEOF = true // so that a lingering close ends
		}
		m.turn()
		m.check()
	}
	for _, mc := range m.conns {
		m.peerReads(mc.sock, true)
		if len(mc.closes) != 1 {
			m.fail("fd %d: OnClose ran %d times", mc.fd, len(mc.closes))
		}
		if mc.aborted {
			continue
		}
		if mc.closes[0] != nil {
			m.fail("fd %d: OnClose(%v), want nil", mc.fd, mc.closes[0])
		}
		if got := mc.sock.taken[:mc.sock.read]; !bytes.Equal(got, mc.want) {
			m.fail("fd %d: the peer read %d bytes of %d, the first difference at %d",
				mc.fd, len(got), len(mc.want), epollFirstDiff(got, mc.want))
		}
		if !mc.sock.closed {
			m.fail("fd %d: the connection closed, its descriptor did not", mc.fd)
		}
	}
}

func epollFirstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// check is the oracle between steps.
func (m *epollModel) check() {
	d := m.d
	for _, mc := range m.conns {
		c, s := mc.c, mc.sock
		if n := len(s.taken); n > len(mc.want) || !bytes.Equal(s.taken[mc.checked:], mc.want[mc.checked:n]) {
			m.fail("fd %d: the socket took %d bytes that are not what was written (first difference at %d)",
				mc.fd, n, epollFirstDiff(s.taken, mc.want))
		}
		mc.checked = len(s.taken)
		if c.closed() {
			if !s.closed || m.interest[mc.fd] != 0 {
				m.fail("fd %d: closed, but its descriptor is open (%v) or in the epoll set (%#x)", mc.fd, !s.closed, m.interest[mc.fd])
			}
			continue
		}
		reg, inSet := m.interest[mc.fd]
		if reg != uint32(c.ep.events) || inSet != (c.ep.events != 0) {
			m.fail("fd %d: the driver thinks %#x is registered, the epoll set has %#x (in it: %v)", mc.fd, c.ep.events, reg, inSet)
		}
		hasOut := c.out.buffered() > 0 || d.fileReady(c)
		if hasOut && c.ep.flags&efGathered == 0 && !(c.ep.flags&efFull != 0 && reg&poller.Out != 0) {
			m.fail("fd %d: %d bytes queued (file send ready %v), neither on the end-of-turn list nor waiting for writability",
				mc.fd, c.out.buffered(), d.fileReady(c))
		}
		if (reg&poller.Out != 0) != (c.ep.flags&efFull != 0) {
			m.fail("fd %d: registered for writability %v, socket full %v", mc.fd, reg&poller.Out != 0, c.ep.flags&efFull != 0)
		}
		if c.ep.flags&efFull != 0 && !hasOut {
			m.fail("fd %d: waits for writability with nothing to send", mc.fd)
		}
		if (reg&poller.In != 0) != c.wantsInput() {
			m.fail("fd %d: registered for input %v, reading %v", mc.fd, reg&poller.In != 0, c.wantsInput())
		}
		if c.fileSend() != nil && c.fileSend().reading && len(m.l.timers.ts) == 0 {
			m.fail("fd %d: a fallback read in flight, and no timer for its result", mc.fd)
		}
		if c.ep.flags&efFlushing != 0 {
			m.fail("fd %d: flushing between steps", mc.fd)
		}
	}
}

// The stand-in epoll instance (epollPoller).

func (m *epollModel) Add(fd int, events uint32, data uint64) error {
	if _, ok := m.interest[fd]; ok {
		m.fail("epoll_ctl ADD of fd %d, which is in the set", fd)
	}
	m.interest[fd], m.tags[fd] = events, data
	return nil
}

func (m *epollModel) Modify(fd int, events uint32, data uint64) error {
	if _, ok := m.interest[fd]; !ok {
		m.fail("epoll_ctl MOD of fd %d, which is not in the set", fd)
	}
	m.interest[fd], m.tags[fd] = events, data
	return nil
}

func (m *epollModel) Delete(fd int) error {
	if _, ok := m.interest[fd]; !ok {
		m.fail("epoll_ctl DEL of fd %d, which is not in the set", fd)
	}
	delete(m.interest, fd)
	return nil
}

// Wait reports the ready descriptors, after checking the wait itself.
func (m *epollModel) Wait(timeout time.Duration) ([]poller.Event, error) {
	m.waits++
	l := m.l
	if t := l.timers.next(); t != nil {
		if due := max(t.when.Sub(m.clock.now), 0); timeout < 0 || timeout > due {
			m.fail("the loop waits %v with a timer due in %v", timeout, due)
		}
	}
	if len(m.d.gathered) > 0 && timeout != 0 {
		m.fail("the loop waits %v with %d connections' writes listed", timeout, len(m.d.gathered))
	}
	var evs []poller.Event
	if m.woken {
		evs = append(evs, poller.NewEvent(poller.In, poller.WakeData))
	}
	for _, fd := range slices.Sorted(maps.Keys(m.interest)) {
		s := m.socks[fd]
		if s == nil {
			continue
		}
		ev := m.interest[fd]
		var r uint32
		if ev&poller.Out != 0 && s.room() > 0 {
			r |= poller.Out
		}
		if ev&poller.In != 0 && (len(s.input) > 0 || s.inEOF) {
			r |= poller.In
			if s.inEOF {
				r |= poller.RDHup
			}
		}
		if r != 0 {
			evs = append(evs, poller.NewEvent(r, m.tags[fd]))
		}
	}
	if len(evs) > 0 {
		m.rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		return evs, nil
	}
	if timeout < 0 {
		// The loop would sleep until something outside it happens: only
		// right if every connection with something to send waits for a
		// writability the peer's reading will bring.
		for _, mc := range m.open() {
			c := mc.c
			if (c.out.buffered() > 0 || m.d.fileReady(c)) && m.interest[mc.fd]&poller.Out == 0 {
				m.fail("fd %d: the loop would sleep for good with %d bytes to send", mc.fd, c.out.buffered())
			}
		}
		return nil, nil
	}
	m.clock.advance(timeout)
	return nil, nil
}

func (m *epollModel) Drain()        { m.woken = false }
func (m *epollModel) Wake() error   { m.woken = true; return nil }
func (m *epollModel) Waits() uint64 { return m.waits }
func (m *epollModel) Close() error  { return nil }

// The stand-in sockets and files (epollSys).

func (m *epollModel) sock(fd int) *epollModelSock {
	s := m.socks[fd]
	if s == nil || s.closed {
		m.fail("a call on fd %d, which is not an open socket", fd)
	}
	return s
}

// take is how much of n bytes s takes now.
func (m *epollModel) take(s *epollModelSock, n int) int {
	k := min(n, s.room())
	if s.short && k > 1 {
		k /= 2
	}
	return k
}

func (m *epollModel) read(fd int, p []byte) (int, unix.Errno) {
	s := m.sock(fd)
	if len(s.input) == 0 {
		if s.inEOF {
			return 0, 0
		}
		return 0, unix.EAGAIN
	}
	n := copy(p, s.input)
	s.input = s.input[n:]
	return n, 0
}

func (m *epollModel) write(fd int, p []byte) (int, unix.Errno) {
	s := m.sock(fd)
	if s.shut {
		m.fail("a write on fd %d after its write side was shut down", fd)
	}
	k := m.take(s, len(p))
	if k == 0 {
		return 0, unix.EAGAIN
	}
	s.taken = append(s.taken, p[:k]...)
	return k, 0
}

func (m *epollModel) writev(fd int, iov []unix.Iovec) (int, unix.Errno) {
	var all []byte
	for _, v := range iov {
		all = append(all, unsafe.Slice(v.Base, v.Len)...)
	}
	return m.write(fd, all)
}

func (m *epollModel) sendfile(out, in int, off *int64, n int) (int, error) {
	s := m.sock(out)
	content, ok := m.content[in]
	if !ok {
		m.fail("sendfile from fd %d, which is not a file", in)
	}
	if m.refuse[in] {
		return 0, unix.EINVAL
	}
	if *off >= int64(len(content)) {
		return 0, nil
	}
	k := m.take(s, min(n, len(content)-int(*off)))
	if k == 0 {
		return 0, unix.EAGAIN
	}
	s.taken = append(s.taken, content[*off:*off+int64(k)]...)
	*off += int64(k)
	return k, nil
}

func (m *epollModel) preadNowait(fd int, p []byte, off int64) (int, error) {
	content, ok := m.content[fd]
	if !ok {
		m.fail("a read of fd %d, which is not a file", fd)
	}
	if off >= int64(len(content)) {
		return 0, nil
	}
	return copy(p, content[off:]), nil
}

func (m *epollModel) shutdownWrite(fd int) error { m.sock(fd).shut = true; return nil }

func (m *epollModel) close(fd int) error {
	m.sock(fd).closed = true
	delete(m.interest, fd)
	return nil
}

// epollModelHandler acts on its connection's input and drains.
type epollModelHandler struct{ m *epollModel }

func (h epollModelHandler) OnData(c *Conn, _ []byte) {
	if mc, ok := c.Value().(*epollModelConn); ok && h.m.rng.IntN(2) == 0 {
		h.m.act(mc, 0)
	}
}

func (h epollModelHandler) OnDrain(c *Conn) {
	if mc, ok := c.Value().(*epollModelConn); ok && h.m.rng.IntN(2) == 0 {
		h.m.act(mc, 1)
	}
}

func (h epollModelHandler) OnClose(c *Conn, err error) {
	if mc, ok := c.Value().(*epollModelConn); ok {
		mc.closes = append(mc.closes, err)
	}
}
