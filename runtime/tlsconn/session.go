package tlsconn

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"time"
)

// Options are a session's wiring to its loop. Pool is required.
type Options struct {
	// Pool runs the handshake. Required.
	Pool *Pool

	// Notify is called, from a pool goroutine or a timer's, when the
	// session has news for its loop: ciphertext to send (Output) or the
	// end of the handshake (HandshakeDone). Calls are coalesced: after
	// one, the next comes only once the loop has called Output or
	// HandshakeDone. It must not block; a loop posts itself a task
	// (Loop.Post) that calls Output and then HandshakeDone. Nil means the
	// loop polls.
	Notify func()

	// LocalAddr and RemoteAddr are what the tls.Conn's net.Conn reports
	// during the handshake (tls.ClientHelloInfo.Conn, seen by
	// GetCertificate and GetConfigForClient). A server session drops them
	// once the loop has seen the handshake end, so that an idle
	// connection does not hold them; a client session keeps them, because
	// crypto/tls keys its ClientSessionCache by RemoteAddr when the
	// config has no ServerName, also for the tickets it reads after the
	// handshake. Nil reads as an address of "<nil>".
	LocalAddr, RemoteAddr net.Addr
}

// Session is one connection's TLS: crypto/tls's tls.Conn over a transport
// that never touches a socket. The handshake runs on its Pool; after it,
// the loop calls Decrypt with the ciphertext it received and sends what
// Encrypt, Output and CloseNotify return.
//
// Only the owning loop may call its methods; Notify tells it when to.
type Session struct {
	tc     *tls.Conn
	t      transport
	pool   *Pool
	notify func()
	local  net.Addr
	remote net.Addr
	client bool

	mu       sync.Mutex // before the handshake is over: t's fields, done, hsErr, notified; taken inside Pool.mu, never around it
	done     bool       // the handshake is over
	hsErr    error      // how it ended
	notified bool       // Notify was called and the loop has not looked since
	timer    *time.Timer

	// The pool goroutine's, while it runs the handshake: its thread.
	w *worker

	// Under pool.mu.
	pstate     poolState
	prev, next *Session

	// The loop's own.
	started bool  // handed to the pool
	est     bool  // the loop saw the handshake end; no more locking
	rerr    error // sticky: the read side's end (io.EOF at close_notify)
	werr    error // sticky: the write side's
	shut    bool  // close_notify sent
	closed  bool
}

// Server returns a session that answers a client's handshake with cfg.
// The handshake starts on the pool when the first ciphertext arrives
// (Decrypt); the pool's timeout runs from now.
func Server(cfg *tls.Config, o Options) *Session {
	s := newSession(o, false)
	s.tc = tls.Server(&s.t, cfg)
	return s
}

// Client returns a session that runs a client handshake with cfg (set
// ServerName for SNI and verification, as with tls.Client). The handshake
// starts on the pool now; a pool that cannot take it fails the session at
// once (HandshakeDone reports ErrPoolFull).
func Client(cfg *tls.Config, o Options) *Session {
	s := newSession(o, true)
	s.tc = tls.Client(&s.t, cfg)
	s.start()
	return s
}

func newSession(o Options, client bool) *Session {
	if o.Pool == nil {
		panic("tlsconn: Options.Pool is nil")
	}
	s := &Session{pool: o.Pool, notify: o.Notify, local: o.LocalAddr, remote: o.RemoteAddr, client: client}
	s.t.s = s
	s.t.first = true
	s.t.limit = maxCiphertext
	s.t.wake = make(chan struct{}, 1)
	if d := o.Pool.cfg.Timeout; d > 0 {
		// Under s.mu, which expire takes before it reads s.timer: the
		// timer's goroutine is not ordered after this assignment
		// otherwise (the race detector saw it with a short timeout).
		s.mu.Lock()
		s.timer = time.AfterFunc(d, s.expire)
		s.mu.Unlock()
	}
	if s.notify == nil {
		s.notify = func() {}
	}
	return s
}

// start hands the handshake to the pool, once.
func (s *Session) start() {
	if s.started {
		return
	}
	s.started = true
	if err := s.pool.submit(s); err != nil {
		s.finish(err, false)
	}
}

// markLocked reports whether Notify should be called now, and records that
// it was. Under s.mu.
func (s *Session) markLocked() bool {
	if s.notified || s.closed {
		return false
	}
	s.notified = true
	return true
}

// handshake runs on a pool goroutine; the pool then ends it (ended).
func (s *Session) handshake() error {
	err := s.tc.Handshake()
	s.mu.Lock()
	if err != nil && s.t.timedOut {
		err = os.ErrDeadlineExceeded
	}
	s.mu.Unlock()
	return err
}

// ended records the end of the handshake the pool ran, once the pool
// has counted it (under Pool.mu), so that a loop that sees the end finds
// it in Stats. Notify is due after the pool's goroutine left its stretch
// of work (notifyDue), as transport.Write's.
func (s *Session) ended(err error) {
	s.mu.Lock()
	if s.finishLocked(err) {
		s.w.notify = true
	}
	s.mu.Unlock()
}

// finish ends the handshake from outside a pool goroutine: a pool that
// refused or closed, a timeout before the handshake began.
func (s *Session) finish(err error, notify bool) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	n := s.finishLocked(err)
	s.mu.Unlock()
	if n && notify {
		s.notify()
	}
}

func (s *Session) finishLocked(err error) (notify bool) {
	s.done = true
	s.hsErr = wrapError("handshake", err)
	if e, ok := s.hsErr.(*Error); ok && !e.Sent && !e.Received && s.t.hasAlert {
		e.Sent, e.Alert = true, tls.AlertError(s.t.alert)
	}
	s.t.loop = true
	s.t.wake = nil
	if s.timer != nil {
		s.timer.Stop()
	}
	return s.markLocked()
}

// expire is the handshake timeout, on a timer goroutine.
func (s *Session) expire() {
	running := s.pool.expire(s)
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.t.timedOut = true
	s.t.wakeLocked()
	var notify bool
	if !running { // nobody else will end it
		notify = s.finishLocked(os.ErrDeadlineExceeded)
	}
	s.mu.Unlock()
	if notify {
		s.notify()
	}
}

// HandshakeDone reports whether the handshake is over and, if it is, how
// it ended: nil, or an *Error (os.ErrDeadlineExceeded at the timeout,
// ErrPoolFull, the alert sent or received). Output may still hold an alert
// to send after a failure.
func (s *Session) HandshakeDone() (bool, error) {
	if !s.est {
		s.mu.Lock()
		done := s.done
		s.notified = false
		s.mu.Unlock()
		if !done {
			return false, nil
		}
		s.establish()
	}
	return true, s.hsErr
}

// establish is the loop's first look after the handshake: from here on the
// loop owns everything and nothing locks.
func (s *Session) establish() {
	s.est = true
	if !s.client {
		// The handshake's, for ClientHelloInfo.Conn. A client keeps them:
		// crypto/tls reads RemoteAddr after the handshake, on the loop,
		// to key a TLS 1.3 session ticket in the ClientSessionCache when
		// the config has no ServerName.
		s.local, s.remote = nil, nil
	}
	if s.hsErr != nil {
		s.rerr, s.werr = s.hsErr, s.hsErr
		return
	}
	s.timer = nil
	reclaim(s.tc, nil) // the handshake's buffers
	st := s.tc.ConnectionState()
	s.t.expect = min(st.Version, tls.VersionTLS12)
	s.t.batch = bufferAccess.ok
	if st.Version == tls.VersionTLS13 {
		s.t.limit = maxCiphertextTLS13
	}
}

// ConnectionState is the tls.Conn's: version, cipher suite, ALPN protocol,
// server name, peer certificates, resumption.
func (s *Session) ConnectionState() tls.ConnectionState {
	if s.tc == nil {
		return tls.ConnectionState{}
	}
	return s.tc.ConnectionState()
}

// Decrypt takes the ciphertext ct the peer sent and appends to dst the
// plaintext of every whole record, stopping at a record boundary once it
// has appended max bytes or more (max <= 0: no limit). What it did not
// decrypt (a partial record, records past max) it keeps; call it again
// with ct empty to go on. ct is not retained.
//
// Before the handshake is over it keeps ct for the handshake and returns
// dst. It returns io.EOF once the peer's close_notify was read (with the
// plaintext before it), and an *Error when the peer broke the protocol:
// the alert crypto/tls sent is then in Output, to send before closing.
// Both are sticky. It also may leave ciphertext in Output that the peer
// asked for (a KeyUpdate's answer): call Output after it.
func (s *Session) Decrypt(dst, ct []byte, max int) ([]byte, error) {
	if s.closed {
		return dst, ErrClosed
	}
	if !s.est {
		s.mu.Lock()
		if !s.done {
			if len(ct) > 0 {
				s.t.hold(ct)
				s.t.wakeLocked()
			}
			s.mu.Unlock()
			if len(ct) > 0 {
				s.start()
			}
			return dst, nil
		}
		s.mu.Unlock()
		s.establish()
	}
	if s.rerr != nil {
		return dst, s.rerr
	}
	t := &s.t
	start := len(dst)
	var err error
	for t.owned && len(t.in) > 0 {
		// Complete the held partial record with the front of ct.
		if need := t.need(); need > 0 {
			if len(ct) == 0 {
				return dst, nil
			}
			k := min(need, len(ct))
			t.hold(ct[:k])
			ct = ct[k:]
			continue
		}
		if dst, err = s.records(dst, start, max); err != nil {
			return dst, err
		}
		if t.ready() { // stopped at max
			t.hold(ct)
			return dst, nil
		}
	}
	if len(t.in) == 0 {
		t.release()
		t.in = ct
	}
	dst, err = s.records(dst, start, max)
	if err == nil {
		t.keep()
	}
	return dst, err
}

// records decrypts the whole records in t.in, up to max plaintext bytes
// (past it by at most one hand-over).
func (s *Session) records(dst []byte, start, max int) ([]byte, error) {
	t := &s.t
	if !t.ready() {
		return dst, nil
	}
	box := lend(s.tc)
	defer reclaim(s.tc, box)
	for {
		// Records already handed over are always decrypted, so that the
		// tls.Conn's buffer is empty when Decrypt returns.
		if !t.batch || rawInputOf(s.tc).Len() == 0 {
			if !t.ready() || (max > 0 && len(dst)-start >= max) {
				return dst, nil
			}
			t.allow = 1 << 30
			if max > 0 {
				t.allow = max - (len(dst) - start)
			}
		}
		dst = slices.Grow(dst, MaxPlaintext)
		n, err := s.tc.Read(dst[len(dst) : len(dst)+MaxPlaintext])
		dst = dst[:len(dst)+n]
		if err != nil && err != errWouldBlock {
			t.release()
			s.rerr = wrapError("read", err)
			if s.rerr != io.EOF {
				s.werr = s.rerr
			}
			return dst, s.rerr
		}
	}
}

// Buffered returns how many ciphertext bytes the session holds: input not
// yet decrypted (before the handshake is over, all of it). A loop pauses
// reading when it passes its cap, as for outbound bytes.
func (s *Session) Buffered() int {
	if !s.est {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	return len(s.t.in)
}

// Pending reports whether Output has ciphertext to hand out.
func (s *Session) Pending() bool {
	if !s.est {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	return len(s.t.out) > 0
}

// Output appends to dst the ciphertext the session produced that no
// Encrypt call returned (handshake flights, alerts, a KeyUpdate's answer)
// and returns it. The loop sends it before anything Encrypt returns later;
// Encrypt and CloseNotify put it first themselves.
func (s *Session) Output(dst []byte) []byte {
	if !s.est {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.notified = false
	}
	dst = append(dst, s.t.out...)
	s.t.out = nil
	return dst
}

// Encrypt appends to dst the records that carry p (preceded by any
// pending Output) and returns it. It fails before the loop has seen the
// handshake succeed, after CloseNotify, and after a fatal error.
func (s *Session) Encrypt(dst, p []byte) ([]byte, error) {
	if err := s.writable(); err != nil {
		return dst, err
	}
	s.t.out = append(dst, s.t.out...)
	_, err := s.tc.Write(p)
	dst, s.t.out = s.t.out, nil
	if err != nil {
		s.werr = wrapError("write", err)
		return dst, s.werr
	}
	return dst, nil
}

func (s *Session) writable() error {
	switch {
	case s.closed:
		return ErrClosed
	case !s.est:
		return ErrHandshakeIncomplete
	case s.werr != nil:
		return s.werr
	case s.shut:
		return &Error{Op: "write", Err: errShutdown}
	}
	return nil
}

var errShutdown = errors.New("close_notify sent")

// CloseNotify appends the close_notify alert to dst (once; preceded by any
// pending Output) and returns it; later Encrypt calls fail. Before the
// handshake succeeded, or after a fatal error, there is none to send and
// it returns dst.
func (s *Session) CloseNotify(dst []byte) []byte {
	if s.writable() != nil {
		return dst
	}
	s.shut = true
	s.t.out = append(dst, s.t.out...)
	_ = s.tc.CloseWrite()
	dst, s.t.out = s.t.out, nil
	return dst
}

// Close releases the session: a handshake still running is ended (its
// goroutine returns to the pool), a queued one leaves the queue, and held
// buffers go back. It sends nothing (CloseNotify does) and is idempotent.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	if !s.est {
		s.pool.cancel(s)
		s.mu.Lock()
		s.closed = true
		s.t.closed = true
		s.t.wakeLocked()
		if s.timer != nil {
			s.timer.Stop()
		}
		s.t.in, s.t.held, s.t.out = nil, nil, nil
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.t.closed = true
	s.t.release()
	s.t.out = nil
	s.tc = nil
	return nil
}
