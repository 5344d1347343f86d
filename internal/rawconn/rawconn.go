//go:build linux

// Package rawconn is a test client: a blocking TCP socket driven with raw
// system calls, so that the client side of a round trip allocates nothing
// and costs only the kernel's work. Allocation tests and benchmarks of the
// runtime use it, so that what they count is the server's.
package rawconn

import (
	"fmt"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// Conn is one connected socket.
type Conn struct {
	fd  int
	buf []byte
}

// Dial connects to the IPv4 address addr with TCP_NODELAY and 10-second
// send and receive timeouts; the socket is closed at the test's cleanup.
func Dial(tb testing.TB, addr net.Addr) *Conn {
	tb.Helper()
	a := addr.(*net.TCPAddr)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	sa := &unix.SockaddrInet4{Port: a.Port}
	copy(sa.Addr[:], a.IP.To4())
	if err := unix.Connect(fd, sa); err != nil {
		tb.Fatal(err)
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	tv := unix.Timeval{Sec: 10}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	return &Conn{fd: fd, buf: make([]byte, 1<<20)}
}

// RoundTrip sends the pieces, one write each, and reads back as many bytes
// as they hold in total (their content is not checked).
func (c *Conn) RoundTrip(pieces ...[]byte) error {
	total := 0
	for _, p := range pieces {
		total += len(p)
		for off := 0; off < len(p); {
			n, err := unix.Write(c.fd, p[off:])
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			off += n
		}
	}
	for got := 0; got < total; {
		n, err := unix.Read(c.fd, c.buf[:min(len(c.buf), total-got)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("eof after %d of %d bytes", got, total)
		}
		got += n
	}
	return nil
}

// PipelineAllocs returns the allocations per round of one (a request
// padded to its response's length, which RoundTrip reads back) sent alone
// and then 16 times pipelined in two pieces, after 200 rounds of warm-up;
// runs is testing.AllocsPerRun's count. It fails tb on an error.
func (c *Conn) PipelineAllocs(tb testing.TB, one []byte, runs int) float64 {
	tb.Helper()
	pipelined := make([]byte, 0, 16*len(one))
	for range 16 {
		pipelined = append(pipelined, one...)
	}
	split := min(100, len(pipelined)-1)
	for range 200 {
		if err := c.RoundTrip(one); err != nil {
			tb.Fatal(err)
		}
	}
	var err error
	allocs := testing.AllocsPerRun(runs, func() {
		if e := c.RoundTrip(one); e != nil {
			err = e
		}
		if e := c.RoundTrip(pipelined[:split], pipelined[split:]); e != nil {
			err = e
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	return allocs
}
