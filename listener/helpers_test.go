package listener

import (
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitTimeout bounds every wait for the kernel in these tests; it is a
// deadline for a condition, never a delay.
const waitTimeout = 10 * time.Second

func closeAll(ls []*Listener) {
	for _, l := range ls {
		l.Close()
	}
}

func mustListen(t *testing.T, network, address string, cfg Config) *Listener {
	t.Helper()
	l, err := Listen(network, address, cfg)
	if err != nil {
		t.Fatalf("Listen(%q, %q): %v", network, address, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustListenPacket(t *testing.T, network, address string, cfg Config) *Listener {
	t.Helper()
	l, err := ListenPacket(network, address, cfg)
	if err != nil {
		t.Fatalf("ListenPacket(%q, %q): %v", network, address, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustGroup(t *testing.T, network, address string, cpus []int, cfg Config) []*Listener {
	t.Helper()
	ls, err := Group(network, address, cpus, cfg)
	if err != nil {
		t.Fatalf("Group(%q, %q, %v): %v", network, address, cpus, err)
	}
	if len(ls) != len(cpus) {
		closeAll(ls)
		t.Fatalf("Group returned %d listeners for %d cpus", len(ls), len(cpus))
	}
	t.Cleanup(func() { closeAll(ls) })
	return ls
}

func fds(ls []*Listener) []int {
	out := make([]int, len(ls))
	for i, l := range ls {
		out[i] = l.Fd()
	}
	return out
}

// drain waits with poll(2) on every descriptor in fds until n items have
// been taken from them in total or waitTimeout passes, calling take on a
// readable descriptor until it reports there is nothing left (EAGAIN). It
// returns how many items each descriptor gave.
func drain(t *testing.T, fds []int, n int, take func(i, fd int) (bool, error)) []int {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	counts := make([]int, len(fds))
	total := 0
	pfds := make([]unix.PollFd, len(fds))
	for total < n {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("got %d of %d before the deadline (%v per descriptor)", total, n, counts)
		}
		for i, fd := range fds {
			pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		if _, err := unix.Poll(pfds, int(left/time.Millisecond)+1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			t.Fatalf("poll: %v", err)
		}
		for i := range pfds {
			if pfds[i].Revents == 0 {
				continue
			}
			for {
				ok, err := take(i, fds[i])
				if err != nil {
					t.Fatalf("descriptor %d: %v", fds[i], err)
				}
				if !ok {
					break
				}
				counts[i]++
				total++
			}
		}
	}
	return counts
}

// acceptAll accepts and closes n connections across the listening
// descriptors fds and returns, for each, the remote ports of the
// connections it accepted (-1 for a Unix socket's).
func acceptAll(t *testing.T, fds []int, n int) [][]int {
	t.Helper()
	peers := make([][]int, len(fds))
	drain(t, fds, n, func(i, fd int) (bool, error) {
		cfd, sa, err := unix.Accept4(fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return false, nil
		case err != nil:
			return false, err
		}
		unix.Close(cfd)
		peers[i] = append(peers[i], sockaddrPort(sa))
		return true, nil
	})
	return peers
}

func sockaddrPort(sa unix.Sockaddr) int {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return sa.Port
	case *unix.SockaddrInet6:
		return sa.Port
	}
	return -1
}

// pending reports whether any of fds is readable right now.
func pending(t *testing.T, fds []int) bool {
	t.Helper()
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for {
		n, err := unix.Poll(pfds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		return n > 0
	}
}

func dial(t *testing.T, network, address string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout(network, address, waitTimeout)
	if err != nil {
		t.Fatalf("dial %s %s: %v", network, address, err)
	}
	return c
}

// requireIPv6 skips the test unless a socket can be bound to [::1].
func requireIPv6(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no IPv6 sockets: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet6{Addr: [16]byte{15: 1}}); err != nil {
		t.Skipf("IPv6 loopback [::1] is not available: %v", err)
	}
}

func getInt(t *testing.T, fd, level, opt int) int {
	t.Helper()
	v, err := unix.GetsockoptInt(fd, level, opt)
	if err != nil {
		t.Fatalf("getsockopt(%d, %d, %d): %v", fd, level, opt, err)
	}
	return v
}
