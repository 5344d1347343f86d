package tlsconn_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/runtime/tlsconn"
)

// pki is the test binary's CA and certificates (pctest.TestPKI), under
// the names these tests use.
type pki struct {
	pool   *x509.CertPool
	caCert *x509.Certificate
	server tls.Certificate // example.test
	other  tls.Certificate // other.test
	client tls.Certificate
}

func testPKI(t testing.TB) *pki {
	p := pctest.TestPKI()
	return &pki{pool: p.Pool, caCert: p.CA, server: p.Server, other: p.Other, client: p.Client}
}

func serverConfig(t testing.TB) *tls.Config {
	p := testPKI(t)
	return &tls.Config{Certificates: []tls.Certificate{p.server}, NextProtos: []string{"http/1.1"}}
}

func clientConfig(t testing.TB) *tls.Config {
	return &tls.Config{RootCAs: testPKI(t).pool, ServerName: "example.test"}
}

// loop is a stand-in event loop: one goroutine runs posted functions in
// order, as a percore loop runs its tasks.
type loop struct {
	tasks chan func()
	quit  chan struct{}
	done  chan struct{}
}

func newLoop(t testing.TB) *loop {
	l := &loop{tasks: make(chan func(), 1024), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			select {
			case f := <-l.tasks:
				f()
			case <-l.quit:
				return
			}
		}
	}()
	t.Cleanup(func() { close(l.quit); <-l.done })
	return l
}

func (l *loop) post(f func()) {
	select {
	case l.tasks <- f:
	case <-l.quit:
	}
}

// do runs f on the loop and waits for it.
func (l *loop) do(f func()) {
	ch := make(chan struct{})
	l.post(func() { f(); close(ch) })
	select {
	case <-ch:
	case <-l.done:
	}
}

// lconn is a connection on the stand-in loop: a Session between the loop
// and a wire (one end of a net.Pipe, or a socket), with a reader goroutine
// that posts what arrives and a writer goroutine that sends what the loop
// queues, as a loop's receive and send operations would.
type lconn struct {
	l      *loop
	s      *tlsconn.Session
	wire   net.Conn
	budget int
	onData func(c *lconn, p []byte) // on the loop
	onOpen func(c *lconn)           // on the loop, handshake succeeded

	out     chan []byte
	scratch []byte

	mu      sync.Mutex // the fields below, read by tests
	est     bool
	hsErr   error
	err     error // first read error (io.EOF at close_notify)
	closed  bool
	ended   chan struct{}
	endOnce sync.Once
}

func serve(t testing.TB, l *loop, wire net.Conn, mk func(tlsconn.Options) *tlsconn.Session, onData func(*lconn, []byte)) *lconn {
	c := &lconn{l: l, wire: wire, onData: onData, out: make(chan []byte, 256), ended: make(chan struct{})}
	l.do(func() {
		c.s = mk(tlsconn.Options{Notify: func() { l.post(c.poll) }, RemoteAddr: wire.RemoteAddr(), LocalAddr: wire.LocalAddr()})
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // writer
		defer wg.Done()
		for b := range c.out {
			if _, err := wire.Write(b); err != nil {
				break
			}
		}
		for range c.out {
		}
	}()
	go func() { // reader
		defer wg.Done()
		for {
			buf := make([]byte, 64<<10)
			n, err := wire.Read(buf)
			if n > 0 {
				b := buf[:n]
				l.post(func() { c.input(b) })
			}
			if err != nil {
				l.post(func() { c.eof(err) })
				return
			}
		}
	}()
	l.do(c.poll) // a client session may have its ClientHello out already
	t.Cleanup(func() {
		l.do(func() { c.close(false) })
		wire.Close()
		wg.Wait()
	})
	return c
}

func (c *lconn) send(b []byte) {
	if len(b) > 0 && !c.closed {
		c.out <- b
	}
}

func (c *lconn) input(ct []byte) {
	if c.closed {
		return
	}
	plain, err := c.s.Decrypt(c.scratch[:0], ct, c.budget)
	c.scratch = plain[:0]
	c.send(c.s.Output(nil))
	if len(plain) > 0 && c.onData != nil {
		c.onData(c, append([]byte(nil), plain...))
	}
	if err != nil {
		c.fail(err)
		return
	}
	if c.s.Buffered() > 0 && c.budget > 0 {
		// Records held back by the budget: go on next turn.
		c.l.post(func() { c.input(nil) })
	}
}

func (c *lconn) poll() {
	if c.closed {
		return
	}
	c.send(c.s.Output(nil))
	done, err := c.s.HandshakeDone()
	c.mu.Lock()
	first := done && !c.est && c.hsErr == nil
	if first {
		if err != nil {
			c.hsErr = err
		} else {
			c.est = true
		}
	}
	c.mu.Unlock()
	if !first {
		return
	}
	if err != nil {
		c.send(c.s.Output(nil))
		c.close(false)
		return
	}
	if c.onOpen != nil {
		c.onOpen(c)
	}
	c.input(nil) // records that came with the end of the handshake
}

func (c *lconn) write(p []byte) error {
	out, err := c.s.Encrypt(nil, p)
	c.send(out)
	return err
}

func (c *lconn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	if !c.est && c.hsErr == nil {
		// Decrypt saw the handshake's end before a Notify did.
		if done, hsErr := c.s.HandshakeDone(); done && hsErr != nil {
			c.hsErr = hsErr
		}
	}
	c.mu.Unlock()
	if !errors.Is(err, io.EOF) {
		c.close(false)
	}
}

func (c *lconn) eof(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.close(false)
}

// close sends close_notify when notify is set, then ends the connection.
func (c *lconn) close(notify bool) {
	if c.closed {
		return
	}
	if notify {
		c.send(c.s.CloseNotify(nil))
	}
	c.closed = true
	c.s.Close()
	close(c.out)
	c.endOnce.Do(func() { close(c.ended) })
}

func (c *lconn) state() (est bool, hsErr, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.est, c.hsErr, c.err
}

// waitEnd waits for the connection to close on the loop.
func (c *lconn) waitEnd(t testing.TB) {
	t.Helper()
	select {
	case <-c.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("connection did not end")
	}
}

func newPool(t testing.TB, cfg tlsconn.PoolConfig) *tlsconn.Pool {
	p := tlsconn.NewPool(cfg)
	t.Cleanup(func() { p.Close() })
	return p
}

// pipe returns an in-memory wire: the loop's end and the peer's.
func pipe() (loopEnd, peerEnd net.Conn) {
	a, b := net.Pipe()
	return a, b
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// handshakePair runs a client and a server session against each other in
// memory, the test's goroutine carrying the bytes, until both are done. It
// waits for a session's Notify between its looks (a goroutine that polled
// without waiting would starve the pool's lowered threads on its CPU).
func handshakePair(t testing.TB, pool *tlsconn.Pool, scfg, ccfg *tls.Config) (srv, cli *tlsconn.Session) {
	news := make(chan struct{}, 1)
	notify := func() {
		select {
		case news <- struct{}{}:
		default:
		}
	}
	return handshakeWith(t, pool, scfg, ccfg, notify, news)
}

// handshakeWith is handshakePair with the sessions' Notify given: one
// that sends on news (without blocking) for each call.
func handshakeWith(t testing.TB, pool *tlsconn.Pool, scfg, ccfg *tls.Config, notify func(), news <-chan struct{}) (srv, cli *tlsconn.Session) {
	srv = tlsconn.Server(scfg, tlsconn.Options{Pool: pool, Notify: notify})
	cli = tlsconn.Client(ccfg, tlsconn.Options{Pool: pool, Notify: notify})
	for i := 0; ; i++ {
		out := cli.Output(nil)
		if len(out) > 0 {
			if _, err := srv.Decrypt(nil, out, 0); err != nil {
				t.Fatal(err)
			}
		}
		out = srv.Output(nil)
		if len(out) > 0 {
			if _, err := cli.Decrypt(nil, out, 0); err != nil {
				t.Fatal(err)
			}
		}
		sd, serr := srv.HandshakeDone()
		cd, cerr := cli.HandshakeDone()
		if serr != nil || cerr != nil {
			t.Fatal(serr, cerr)
		}
		if sd && cd && !srv.Pending() && !cli.Pending() {
			return
		}
		if i > 1_000 {
			t.Fatal("handshake did not finish")
		}
		select {
		case <-news:
		case <-time.After(10 * time.Second):
			t.Fatal("handshake did not finish: no news from the pool")
		}
	}
}

// dialTLS dials addr with a crypto/tls client, bounded in time.
func dialTLS(addr string, cfg *tls.Config) (*tls.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
}
