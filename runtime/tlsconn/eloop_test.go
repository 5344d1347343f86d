//go:build linux

package tlsconn_test

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/runtime/tlsconn"
)

// eloop is a test-only event loop over real loopback sockets: one
// goroutine, epoll, non-blocking descriptors, one read buffer for all
// connections, and a Session per connection, wired the way the runtime's
// integration will wire it (docs/decisions/0033-tls-engine.md). It exists
// so that the package can be measured and tested with real sockets and
// peers nobody here wrote (openssl s_client) without the runtime.
type eloop struct {
	t     testing.TB
	epfd  int
	evfd  int
	lnfd  int
	addr  string
	pool  *tlsconn.Pool
	cfg   *tls.Config
	conns map[int]*econn
	// onData answers plaintext; nil echoes.
	onData func(c *econn, p []byte)

	buf, scratch []byte

	mu    sync.Mutex
	tasks []func()
	quit  bool
	done  chan struct{}

	estMu       sync.Mutex
	established int
	failures    []error
	turns       []time.Duration // how long each turn's work took (when timing)
	timing      bool
}

type econn struct {
	l   *eloop
	fd  int
	s   *tlsconn.Session
	out []byte // ciphertext the socket did not take yet
	est bool
}

func newEloop(t testing.TB, cfg *tls.Config, pool *tlsconn.Pool) *eloop {
	l := &eloop{t: t, cfg: cfg, pool: pool, conns: map[int]*econn{}, buf: make([]byte, 64<<10), done: make(chan struct{})}
	var err error
	l.lnfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(l.lnfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(l.lnfd, 4096); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(l.lnfd)
	l.addr = (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}).String()
	if l.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if l.evfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	l.watch(l.lnfd, unix.EPOLLIN, unix.EPOLL_CTL_ADD)
	l.watch(l.evfd, unix.EPOLLIN, unix.EPOLL_CTL_ADD)
	go l.run()
	t.Cleanup(l.stop)
	return l
}

func (l *eloop) watch(fd int, ev uint32, op int) {
	if err := unix.EpollCtl(l.epfd, op, fd, &unix.EpollEvent{Events: ev, Fd: int32(fd)}); err != nil {
		panic(err)
	}
}

// post runs f on the loop; safe from any goroutine.
func (l *eloop) post(f func()) {
	l.mu.Lock()
	l.tasks = append(l.tasks, f)
	l.mu.Unlock()
	var one = [8]byte{1}
	unix.Write(l.evfd, one[:])
}

func (l *eloop) stop() {
	l.mu.Lock()
	l.quit = true
	l.mu.Unlock()
	l.post(func() {})
	<-l.done
	for fd, c := range l.conns {
		c.s.Close()
		unix.Close(fd)
	}
	unix.Close(l.lnfd)
	unix.Close(l.evfd)
	unix.Close(l.epfd)
}

func (l *eloop) run() {
	defer close(l.done)
	events := make([]unix.EpollEvent, 256)
	for {
		n, err := unix.EpollWait(l.epfd, events, -1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			panic(err)
		}
		var began time.Time
		if l.timing {
			began = time.Now()
		}
		for _, ev := range events[:max(n, 0)] {
			fd := int(ev.Fd)
			switch fd {
			case l.lnfd:
				l.accept()
			case l.evfd:
				var b [8]byte
				unix.Read(l.evfd, b[:])
				l.mu.Lock()
				tasks, quit := l.tasks, l.quit
				l.tasks = nil
				l.mu.Unlock()
				for _, f := range tasks {
					f()
				}
				if quit {
					return
				}
			default:
				c := l.conns[fd]
				if c == nil {
					continue
				}
				if ev.Events&unix.EPOLLOUT != 0 {
					c.flush()
				}
				if ev.Events&(unix.EPOLLIN|unix.EPOLLHUP|unix.EPOLLERR) != 0 && l.conns[fd] != nil {
					c.readable()
				}
			}
		}
		if l.timing {
			d := time.Since(began)
			l.estMu.Lock()
			l.turns = append(l.turns, d)
			l.estMu.Unlock()
		}
	}
}

func (l *eloop) accept() {
	for {
		fd, sa, err := unix.Accept4(l.lnfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return
		}
		c := &econn{l: l, fd: fd}
		var remote net.Addr
		if a, ok := sa.(*unix.SockaddrInet4); ok {
			remote = &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
		}
		c.s = tlsconn.Server(l.cfg, tlsconn.Options{Pool: l.pool, Notify: func() { l.post(c.poll) }, RemoteAddr: remote})
		l.conns[fd] = c
		l.watch(fd, unix.EPOLLIN|unix.EPOLLRDHUP, unix.EPOLL_CTL_ADD)
	}
}

func (c *econn) readable() {
	n, err := unix.Read(c.fd, c.l.buf)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return
	case err != nil || n == 0:
		c.close()
		return
	}
	c.input(c.l.buf[:n])
}

func (c *econn) input(ct []byte) {
	l := c.l
	plain, err := c.s.Decrypt(l.scratch[:0], ct, 0)
	l.scratch = plain[:0]
	c.send(c.s.Output(nil))
	if len(plain) > 0 {
		if l.onData != nil {
			l.onData(c, plain)
		} else {
			c.write(plain)
		}
	}
	if err != nil {
		c.send(c.s.Output(nil))
		c.close()
	}
}

func (c *econn) poll() {
	if c.l.conns[c.fd] != c {
		return
	}
	c.send(c.s.Output(nil))
	done, err := c.s.HandshakeDone()
	if !done || c.est {
		return
	}
	c.est = true
	c.l.estMu.Lock()
	if err != nil {
		c.l.failures = append(c.l.failures, err)
	} else {
		c.l.established++
	}
	c.l.estMu.Unlock()
	if err != nil {
		c.close()
		return
	}
	c.input(nil)
}

func (c *econn) write(p []byte) {
	out, err := c.s.Encrypt(nil, p)
	c.send(out)
	if err != nil {
		c.close()
	}
}

func (c *econn) send(b []byte) {
	if len(b) == 0 {
		return
	}
	if len(c.out) > 0 {
		c.out = append(c.out, b...)
		return
	}
	n, err := unix.Write(c.fd, b)
	if err != nil && !errors.Is(err, unix.EAGAIN) {
		return // the read side sees the reset
	}
	if n < len(b) {
		c.out = append([]byte(nil), b[max(n, 0):]...)
		c.l.watch(c.fd, unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLOUT, unix.EPOLL_CTL_MOD)
	}
}

func (c *econn) flush() {
	n, err := unix.Write(c.fd, c.out)
	if err != nil && !errors.Is(err, unix.EAGAIN) {
		return
	}
	c.out = c.out[max(n, 0):]
	if len(c.out) == 0 {
		c.out = nil
		c.l.watch(c.fd, unix.EPOLLIN|unix.EPOLLRDHUP, unix.EPOLL_CTL_MOD)
	}
}

func (c *econn) close() {
	if c.l.conns[c.fd] != c {
		return
	}
	delete(c.l.conns, c.fd)
	c.s.Close()
	unix.Close(c.fd)
}

// count returns the established connections and the handshake failures.
func (l *eloop) count() (int, []error) {
	l.estMu.Lock()
	defer l.estMu.Unlock()
	return l.established, append([]error(nil), l.failures...)
}
