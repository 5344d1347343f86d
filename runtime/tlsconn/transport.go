package tlsconn

import (
	"net"
	"os"
	"time"
)

// transport is the net.Conn under a session's tls.Conn. It never touches a
// socket: the loop puts the peer's ciphertext in (Session.Decrypt) and takes
// what the tls.Conn wrote out (Session.Output, Session.Encrypt).
//
// It hands the tls.Conn one record at a time and never more than the record
// it is on, so that the tls.Conn's own buffer (Conn.rawInput) only ever holds
// the record being read and nothing arrives there early: what the peer sent
// after the handshake stays here until the loop asks for it.
//
// Before the handshake is over, the tls.Conn runs on a pool goroutine and
// reads wait (under Session.mu) for the loop to bring a whole record. After
// it, the tls.Conn runs on the loop and a read with no whole record buffered
// returns errWouldBlock, a temporary net.Error: crypto/tls keeps its state
// across those (it records an error as permanent only when it is not a
// temporary net.Error, Conn.readRecordOrCCS), and the caller calls Read again
// only once a whole record is here.
type transport struct {
	s *Session

	// in is the ciphertext not yet handed to the tls.Conn. It is a suffix
	// of held when owned is true, and the caller's slice (only during one
	// Decrypt call) when it is false.
	in    []byte
	held  *[]byte // from getBuf; nil when nothing is held
	owned bool

	rec    int    // bytes of the current record still to hand over
	first  bool   // no record handed over yet
	expect uint16 // the record version once known, 0 before
	limit  int    // the longest record body accepted
	broken bool   // an early header was handed over: from now on only errors
	poison bool   // the current hand-over is an early header
	batch  bool   // hand over several whole records at once (after the handshake)
	allow  int    // at most this many bytes in one hand-over (a budget's share)

	out []byte // ciphertext the tls.Conn wrote, not yet taken

	// alert is the last plaintext alert the tls.Conn sent during the
	// handshake (before encryption starts, alerts are readable on the
	// wire), for the handshake's *Error when crypto/tls's error does not
	// say it (it often sends one alert and returns another error).
	alert    uint8
	hasAlert bool

	// Before the handshake is over these are under Session.mu.
	loop     bool // the handshake is over: reads do not wait, nothing locks
	closed   bool
	timedOut bool
	wake     chan struct{} // one token: the loop brought input or closed
}

// errWouldBlock is what a read returns after the handshake when no whole
// record is buffered. crypto/tls treats it as temporary and keeps its state.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "tlsconn: no whole record buffered" }
func (wouldBlock) Timeout() bool   { return false }
func (wouldBlock) Temporary() bool { return true }

// errBroken is the transport's answer after it handed over a header that
// crypto/tls should have refused: it never hands over a body it cannot frame.
var errBroken = &net.OpError{Op: "read", Net: "tls", Err: os.ErrInvalid}

// ready reports whether a read would hand over bytes now.
func (t *transport) ready() bool {
	if t.rec > 0 || t.broken {
		return true
	}
	n, _ := recordLen(t.in, t.first, t.expect, t.limit)
	return n > 0
}

// need returns how many more bytes the first record of in needs to be
// handed over (0 when it can be now).
func (t *transport) need() int {
	if t.ready() {
		return 0
	}
	if len(t.in) < headerLen {
		return headerLen - len(t.in)
	}
	return headerLen + (int(t.in[3])<<8 | int(t.in[4])) - len(t.in)
}

// take hands over up to len(p) bytes of the current hand-over, starting
// the next one when a record is whole. It returns 0 when none is.
//
// A hand-over is one record, or after the handshake (when the session
// manages the tls.Conn's buffer, so that it can see it drain) as many
// whole records as fit in p, up to allow bytes: crypto/tls then reads them
// in one call (one atLeastReader, not one per record) and decrypts them
// one by one from its own buffer.
func (t *transport) take(p []byte) (int, error) {
	if t.broken {
		return 0, errBroken
	}
	if t.rec == 0 {
		n, early := recordLen(t.in, t.first, t.expect, t.limit)
		if n == 0 {
			return 0, nil
		}
		t.first, t.poison = false, early
		if !early && t.batch {
			for n < len(p) && n < t.allow {
				m, bad := recordLen(t.in[n:], false, t.expect, t.limit)
				if m == 0 || bad || n+m > len(p) {
					break
				}
				n += m
			}
		}
		t.rec = n
	}
	k := copy(p, t.in[:t.rec])
	t.in = t.in[k:]
	t.rec -= k
	if t.rec == 0 && t.poison {
		t.broken = true
	}
	return k, nil
}

// hold appends p behind in, in the session's own buffer.
func (t *transport) hold(p []byte) {
	if len(t.in)+len(p) == 0 {
		t.release()
		return
	}
	var held, first []byte // first: the bytes that go before p
	if t.held != nil {
		held = *t.held
	}
	if t.owned {
		held = held[:copy(held, t.in)] // in is a suffix of held
	} else {
		held, first = held[:0], t.in
	}
	if need := len(held) + len(first) + len(p); cap(held) < need {
		box := getBuf(need)
		*box = append(*box, held...)
		putBuf(t.held)
		t.held, held = box, *box
	}
	held = append(append(held, first...), p...)
	*t.held = held
	t.in, t.owned = held, true
}

// keep makes the unconsumed part of in the session's own, at the end of a
// Decrypt call whose caller's slice it may still point into, and gives the
// buffer back when nothing is left.
func (t *transport) keep() {
	switch {
	case len(t.in) == 0:
		t.release()
	case !t.owned:
		t.hold(nil)
	}
}

// release drops the held input and gives its buffer back.
func (t *transport) release() {
	t.in, t.owned = nil, false
	putBuf(t.held)
	t.held = nil
}

// Read hands the tls.Conn ciphertext, one record at a time.
func (t *transport) Read(p []byte) (int, error) {
	if t.loop {
		n, err := t.take(p)
		if n == 0 && err == nil {
			err = errWouldBlock
		}
		return n, err
	}
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case t.timedOut:
			return 0, os.ErrDeadlineExceeded
		case t.closed:
			return 0, net.ErrClosed
		}
		if n, err := t.take(p); n > 0 || err != nil {
			return n, err
		}
		// Wait for the peer without holding a CPU place.
		wake := t.wake
		s.mu.Unlock()
		s.pool.release(s, s.w)
		<-wake
		s.pool.acquire(s.w)
		s.mu.Lock()
	}
}

// Write collects what the tls.Conn sends.
func (t *transport) Write(p []byte) (int, error) {
	if t.loop {
		if t.closed {
			return 0, net.ErrClosed
		}
		t.out = append(t.out, p...)
		return len(p), nil
	}
	s := t.s
	s.mu.Lock()
	if t.closed {
		s.mu.Unlock()
		return 0, net.ErrClosed
	}
	t.out = append(t.out, p...)
	t.sniffAlert(p)
	if s.markLocked() {
		// Notify once this stretch of work ends (release), on a thread
		// back at its own priority: Notify wakes the loop, which preempts
		// a low-priority thread at once, and one preempted inside the
		// loop's post would hold the lock the loop takes next.
		s.w.notify = true
	}
	s.mu.Unlock()
	return len(p), nil
}

// sniffAlert remembers a plaintext alert among the records of p.
func (t *transport) sniffAlert(p []byte) {
	for len(p) >= headerLen {
		n := headerLen + (int(p[3])<<8 | int(p[4]))
		if n > len(p) {
			return
		}
		if p[0] == recordTypeAlert && n == headerLen+2 {
			t.alert, t.hasAlert = p[headerLen+1], true
		}
		p = p[n:]
	}
}

// wakeLocked lets a waiting Read look again. Under Session.mu.
func (t *transport) wakeLocked() {
	if t.wake == nil {
		return
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Close ends pending reads; the session closes its transport itself.
func (t *transport) Close() error {
	if t.loop {
		t.closed = true
		return nil
	}
	t.s.mu.Lock()
	t.closed = true
	t.wakeLocked()
	t.s.mu.Unlock()
	return nil
}

func (t *transport) LocalAddr() net.Addr  { return orNoAddr(t.s.local) }
func (t *transport) RemoteAddr() net.Addr { return orNoAddr(t.s.remote) }

// orNoAddr returns a, or for nil a typed nil *net.TCPAddr: crypto/tls
// calls RemoteAddr().String() (a client's session cache key), which a
// nil interface would turn into a panic on the loop.
func orNoAddr(a net.Addr) net.Addr {
	if a == nil {
		return (*net.TCPAddr)(nil)
	}
	return a
}

// Deadlines are the session's business (the pool's handshake timeout); the
// tls.Conn sets one around close_notify, which never waits here.
func (t *transport) SetDeadline(time.Time) error      { return nil }
func (t *transport) SetReadDeadline(time.Time) error  { return nil }
func (t *transport) SetWriteDeadline(time.Time) error { return nil }

var _ net.Conn = (*transport)(nil)
