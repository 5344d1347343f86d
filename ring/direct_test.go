package ring

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// listen returns a listening TCP socket on 127.0.0.1 port 0 and its port.
func listen(t *testing.T, backlog int) (fd, port int) {
	t.Helper()
	fd, port = tcpSocket(t)
	if err := unix.Listen(fd, backlog); err != nil {
		t.Fatalf("listen: %v", err)
	}
	return fd, port
}

// dial connects a blocking client socket to 127.0.0.1:port; the test's
// cleanup closes it unless closeFd did.
func dial(t *testing.T, port int) *int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	p := &fd
	t.Cleanup(func() { closeFd(t, p) })
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("connect: %v", err)
	}
	return p
}

// onHeap returns v after making what it points at escape to the heap
// (the test's cleanup keeps it alive), for memory handed to the kernel:
// the compiler puts a buffer that does not escape on the stack, which
// moves when it grows, and the kernel would write where it was.
func onHeap[T any](tb testing.TB, v T) T {
	tb.Cleanup(func() { runtime.KeepAlive(v) })
	return v
}

func needFeature(t *testing.T, fs ...Feature) {
	t.Helper()
	s := mustProbe(t)
	for _, f := range fs {
		if !s.HasFeature(f) {
			t.Skipf("%v", s.FeatureError(f))
		}
	}
}

// TestDirectDescriptors runs a connection end to end on a direct
// descriptor: a multishot accept into the fixed file table, a receive
// and a send on the slot, a real descriptor installed for it, a cancel
// and a shutdown on the slot, and the slot's close.
func TestDirectDescriptors(t *testing.T) {
	needFeature(t, DirectDescriptors, FixedFdInstall)
	const (
		acceptData = iota + 1
		recvData
		sendData
		installData
		cancelData
		shutdownData
		closeData
		closeAgainData
	)
	r := mustOpen(t, Config{Entries: 8})
	if err := r.RegisterFiles(4); err != nil {
		t.Fatalf("RegisterFiles: %v", err)
	}
	if r.Files() != 4 {
		t.Errorf("Files() = %d, want 4", r.Files())
	}
	if err := r.RegisterFiles(4); !errors.Is(err, unix.EBUSY) {
		t.Errorf("a second RegisterFiles: %v, want EBUSY", err)
	}
	lfd, port := listen(t, 4)
	if err := r.PrepareAcceptMultishotDirect(lfd, acceptData); err != nil {
		t.Fatal(err)
	}
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	client := dial(t, port)
	q := newReaper(t, r)
	c := q.one()
	if c.UserData != acceptData || c.Res < 0 || c.Res >= 4 || !c.More() {
		t.Fatalf("accept: %+v (result %s), want a slot in [0, 4) and More", c, res(c.Res))
	}
	slot := int(c.Res)

	// Receive and send on the slot.
	buf := onHeap(t, make([]byte, 64))
	if err := r.PrepareRecv(slot, buf, recvData); err != nil {
		t.Fatal(err)
	}
	r.FixedFile()
	write(t, *client, []byte("ping"))
	wantRes(t, "recv on the slot", q.one(), 4)
	if string(buf[:4]) != "ping" {
		t.Errorf("received %q, want ping", buf[:4])
	}
	pong := []byte("pong")
	if err := r.PrepareSend(slot, pong, sendData); err != nil {
		t.Fatal(err)
	}
	r.FixedFile()
	wantRes(t, "send on the slot", q.one(), 4)
	if n, err := unix.Read(*client, buf); err != nil || string(buf[:n]) != "pong" {
		t.Errorf("client read %q, %v; want pong", buf[:n], err)
	}

	// A real descriptor for the same socket, close-on-exec.
	if err := r.PrepareFixedFdInstall(slot, installData); err != nil {
		t.Fatal(err)
	}
	c = q.one()
	if c.Res < 0 {
		t.Fatalf("install: %s", res(c.Res))
	}
	fd := int(c.Res)
	peer, err := unix.Getpeername(fd)
	if err != nil {
		t.Fatalf("getpeername on the installed descriptor: %v", err)
	}
	local, _ := unix.Getsockname(*client)
	if peer.(*unix.SockaddrInet4).Port != local.(*unix.SockaddrInet4).Port {
		t.Errorf("installed descriptor's peer %v, the client is %v", peer, local)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("installed descriptor flags %#x, %v; want FD_CLOEXEC", flags, err)
	}
	if err := unix.Close(fd); err != nil {
		t.Errorf("close the installed descriptor: %v", err)
	}

	// A receive armed on the slot, cancelled by the slot.
	if err := r.PrepareRecv(slot, buf, recvData); err != nil {
		t.Fatal(err)
	}
	r.FixedFile()
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if err := r.PrepareCancelFixed(slot, cancelData); err != nil {
		t.Fatal(err)
	}
	got := q.byData(2)
	wantRes(t, "recv cancelled by slot", got[recvData], errno(unix.ECANCELED))
	wantRes(t, "cancel by slot", got[cancelData], 1)

	// Shutdown on the slot ends the client's stream; the installed
	// descriptor's close did not.
	if err := r.PrepareShutdown(slot, unix.SHUT_WR, shutdownData); err != nil {
		t.Fatal(err)
	}
	r.FixedFile()
	wantRes(t, "shutdown on the slot", q.one(), 0)
	if n, err := unix.Read(*client, buf); n != 0 || err != nil {
		t.Errorf("client read %d, %v after the shutdown; want end of stream", n, err)
	}

	// Close the slot; a second close finds it empty.
	if err := r.PrepareCloseDirect(slot, closeData); err != nil {
		t.Fatal(err)
	}
	wantRes(t, "close the slot", q.one(), 0)
	if err := r.PrepareCloseDirect(slot, closeAgainData); err != nil {
		t.Fatal(err)
	}
	wantRes(t, "close the empty slot", q.one(), errno(unix.EBADF))
	runtime.KeepAlive(buf)
	runtime.KeepAlive(pong)

	if err := r.UnregisterFiles(); err != nil || r.Files() != 0 {
		t.Errorf("UnregisterFiles: %v, Files() = %d", err, r.Files())
	}
}

// TestDirectAcceptTableFull checks what part 2 must handle: a full table
// ends a multishot accept with -ENFILE, and the connection it was
// accepting is lost (closed by the kernel); a slot closed makes room for
// a new accept.
func TestDirectAcceptTableFull(t *testing.T) {
	needFeature(t, DirectDescriptors)
	const (
		acceptData = iota + 1
		closeData
		againData
	)
	r := mustOpen(t, Config{Entries: 8})
	if err := r.RegisterFiles(1); err != nil {
		t.Fatalf("RegisterFiles: %v", err)
	}
	lfd, port := listen(t, 4)
	if err := r.PrepareAcceptMultishotDirect(lfd, acceptData); err != nil {
		t.Fatal(err)
	}
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	dial(t, port)
	q := newReaper(t, r)
	first := q.one()
	if first.Res != 0 || !first.More() {
		t.Fatalf("first accept: %s (More %v), want slot 0 and More", res(first.Res), first.More())
	}
	dropped := dial(t, port)
	full := q.one()
	if full.Res != errno(unix.ENFILE) || full.More() {
		t.Fatalf("accept into a full table: %s (More %v), want ENFILE and the multishot ended", res(full.Res), full.More())
	}
	// The kernel accepted the connection before it found no slot, and
	// closed it: the client sees its end, and the backlog is empty.
	buf := make([]byte, 8)
	if n, err := unix.Read(*dropped, buf); n > 0 || err != nil && !errors.Is(err, unix.ECONNRESET) {
		t.Errorf("the connection accepted into a full table: read %d, %v; want its end", n, err)
	}
	if err := r.PrepareCloseDirect(0, closeData); err != nil {
		t.Fatal(err)
	}
	wantRes(t, "close slot 0", q.one(), 0)
	if err := r.PrepareAcceptDirect(lfd, againData); err != nil {
		t.Fatal(err)
	}
	dial(t, port)
	wantRes(t, "single accept into the freed slot", q.one(), 0)
}

// TestDirectDescriptorsMultishotRecv runs a multishot receive from a
// provided-buffer ring on a slot, as the runtime's receive would.
func TestDirectDescriptorsMultishotRecv(t *testing.T) {
	needFeature(t, DirectDescriptors)
	r := mustOpen(t, Config{Entries: 8})
	if err := r.RegisterFiles(2); err != nil {
		t.Fatalf("RegisterFiles: %v", err)
	}
	b := mustBufRing(t, r, 2, 4, 64)
	lfd, port := listen(t, 1)
	if err := r.PrepareAcceptDirect(lfd, 1); err != nil {
		t.Fatal(err)
	}
	client := dial(t, port)
	q := newReaper(t, r)
	c := q.one()
	if c.Res < 0 {
		t.Fatalf("accept: %s", res(c.Res))
	}
	slot := int(c.Res)
	if err := r.PrepareRecvMultishot(slot, b, 2); err != nil {
		t.Fatal(err)
	}
	r.FixedFile()
	var got []byte
	for i := range 6 { // more messages than buffers: recycled and reused
		msg := []byte{'m', byte('0' + i)}
		write(t, *client, msg)
		c := q.one()
		id, ok := c.Buffer()
		if c.Res != 2 || !ok || !c.More() {
			t.Fatalf("message %d: result %s, buffer %v, More %v", i, res(c.Res), ok, c.More())
		}
		got = append(got, b.Bytes(id, int(c.Res))...)
		b.Recycle(id)
		b.Publish()
	}
	if want := []byte("m0m1m2m3m4m5"); !bytes.Equal(got, want) {
		t.Errorf("received %q, want %q", got, want)
	}
	closeFd(t, client)
	if c := q.one(); c.Res != 0 || c.More() {
		t.Errorf("end of stream: %s, More %v", res(c.Res), c.More())
	}
	if err := r.PrepareCloseDirect(slot, 3); err != nil {
		t.Fatal(err)
	}
	wantRes(t, "close slot", q.one(), 0)
}

// TestFilesUpdateAlloc puts descriptors made without the ring (as an
// inherited socket is) into slots the kernel picks, and serves one of them
// on its slot after its descriptor is closed.
func TestFilesUpdateAlloc(t *testing.T) {
	needFeature(t, DirectDescriptors)
	r := mustOpen(t, Config{Entries: 8})
	if err := r.RegisterFiles(4); err != nil {
		t.Fatalf("RegisterFiles: %v", err)
	}
	a, b := socketpair(t), socketpair(t)
	fds := onHeap(t, []int32{int32(a[0]), int32(b[0])})
	if err := r.PrepareFilesUpdateAlloc(fds, 1); err != nil {
		t.Fatal(err)
	}
	q := newReaper(t, r)
	wantRes(t, "files update", q.one(), 2)
	runtime.KeepAlive(fds)
	if fds[0] < 0 || fds[0] >= 4 || fds[1] < 0 || fds[1] >= 4 || fds[0] == fds[1] {
		t.Fatalf("slots %v, want two different slots in [0, 4)", fds)
	}
	closeFd(t, &a[0]) // the slot holds its own reference
	buf := onHeap(t, make([]byte, 16))
	if err := r.PrepareRecv(int(fds[0]), buf, 2); err != nil {
		t.Fatal(err)
	}
	r.FixedFile()
	write(t, a[1], []byte("inherited"))
	wantRes(t, "recv on the slot after its descriptor closed", q.one(), 9)
	if string(buf[:9]) != "inherited" {
		t.Errorf("received %q", buf[:9])
	}
	runtime.KeepAlive(buf)
}

// TestMsgRingFd moves a direct descriptor from one ring's table to
// another's, as a cross-loop hand-over would, and serves it there.
func TestMsgRingFd(t *testing.T) {
	needFeature(t, DirectDescriptors)
	const handed = 0x8000_0000_0000_0042
	src := mustOpen(t, Config{Entries: 8})
	dst := mustOpen(t, Config{Entries: 8})
	for _, r := range []*Ring{src, dst} {
		if err := r.RegisterFiles(4); err != nil {
			t.Fatalf("RegisterFiles: %v", err)
		}
	}
	p := socketpair(t)
	fds := onHeap(t, []int32{int32(p[0])})
	if err := src.PrepareFilesUpdateAlloc(fds, 1); err != nil {
		t.Fatal(err)
	}
	qs, qd := newReaper(t, src), newReaper(t, dst)
	wantRes(t, "files update", qs.one(), 1)
	closeFd(t, &p[0])
	if err := src.PrepareMsgRingFd(dst.Fd(), int(fds[0]), handed, 2); err != nil {
		t.Fatal(err)
	}
	wantRes(t, "send the slot", qs.one(), 0)
	c := qd.one()
	if c.UserData != handed || c.Res < 0 || c.Res >= 4 {
		t.Fatalf("the target ring got %+v (result %s), want user data %#x and a slot", c, res(c.Res), uint64(handed))
	}
	if err := src.PrepareCloseDirect(int(fds[0]), 3); err != nil {
		t.Fatal(err)
	}
	wantRes(t, "close the source slot", qs.one(), 0)
	buf := onHeap(t, make([]byte, 16))
	if err := dst.PrepareRecv(int(c.Res), buf, 4); err != nil {
		t.Fatal(err)
	}
	dst.FixedFile()
	write(t, p[1], []byte("moved"))
	wantRes(t, "recv on the moved slot", qd.one(), 5)
	if string(buf[:5]) != "moved" {
		t.Errorf("received %q", buf[:5])
	}
	runtime.KeepAlive(buf)
	runtime.KeepAlive(fds)
}
