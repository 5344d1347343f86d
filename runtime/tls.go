//go:build linux

package runtime

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/percore/percore/internal/limit"
	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/runtime/tlsconn"
)

// TLS under Conn (docs/decisions/0047-tls-under-conn.md). A connection of
// a tls:// listener, or one Loop.DialTLS opened, carries a tlsconn.Session
// (Conn.tlsState): its handshake runs on the runtime's handshake pool, off the
// loop, and the loop sends what it wrote when the session's Notify (a
// posted function) says so. Once the handshake succeeded, OnOpen runs, and
// from then on the loop decrypts what the peer sent before OnData sees it
// (tls_io.go), and encrypts what the handler writes (Write, Writev,
// Reserve and Commit) into the outbound queue. The handler sees plaintext
// only. A handshake that fails is counted and closes the connection (with
// the alert crypto/tls sent) without OnOpen or OnClose; a dial's done
// function gets its error.

// DefaultMaxHandshakes is Config.MaxHandshakes' default: the connections
// a loop keeps in their TLS handshake before it stops accepting.
const DefaultMaxHandshakes = 128

// tlsMaxEarly bounds the ciphertext a connection buffers before the loop
// has seen its handshake end (a client may send its first request right
// after its Finished): past it reading pauses until the handshake ends.
const tlsMaxEarly = 256 << 10

// connTLS is a TLS connection's state; the loop's own.
type connTLS struct {
	s      *tlsconn.Session
	cfg    *tls.Config // a dial's, until it connects
	est    bool        // the handshake succeeded and the loop saw it: OnOpen ran
	ended  bool        // the handshake ended (counted, the loop's gauge moved)
	paused bool        // reading paused by the early-input bound, not by the handler
	err    error       // why the connection closes: a TLS error, for OnClose or done
	res    []byte      // Reserve's plaintext room (a pooled buffer), until Commit
	resN   int
	out    outPlain // the outbound queue in plaintext (tls_io.go)
}

// loopTLS is a loop's TLS state.
type loopTLS struct {
	handshaking int         // connections in their handshake (the gauge, and the accept hold)
	plain       []byte      // decrypted bytes for one OnData (valid during it)
	wire        []byte      // ciphertext on its way into the queue: Output, close_notify, a gathered write
	dialCfg     *tls.Config // the configuration of the DialTLS being set up, for startDial
}

// runtimeTLS is the runtime's handshake pool, made on first use.
type runtimeTLS struct {
	mu     sync.Mutex
	cfg    tlsconn.PoolConfig // Config.TLSPool as setupTLSPool settled it
	logger *slog.Logger       // Config.Logger
	pool   *tlsconn.Pool
}

func (r *runtimeTLS) get() *tlsconn.Pool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pool == nil {
		if r.logger != nil {
			logSchedFallback(r.logger, r.cfg.Sched) // a runtime that only dials: probed here
		}
		r.pool = tlsconn.NewPool(r.cfg)
	}
	return r.pool
}

// close ends the handshakes still running, once the loops have stopped,
// and takes back its raise of GOMAXPROCS (dropProcs: the process's
// record puts it back when no other runtime's raise is live).
func (r *runtimeTLS) close() {
	r.mu.Lock()
	p := r.pool
	r.mu.Unlock()
	if p != nil {
		_ = p.Close()
	}
	dropProcs(r)
}

// TLSPoolStats returns the handshake pool's counters: the runtime's
// handshakes at once, waiting, and how they ended (zero before the first
// TLS connection). The per-loop counts are in Stats (TLSHandshakes,
// TLSHandshakeErrors, TLSHandshakeTimeouts, TLSHandshaking). It is safe
// for concurrent use.
func (rt *Runtime) TLSPoolStats() tlsconn.PoolStats {
	rt.tls.mu.Lock()
	p := rt.tls.pool
	rt.tls.mu.Unlock()
	if p == nil {
		return tlsconn.PoolStats{}
	}
	return p.Stats()
}

// handshakePool returns the pool the loop's handshakes run on: the
// runtime's (a loop without one, in the kernel-free tests, has none).
func (l *Loop) handshakePool() *tlsconn.Pool {
	if l.rt == nil {
		return nil
	}
	return l.rt.tls.get()
}

// splitTLSScheme maps a tls:// listen address to its tcp:// one and
// reports whether it was TLS.
func splitTLSScheme(a string) (string, bool) {
	for _, n := range [...]string{"tls", "tls4", "tls6"} {
		if rest, ok := strings.CutPrefix(a, n+"://"); ok {
			return "tcp" + strings.TrimPrefix(n, "tls") + "://" + rest, true
		}
	}
	return a, false
}

// tlsFileName reports whether the name of an inherited socket marks it
// TLS: the name Runtime.ListenerFiles gives it (Listener.String:
// "tls://127.0.0.1:7000", "tls6://[::1]:7000"), that name after
// HandoverEnv replaced its colons ("tls_//127.0.0.1_7000", as
// LISTEN_FDNAMES carries it), or a systemd FileDescriptorName= (which
// cannot hold a colon) that is "tls" or begins with "tls-" ("tls-web").
// A name ending in ".socket" is systemd's default (the unit's name, when
// FileDescriptorName= is not set), not a choice: tls-proxy.socket may
// well be plain, so it does not count.
func tlsFileName(name string) bool {
	if name == "tls" || strings.HasPrefix(name, "tls-") && !strings.HasSuffix(name, ".socket") {
		return true
	}
	for _, n := range [...]string{"tls", "tls4", "tls6"} {
		if strings.HasPrefix(name, n+"://") || strings.HasPrefix(name, n+"_//") {
			return true
		}
	}
	return false
}

// markInheritedTLS makes s, the inherited socket of the file named name,
// a TLS listener when the name says so (tlsFileName): so a tls://
// listener handed over in a restart stays TLS in the new process, served
// with its Config.TLS. TLS is served on TCP only: a TLS name on another
// socket is an error.
func markInheritedTLS(s *listenSpec, name string) error {
	if !tlsFileName(name) {
		return nil
	}
	if s.info.Network != "tcp" {
		return fmt.Errorf("named %q (TLS) but a %s socket: TLS is served on TCP listeners only", name, s.info.Network)
	}
	s.info.TLS = true
	return nil
}

// checkTLSListeners reports a Config.TLS without a TLS listener, or a TLS
// listener without Config.TLS.
func checkTLSListeners(cfg Config, specs []*listenSpec) error {
	any := false
	for _, s := range specs {
		if s.info.TLS {
			any = true
			if cfg.TLS == nil {
				return fmt.Errorf("percore: listener %s is TLS: Config.TLS is nil", s.info)
			}
		}
	}
	if cfg.TLS != nil && !any {
		return errors.New("percore: Config.TLS is set but no listener is TLS (write its address as tls://host:port)")
	}
	return nil
}

// tlsOptions wires a session to c's loop: Notify posts tlsNotified.
func (l *Loop) tlsOptions(c *Conn) tlsconn.Options {
	local, remote := handshakeAddrs(c)
	return tlsconn.Options{
		Pool:       l.handshakePool(),
		Notify:     func() { _ = l.post(func() { l.tlsNotified(c) }, true) },
		LocalAddr:  local,
		RemoteAddr: remote,
	}
}

// handshakeAddrs returns c's addresses for crypto/tls's
// ClientHelloInfo.Conn: the ones c has, else the kernel's, without
// keeping them in c. The session drops them once the handshake ended, so
// an idle TLS connection whose handler never asked for its addresses does
// not hold two (110 B); a handler that asks gets them from the kernel then.
func handshakeAddrs(c *Conn) (local, remote net.Addr) {
	if c.side != nil {
		local, remote = c.side.laddr, c.side.raddr
	}
	if c.fd < 0 {
		return local, remote
	}
	if local == nil {
		local, _ = sys.LocalAddr(int(c.fd), false)
	}
	if remote == nil {
		remote, _ = sys.PeerAddr(int(c.fd))
	}
	return local, remote
}

// tlsAccepted starts the server handshake of c, accepted from a TLS
// listener. OnOpen waits for its end.
func (l *Loop) tlsAccepted(c *Conn) {
	t := &connTLS{}
	c.more().tls = t
	c.opened = l.stamp()
	t.s = tlsconn.Server(l.cfg.TLS, l.tlsOptions(c))
	l.handshakeBegan()
}

// tlsConnected starts the client handshake of c, a DialTLS that connected.
// c.dial stays until the handshake ends, so that a failure reaches done.
func (l *Loop) tlsConnected(c *Conn) {
	t := c.tlsState()
	c.opened = l.stamp()
	t.s = tlsconn.Client(t.cfg, l.tlsOptions(c))
	t.cfg = nil
	l.handshakeBegan()
	if done, err := t.s.HandshakeDone(); done { // the pool refused it
		l.tlsEnded(c, err)
	}
}

func (l *Loop) handshakeBegan() {
	l.tls.handshaking++
	l.cnt[sTLSHandshaking] = uint64(l.tls.handshaking)
	if n := limit.OrDefault(l.cfg.MaxHandshakes, DefaultMaxHandshakes); n > 0 && l.tls.handshaking >= n {
		l.hold(holdTLS)
	}
}

// handshakeEnded counts the end of c's handshake, once, with err (nil: it
// succeeded).
func (l *Loop) handshakeEnded(c *Conn, err error) {
	t := c.tlsState()
	if t.ended {
		return
	}
	t.ended = true
	l.tls.handshaking--
	l.cnt[sTLSHandshaking] = uint64(l.tls.handshaking)
	switch {
	case err == nil:
		l.cnt[sTLSHandshakes]++
	case errors.Is(err, os.ErrDeadlineExceeded):
		l.cnt[sTLSHandshakeTimeouts]++
	default:
		l.cnt[sTLSHandshakeErrors]++
	}
	if n := limit.OrDefault(l.cfg.MaxHandshakes, DefaultMaxHandshakes); n <= 0 || l.tls.handshaking < n {
		l.unhold(holdTLS)
	}
}

// tlsNotified is the session's Notify on the loop: it sends what the
// handshake wrote and looks whether it ended.
func (l *Loop) tlsNotified(c *Conn) {
	t := c.tlsState()
	if c.closed() || t == nil || t.s == nil {
		return
	}
	l.tlsFlush(c)
	if t.est || t.ended {
		return
	}
	if done, err := t.s.HandshakeDone(); done && l.tlsEnded(c, err) && !c.closed() {
		l.tlsDeliver(c, nil)
	}
}

// tlsEnded handles the end of c's handshake: on success it opens c (OnOpen,
// a dial's done function) and reports true; on failure it sends the alert
// crypto/tls wrote, closes c and reports false.
func (l *Loop) tlsEnded(c *Conn, err error) bool {
	t := c.tlsState()
	l.handshakeEnded(c, err)
	if err != nil {
		alert := ""
		var te *tlsconn.Error
		if errors.As(err, &te) {
			alert = te.AlertName()
		}
		l.log.Debug("percore: tls handshake failed", "loop", l.id, "remote", addrString(c.RemoteAddr()),
			"alert", alert, "err", err)
		t.err = c.opError("tls handshake", err)
		l.tlsFlush(c)
		if te != nil && !te.Sent && !te.Received && c.dialing() == nil {
			l.tlsRefuse(c, err)
		}
		c.Close() // once the alert is sent
		return false
	}
	t.est = true
	if t.paused {
		t.paused = false
		c.ResumeRead()
	}
	if d := c.dialing(); d != nil {
		c.setDial(nil)
		l.cnt[sDials]++
		l.opened(c)
		if d.done != nil && !c.closed() {
			l.safely("dial done function", func() { d.done(c, nil) })
		}
	} else {
		l.opened(c)
	}
	l.sweepLate(c)
	return true
}

// tlsRefuse sends the alert crypto/tls does not send when the first
// record is not TLS at all (an HTTP request to a TLS port): a plaintext
// fatal alert, unexpected_message, or protocol_version for a record of
// another version.
func (l *Loop) tlsRefuse(c *Conn, err error) {
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) || !c.writable() {
		return
	}
	alert := byte(10) // unexpected_message
	if strings.Contains(rh.Msg, "version") {
		alert = 70 // protocol_version
	}
	l.d.write(c, []byte{21, 3, 1, 0, 2, 2, alert})
	c.tlsState().out.add(c.out.buffered(), 7, 7)
	if c.out.buffered() > 0 {
		l.queued(c)
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// tlsPeerEOF handles the end of the peer's stream before c's handshake
// ended: the handshake fails (the pool's goroutine is told by Close). It
// reports whether it handled the end.
func (l *Loop) tlsPeerEOF(c *Conn) bool {
	t := c.tlsState()
	if t.est {
		return false
	}
	l.closeConn(c, nil)
	return true
}

// tlsClosing releases c's session when c closes, counts a handshake that
// never ended, and returns the error to report: err, or the TLS error
// that made c close.
func (l *Loop) tlsClosing(c *Conn, err error) error {
	t := c.tlsState()
	if !t.ended && t.s != nil {
		herr := err
		if herr == nil {
			herr = net.ErrClosed
		}
		l.handshakeEnded(c, herr)
	}
	if t.s != nil {
		_ = t.s.Close()
	}
	if t.res != nil {
		l.putBuf(t.res)
		t.res, t.resN = nil, 0
	}
	t.out.reset()
	if err == nil {
		err = t.err
	}
	return err
}

// TLS returns the connection's TLS state (version, cipher suite, ALPN
// protocol, server name, peer certificates, resumption) once its handshake
// succeeded, from OnOpen on, until it closes; nil for a connection that is
// not TLS, or closed.
func (c *Conn) TLS() *tls.ConnectionState {
	t := c.tlsState()
	if t == nil || !t.est || c.closed() {
		return nil
	}
	st := t.s.ConnectionState()
	return &st
}

// DialTLS is Dial with TLS: once connected, the client handshake runs
// with cfg (on the handshake pool, off the loop), and the connection opens
// (OnOpen, then done) once it succeeded; a handshake that fails closes the
// connection and done gets the error. As with tls.Dial, an empty
// cfg.ServerName is the address's IP (which verification then checks
// against the certificate's IP addresses); a Unix address needs one. It
// must be called on the loop's thread.
func (l *Loop) DialTLS(address string, cfg *tls.Config, h Handler, done func(*Conn, error)) error {
	if cfg == nil {
		return &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("tls: nil config")}
	}
	if l.handshakePool() == nil {
		return &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("tls: the loop has no runtime")}
	}
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		host := address
		if _, rest, ok := strings.Cut(address, "://"); ok {
			host = rest
		}
		ap, err := netip.ParseAddrPort(host)
		if err != nil {
			return &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("tls: %q: set ServerName or InsecureSkipVerify: %w", address, err)}
		}
		cfg = cfg.Clone()
		cfg.ServerName = ap.Addr().String()
	}
	l.tls.dialCfg = cfg
	defer func() { l.tls.dialCfg = nil }()
	return l.Dial(address, h, done)
}

// tlsDialing marks the connection startDial just made as a DialTLS's.
func (l *Loop) tlsDialing(c *Conn) {
	if cfg := l.tls.dialCfg; cfg != nil {
		c.more().tls = &connTLS{cfg: cfg}
		l.tls.dialCfg = nil
	}
}

// errTLSSendFile is SendFile's error on a TLS connection: the file's bytes
// would have to be read and encrypted on the loop (with kernel TLS they
// would not, docs/decisions/0048-kernel-tls.md). Write them instead.
var errTLSSendFile = fmt.Errorf("a TLS connection cannot send a file without kernel TLS: %w", errors.ErrUnsupported)
