package ring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpSocket returns a blocking TCP socket bound to 127.0.0.1 port 0 that the
// test's cleanup closes, and its port.
func tcpSocket(t *testing.T) (fd, port int) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind 127.0.0.1:0: %v", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	return fd, sa.(*unix.SockaddrInet4).Port
}

// rawInet4 returns 127.0.0.1:port as a heap sockaddr for PrepareConnect.
func rawInet4(port int) *unix.RawSockaddrInet4 {
	sa := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte{127, 0, 0, 1}}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], uint16(port))
	return sa
}

func TestAcceptMultishotAndConnect(t *testing.T) {
	const (
		acceptData = 1
		connData   = 2
		cancelData = 3
		clients    = 4
	)
	r := mustOpen(t, Config{Entries: 8})
	lfd, port := tcpSocket(t)
	if err := unix.Listen(lfd, clients); err != nil {
		t.Fatalf("listen: %v", err)
	}
	if err := r.PrepareAcceptMultishot(lfd, acceptData); err != nil {
		t.Fatal(err)
	}
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	q := newReaper(t, r)
	for i := range clients {
		cfd, _ := tcpSocket(t)
		sa := rawInet4(port)
		if err := r.PrepareConnect(cfd, unsafe.Pointer(sa), unix.SizeofSockaddrInet4, connData); err != nil {
			t.Fatal(err)
		}
		got := q.byData(2)
		runtime.KeepAlive(sa)
		wantRes(t, "connect", got[connData], 0)
		acc := got[acceptData]
		if acc.Res < 0 {
			t.Fatalf("accept %d: %s", i, res(acc.Res))
		}
		afd := int(acc.Res)
		if !acc.More() {
			t.Errorf("accept %d left the multishot accept disarmed (flags %#x)", i, acc.Flags)
		}
		peer, err := unix.Getpeername(afd)
		local, err2 := unix.Getsockname(cfd)
		unix.Close(afd)
		if err != nil || err2 != nil {
			t.Fatalf("accepted descriptor %d: getpeername %v, client getsockname %v", afd, err, err2)
		}
		if peer.(*unix.SockaddrInet4).Port != local.(*unix.SockaddrInet4).Port {
			t.Errorf("accepted connection from port %d, client is on port %d",
				peer.(*unix.SockaddrInet4).Port, local.(*unix.SockaddrInet4).Port)
		}
	}
	if err := r.PrepareCancel(acceptData, cancelData); err != nil {
		t.Fatal(err)
	}
	got := q.byData(2)
	wantRes(t, "cancel of the multishot accept", got[cancelData], 1)
	wantRes(t, "cancelled accept", got[acceptData], errno(unix.ECANCELED))
	if got[acceptData].More() {
		t.Errorf("cancelled accept still carries More")
	}
}

func TestAccept(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	lfd, port := tcpSocket(t)
	if err := unix.Listen(lfd, 1); err != nil {
		t.Fatalf("listen: %v", err)
	}
	if err := r.PrepareAccept(lfd, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	cfd, _ := tcpSocket(t)
	if err := unix.Connect(cfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}); err != nil {
		t.Fatalf("connect: %v", err)
	}
	c := newReaper(t, r).one()
	if c.Res < 0 {
		t.Fatalf("accept: %s", res(c.Res))
	}
	afd := int(c.Res)
	defer unix.Close(afd)
	if c.More() {
		t.Errorf("a single accept carries More (flags %#x)", c.Flags)
	}
	flags, err := unix.FcntlInt(uintptr(afd), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK == 0 {
		t.Errorf("accepted descriptor flags %#x, %v: want O_NONBLOCK", flags, err)
	}
	if fdFlags, err := unix.FcntlInt(uintptr(afd), unix.F_GETFD, 0); err != nil || fdFlags&unix.FD_CLOEXEC == 0 {
		t.Errorf("accepted descriptor fd flags %#x, %v: want FD_CLOEXEC", fdFlags, err)
	}
}

func TestConnectRefused(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	// A bound socket that does not listen refuses connections, and
	// holding it keeps the port from being reused meanwhile.
	_, port := tcpSocket(t)
	cfd, _ := tcpSocket(t)
	sa := rawInet4(port)
	if err := r.PrepareConnect(cfd, unsafe.Pointer(sa), unix.SizeofSockaddrInet4, 1); err != nil {
		t.Fatal(err)
	}
	c := newReaper(t, r).one()
	runtime.KeepAlive(sa)
	wantRes(t, "connect to a port nobody listens on", c, errno(unix.ECONNREFUSED))
}

// readAll reads from the blocking socket fd until end of stream.
func readAll(t *testing.T, fd int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 256)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatalf("read %d: %v", fd, err)
		}
		if n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
	}
}

func TestSocketOps(t *testing.T) {
	tests := []struct {
		name string
		// run prepares operations on p[0], returns the bytes it sent and
		// checks its completions.
		run func(t *testing.T, r *Ring, q *reaper, p *[2]int) []byte
	}{
		{"send", func(t *testing.T, r *Ring, q *reaper, p *[2]int) []byte {
			msg := []byte("hello, ring")
			if err := r.PrepareSend(p[0], msg, 1); err != nil {
				t.Fatal(err)
			}
			wantRes(t, "send", q.one(), int32(len(msg)))
			return msg
		}},
		{"sendmsg gather", func(t *testing.T, r *Ring, q *reaper, p *[2]int) []byte {
			parts := [][]byte{[]byte("gath"), []byte("ered "), []byte("send")}
			iov := onHeap(t, make([]unix.Iovec, len(parts)))
			for i, part := range parts {
				iov[i].Base = &part[0]
				iov[i].SetLen(len(part))
			}
			msg := onHeap(t, &unix.Msghdr{Iov: &iov[0]})
			msg.SetIovlen(len(iov))
			if err := r.PrepareSendmsg(p[0], msg, 1); err != nil {
				t.Fatal(err)
			}
			c := q.one()
			runtime.KeepAlive(msg)
			runtime.KeepAlive(iov)
			runtime.KeepAlive(parts)
			want := bytes.Join(parts, nil)
			wantRes(t, "sendmsg", c, int32(len(want)))
			return want
		}},
		{"shutdown", func(t *testing.T, r *Ring, q *reaper, p *[2]int) []byte {
			if err := r.PrepareShutdown(p[0], unix.SHUT_WR, 1); err != nil {
				t.Fatal(err)
			}
			wantRes(t, "shutdown", q.one(), 0)
			return nil
		}},
		{"close", func(t *testing.T, r *Ring, q *reaper, p *[2]int) []byte {
			fd := p[0]
			if err := r.PrepareClose(fd, 1); err != nil {
				t.Fatal(err)
			}
			wantRes(t, "close", q.one(), 0)
			p[0] = -1
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
				t.Errorf("descriptor %d after the close completed: fcntl gives %v, want EBADF", fd, err)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustOpen(t, Config{Entries: 4})
			p := socketpair(t)
			sent := tt.run(t, r, newReaper(t, r), p)
			// End the stream (unless the operation did) and check what
			// the peer reads up to its end.
			if p[0] >= 0 {
				if err := unix.Shutdown(p[0], unix.SHUT_WR); err != nil {
					t.Fatalf("shutdown: %v", err)
				}
			}
			if got := readAll(t, p[1]); !bytes.Equal(got, sent) {
				t.Errorf("peer read %q, want %q", got, sent)
			}
		})
	}
}

func TestReadWriteAt(t *testing.T) {
	const off = 4096 + 3
	r := mustOpen(t, Config{Entries: 4})
	f, err := os.Create(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	q := newReaper(t, r)

	out := []byte("written at an offset")
	if err := r.PrepareWrite(fd, out, off, 1); err != nil {
		t.Fatal(err)
	}
	wantRes(t, "write", q.one(), int32(len(out)))
	if fi, err := f.Stat(); err != nil || fi.Size() != off+int64(len(out)) {
		t.Fatalf("file after the write: %v, %v; want size %d", fi, err, off+len(out))
	}
	check := make([]byte, len(out))
	if _, err := f.ReadAt(check, off); err != nil || !bytes.Equal(check, out) {
		t.Fatalf("pread at %d: %q, %v; want %q", off, check, err, out)
	}

	in := make([]byte, 64)
	if err := r.PrepareRead(fd, in, off+8, 2); err != nil {
		t.Fatal(err)
	}
	c := q.one()
	wantRes(t, "read", c, int32(len(out)-8))
	if got := in[:c.Res]; !bytes.Equal(got, out[8:]) {
		t.Errorf("read %q at %d, want %q", got, off+8, out[8:])
	}
}

func TestTimeout(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	ts := &unix.Timespec{Nsec: 1e6}
	if err := r.PrepareTimeout(ts, 9); err != nil {
		t.Fatal(err)
	}
	c := newReaper(t, r).one()
	runtime.KeepAlive(ts)
	if c.UserData != 9 {
		t.Fatalf("completion for user data %d, want 9", c.UserData)
	}
	wantRes(t, "timeout", c, errno(unix.ETIME))
}

func TestCancel(t *testing.T) {
	const (
		recvData   = 1
		cancelData = 2
	)
	tests := []struct {
		name   string
		cancel func(r *Ring, fd int) error
	}{
		{"by user data", func(r *Ring, _ int) error { return r.PrepareCancel(recvData, cancelData) }},
		{"by descriptor", func(r *Ring, fd int) error { return r.PrepareCancelFd(fd, cancelData) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustOpen(t, Config{Entries: 4})
			p := socketpair(t)
			buf := onHeap(t, make([]byte, 16)) // the kernel writes it after the submit
			if err := r.PrepareRecv(p[0], buf, recvData); err != nil {
				t.Fatal(err)
			}
			if err := r.Submit(); err != nil {
				t.Fatal(err)
			}
			if err := tt.cancel(r, p[0]); err != nil {
				t.Fatal(err)
			}
			got := newReaper(t, r).byData(2)
			runtime.KeepAlive(buf)
			wantRes(t, "cancelled recv", got[recvData], errno(unix.ECANCELED))
			if c := got[cancelData]; c.Res != 0 && c.Res != 1 {
				t.Errorf("cancel: result %s, want 1 (or 0)", res(c.Res))
			}
		})
	}
	t.Run("nothing to cancel", func(t *testing.T) {
		r := mustOpen(t, Config{Entries: 4})
		p := socketpair(t)
		if err := r.PrepareCancelFd(p[0], cancelData); err != nil {
			t.Fatal(err)
		}
		wantRes(t, "cancel with nothing in flight", newReaper(t, r).one(), 0)
	})
}

func TestPollIn(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	p := socketpair(t)
	if err := r.PreparePollIn(p[0], 5); err != nil {
		t.Fatal(err)
	}
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	// Nothing is readable yet: the poll stays armed.
	if n := r.Ready(); n != 0 {
		t.Fatalf("%d completions before any input, want the poll still armed", n)
	}
	if _, err := unix.Write(p[1], []byte("x")); err != nil {
		t.Fatal(err)
	}
	c := newReaper(t, r).one()
	if c.UserData != 5 {
		t.Fatalf("completion for user data %d, want 5", c.UserData)
	}
	if c.Res < 0 || c.Res&unix.POLLIN == 0 {
		t.Fatalf("poll: result %s, want a mask with POLLIN", res(c.Res))
	}
}
