package ring

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpPair returns the two ends of a loopback TCP connection (blocking
// descriptors) that the test's cleanup closes unless closeFd did.
func tcpPair(t testing.TB) (srv, cli *int) {
	t.Helper()
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	if err := unix.Listen(lfd, 1); err != nil {
		t.Fatalf("listen: %v", err)
	}
	sa, _ := unix.Getsockname(lfd)
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	cli = &c
	t.Cleanup(func() { closeFd(t, cli) })
	if err := unix.Connect(c, sa); err != nil {
		t.Fatalf("connect: %v", err)
	}
	s, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	srv = &s
	t.Cleanup(func() { closeFd(t, srv) })
	return srv, cli
}

// waitInq waits until fd has n bytes to read (loopback delivers within
// the writer's call, so this returns at once; the deadline is for a
// broken kernel).
func waitInq(t *testing.T, fd, n int) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		inq, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
		if err != nil {
			t.Fatalf("SIOCINQ: %v", err)
		}
		if inq >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bytes to read after %v", inq, n, waitLimit)
		}
		runtime.Gosched()
	}
}

func payload(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 0))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// bundleBytes returns the bytes of every buffer of u, in order, and their
// ids.
func bundleBytes(u Bundle) ([]byte, []uint16) {
	var data []byte
	var ids []uint16
	for i := range u.Len() {
		data = append(data, u.Data(i)...)
		ids = append(ids, u.ID(i))
	}
	return data, ids
}

// TestRecvBundle receives several buffers' worth with bundle receives,
// and checks that Bundle names the buffers the kernel filled against a
// model of the ring: in ring order, which after recycling in a scrambled
// order is not id order. (A completion may cover less than the socket
// holds; the rest comes with the next.)
func TestRecvBundle(t *testing.T) {
	needFeature(t, Bundles)
	const size, count = 64, 8
	r := mustOpen(t, Config{Entries: 8})
	b := mustBufRing(t, r, 5, count, size)
	srv, cli := tcpPair(t)
	q := newReaper(t, r)
	var ring []uint16 // the model: the ids in the ring, from its head
	for id := range uint16(count) {
		ring = append(ring, id)
	}
	multi := 0 // completions that filled more than one buffer

	// receive collects bundle completions until n bytes arrived, arming
	// a single receive for each (multishot: once), and checks each
	// against the model.
	receive := func(n int, multishot bool, ud uint64) ([]byte, []uint16) {
		var data []byte
		var used []uint16
		for armed := false; len(data) < n; {
			if !armed || !multishot {
				var err error
				if multishot {
					err = r.PrepareRecvMultishotBundle(*srv, b, ud)
				} else {
					err = r.PrepareRecvBundle(*srv, b, ud)
				}
				if err != nil {
					t.Fatal(err)
				}
				armed = true
			}
			c := q.one()
			if c.UserData != ud || c.Res <= 0 || multishot && !c.More() {
				t.Fatalf("bundle receive: %+v (result %s)", c, res(c.Res))
			}
			u, err := b.Bundle(c)
			if err != nil {
				t.Fatal(err)
			}
			d, ids := bundleBytes(u)
			if len(d) != int(c.Res) || u.Bytes() != int(c.Res) {
				t.Fatalf("bundle of %d buffers holds %d bytes, the completion %d", u.Len(), len(d), c.Res)
			}
			if !slicesEqual(ids, ring[:len(ids)]) {
				t.Fatalf("bundle ids %v, the ring holds %v", ids, ring)
			}
			for i := range u.Len() - 1 {
				if len(u.Data(i)) != size {
					t.Errorf("buffer %d of %d in a bundle holds %d bytes, not all %d", i, u.Len(), len(u.Data(i)), size)
				}
			}
			if u.Len() > 1 {
				multi++
			}
			ring = ring[len(ids):]
			data = append(data, d...)
			used = append(used, ids...)
		}
		return data, used
	}

	first := payload(200, 1)
	write(t, *cli, first)
	waitInq(t, *srv, len(first))
	data, used := receive(len(first), false, 1)
	if !bytes.Equal(data, first) {
		t.Errorf("single bundle receives got %d bytes, not the %d sent", len(data), len(first))
	}
	// Recycle them out of order: they go back in the order recycled.
	scrambled := append([]uint16(nil), used...)
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(scrambled), func(i, j int) { scrambled[i], scrambled[j] = scrambled[j], scrambled[i] })
	for _, id := range scrambled {
		b.Recycle(id)
		ring = append(ring, id)
	}
	b.Publish()

	second := payload((count-1)*size-20, 2)
	write(t, *cli, second)
	waitInq(t, *srv, len(second))
	if data, _ = receive(len(second), true, 2); !bytes.Equal(data, second) {
		t.Errorf("multishot bundle receives got %d bytes, not the %d sent", len(data), len(second))
	}
	if multi == 0 {
		t.Errorf("no completion filled more than one buffer")
	}
	if err := r.PrepareCancel(2, 3); err != nil {
		t.Fatal(err)
	}
	got := q.byData(2)
	wantRes(t, "cancelled multishot bundle", got[2], errno(unix.ECANCELED))
}

func slicesEqual(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSendBundle sends the buffers staged in a send group with one
// submission, and checks what the peer gets and what Bundle names.
func TestSendBundle(t *testing.T) {
	needFeature(t, Bundles)
	const size = 64
	r := mustOpen(t, Config{Entries: 8})
	b, err := r.NewSendBufRing(6, 8, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	srv, cli := tcpPair(t)
	q := newReaper(t, r)
	rounds := [][]struct {
		id uint16
		n  int
	}{
		{{0, 10}, {1, size}, {2, 5}},
		{{4, 3}, {3, 20}},
	}
	for i, round := range rounds {
		var want []byte
		var wantIDs []uint16
		for j, piece := range round {
			p := payload(piece.n, uint64(10*i+j))
			copy(b.Bytes(piece.id, piece.n), p)
			b.Provide(piece.id, piece.n)
			want = append(want, p...)
			wantIDs = append(wantIDs, piece.id)
		}
		b.Publish()
		if err := r.PrepareSendBundle(*srv, b, uint64(7+i)); err != nil {
			t.Fatal(err)
		}
		c := q.one()
		wantRes(t, "send bundle", c, int32(len(want)))
		u, err := b.Bundle(c)
		if err != nil {
			t.Fatal(err)
		}
		data, ids := bundleBytes(u)
		if !slicesEqual(ids, wantIDs) || !bytes.Equal(data, want) {
			t.Errorf("round %d: bundle ids %v (%d bytes), want %v (%d)", i, ids, len(data), wantIDs, len(want))
		}
		got := make([]byte, len(want))
		waitInq(t, *cli, len(want))
		if n, err := unix.Read(*cli, got); n != len(want) || err != nil || !bytes.Equal(got, want) {
			t.Errorf("round %d: peer read %d bytes, %v; want the %d sent", i, n, err, len(want))
		}
	}
}

// TestBundleRecord checks Bundle's record of the ring against
// completions a kernel would not post: one whose first buffer is not at
// the head, one longer than what was published, none, and an
// incremental ring's.
func TestBundleRecord(t *testing.T) {
	const count, size = 4, 64
	newRing := func() *BufRing {
		mem := make([]uint64, count*bufDescSizeWords) // aligned for Publish's 32-bit store
		b := &BufRing{
			group: 1, mask: count - 1, size: size,
			ringMem: unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), count*int(unsafe.Sizeof(bufDesc{}))),
			bufMem:  make([]byte, count*size),
			slotID:  make([]uint16, count), slotLen: make([]uint32, count),
		}
		for _, id := range []uint16{2, 0, 3, 1} {
			b.Recycle(id)
		}
		b.Publish()
		return b
	}
	cqe := func(id uint16, n int32) Completion {
		return Completion{Res: n, Flags: cqeFBuffer | uint32(id)<<cqeBufferShift}
	}
	b := newRing()
	if u, err := b.Bundle(Completion{Res: -int32(unix.ENOBUFS)}); err != nil || u.Len() != 0 {
		t.Errorf("no buffer: %d buffers, %v", u.Len(), err)
	}
	if _, err := b.Bundle(cqe(0, 10)); err == nil {
		t.Errorf("a completion from buffer 0 while the head holds 2: no error")
	}
	if _, err := b.Bundle(cqe(2, count*size+1)); err == nil {
		t.Errorf("a completion longer than every published buffer: no error")
	}
	u, err := b.Bundle(cqe(2, size+1))
	if err != nil || u.Len() != 2 || u.ID(0) != 2 || u.ID(1) != 0 || len(u.Data(1)) != 1 {
		t.Errorf("bundle of 65 bytes from buffer 2: %d buffers %d, %d; %v", u.Len(), u.ID(0), u.ID(1), err)
	}
	if n := len(u.Unsent()); n != size-1 {
		t.Errorf("Unsent after 1 byte of the last buffer: %d bytes, want %d", n, size-1)
	}
	if p, last := b.Received(3, cqe(3, 7)); len(p) != 7 || !last {
		t.Errorf("Received on a plain ring: %d bytes, last %v", len(p), last)
	}
	if u, err := b.Bundle(cqe(1, 3)); err != nil || u.Len() != 1 || u.ID(0) != 1 {
		t.Errorf("bundle after Received: %d buffers, %v", u.Len(), err)
	}
	inc := newRing()
	inc.incremental = true
	inc.filled = make([]uint32, count)
	if _, err := inc.Bundle(cqe(2, 1)); err == nil {
		t.Errorf("Bundle on an incremental ring: no error")
	}
}

// TestIncrementalBufRing checks incremental consumption: small receives
// share one large buffer, each starting where the last ended, until the
// buffer is full; only the completion that ends a buffer lacks BufMore.
func TestIncrementalBufRing(t *testing.T) {
	needFeature(t, IncrementalBuffers)
	const size = 4096
	r := mustOpen(t, Config{Entries: 8})
	b, err := r.NewIncrementalBufRing(8, 2, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	p := socketpair(t)
	if err := r.PrepareRecvMultishot(p[0], b, 1); err != nil {
		t.Fatal(err)
	}
	q := newReaper(t, r)
	var sent, got []byte
	type use struct {
		id   uint16
		off  int // where in the buffer the bytes start
		n    int
		last bool
	}
	var uses []use
	for i, n := range []int{1000, 2000, 1500} {
		msg := payload(n, uint64(20+i))
		write(t, p[1], msg)
		sent = append(sent, msg...)
		for len(got) < len(sent) {
			c := q.one()
			id, ok := c.Buffer()
			if c.Res <= 0 || !ok || !c.More() {
				t.Fatalf("receive: result %s, buffer %v, More %v", res(c.Res), ok, c.More())
			}
			data, last := b.Received(id, c)
			if last == c.BufMore() || len(data) != int(c.Res) {
				t.Fatalf("Received: %d bytes, last %v, for a completion of %d with BufMore %v", len(data), last, c.Res, c.BufMore())
			}
			off := int(uintptr(unsafe.Pointer(&data[0])) - uintptr(unsafe.Pointer(&b.Bytes(id, 1)[0])))
			uses = append(uses, use{id, off, len(data), last})
			got = append(got, data...)
		}
	}
	if !bytes.Equal(got, sent) {
		t.Fatalf("received %d bytes, not the %d sent", len(got), len(sent))
	}
	t.Logf("receives: %+v", uses)
	// Check each buffer's receives: contiguous from its start, all but
	// the last with BufMore, the last ending the buffer when it is full.
	first := uses[0].id
	var inFirst, parts int
	for _, u := range uses {
		if u.id != first {
			continue
		}
		if u.off != inFirst {
			t.Errorf("a receive into buffer %d starts at %d, the last ended at %d", u.id, u.off, inFirst)
		}
		inFirst += u.n
		parts++
		if u.last != (inFirst == size) {
			t.Errorf("buffer %d at %d of %d bytes: last %v", u.id, inFirst, size, u.last)
		}
	}
	if parts < 2 || inFirst != size {
		t.Errorf("buffer %d took %d receives and %d bytes; want several, filling it", first, parts, inFirst)
	}
	b.Recycle(first)
	b.Publish()
	if err := r.PrepareCancel(1, 2); err != nil {
		t.Fatal(err)
	}
	wantRes(t, "cancelled receive", q.byData(2)[1], errno(unix.ECANCELED))
}

// TestSendZC checks a zero-copy send's two completions: the result with
// More, then the notification under the same user data, and that the
// buffer may change only after the notification.
func TestSendZC(t *testing.T) {
	needFeature(t, SendZC)
	r := mustOpen(t, Config{Entries: 8})
	srv, cli := tcpPair(t)
	q := newReaper(t, r)
	p := payload(16<<10, 3)
	want := bytes.Clone(p)
	if err := r.PrepareSendZC(*srv, p, 9); err != nil {
		t.Fatal(err)
	}
	sent := q.one()
	if sent.UserData != 9 || sent.Res != int32(len(p)) || !sent.More() || sent.Notif() {
		t.Fatalf("zero-copy send: %+v (result %s), want %d bytes, More and no notification", sent, res(sent.Res), len(p))
	}
	notif := q.one()
	if notif.UserData != 9 || !notif.Notif() || notif.More() {
		t.Fatalf("after the send: %+v, want its notification", notif)
	}
	t.Logf("notification: copied %v (loopback copies)", notif.ZCCopied())
	if !notif.ZCCopied() {
		t.Errorf("loopback's notification says the data was not copied")
	}
	// Released: changing the buffer changes nothing the peer reads.
	clear(p)
	got := make([]byte, len(want))
	for n := 0; n < len(got); {
		k, err := unix.Read(*cli, got[n:])
		if err != nil || k == 0 {
			t.Fatalf("peer read after %d bytes: %d, %v", n, k, err)
		}
		n += k
	}
	if !bytes.Equal(got, want) {
		t.Errorf("peer read other bytes than were sent")
	}

	// A failing send completes once, without More: no notification.
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := r.PrepareSendZC(efd, p, 10); err != nil {
		t.Fatal(err)
	}
	c := q.one()
	if c.UserData != 10 || c.Res >= 0 || c.Notif() {
		t.Fatalf("zero-copy send on an eventfd: %+v (result %s), want an error", c, res(c.Res))
	}
	if c.More() {
		if n := q.one(); !n.Notif() || n.UserData != 10 {
			t.Errorf("a failed send with More, then %+v: want its notification", n)
		}
	}
	roundTrip(t, r, waitLimit, make([]Completion, 4))
	if r.Ready() != 0 {
		t.Errorf("%d completions left", r.Ready())
	}
	runtime.KeepAlive(p)
}

// TestSendmsgZCUDP sends a datagram with zero-copy sendmsg to an address
// the message names.
func TestSendmsgZCUDP(t *testing.T) {
	needFeature(t, SendZC)
	r := mustOpen(t, Config{Entries: 8})
	udp := func() (int, int) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("socket: %v", err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatalf("bind: %v", err)
		}
		sa, _ := unix.Getsockname(fd)
		return fd, sa.(*unix.SockaddrInet4).Port
	}
	snd, _ := udp()
	rcv, port := udp()
	p := payload(1200, 4)
	iov := onHeap(t, []unix.Iovec{{Base: &p[0]}})
	iov[0].SetLen(len(p))
	to := onHeap(t, rawInet4(port))
	msg := onHeap(t, &unix.Msghdr{Name: (*byte)(unsafe.Pointer(to)), Namelen: unix.SizeofSockaddrInet4, Iov: &iov[0]})
	msg.SetIovlen(1)
	if err := r.PrepareSendmsgZC(snd, msg, 11); err != nil {
		t.Fatal(err)
	}
	q := newReaper(t, r)
	sent := q.one()
	if sent.Res != int32(len(p)) || !sent.More() || sent.Notif() {
		t.Fatalf("zero-copy sendmsg: %+v (result %s), want %d bytes and More", sent, res(sent.Res), len(p))
	}
	if n := q.one(); !n.Notif() || n.UserData != 11 {
		t.Fatalf("after the sendmsg: %+v, want its notification", n)
	}
	runtime.KeepAlive(msg)
	runtime.KeepAlive(iov)
	runtime.KeepAlive(to)
	got := make([]byte, 2048)
	n, _, err := unix.Recvfrom(rcv, got, unix.MSG_DONTWAIT)
	if err != nil || !bytes.Equal(got[:n], p) {
		t.Errorf("received %d bytes, %v; want the datagram sent", n, err)
	}
}

// TestReceivedNoBuffer checks that a completion without a buffer (an
// error, the end of the stream) consumes nothing in Received's record.
func TestReceivedNoBuffer(t *testing.T) {
	b := &BufRing{mask: 0, size: 8, bufMem: make([]byte, 8), slotID: make([]uint16, 1), slotLen: make([]uint32, 1)}
	for _, c := range []Completion{{Res: -int32(unix.ENOBUFS)}, {Res: 0}} {
		if p, last := b.Received(0, c); len(p) != 0 || last || b.head != 0 {
			t.Errorf("Received(%+v): %d bytes, last %v, head %d; want nothing consumed", c, len(p), last, b.head)
		}
	}
}

// TestFeatureAllocs checks that the features' per-operation paths
// allocate nothing: a skipped submission with its flag setters, reading
// a bundle, and Received on an incremental ring.
func TestFeatureAllocs(t *testing.T) {
	r := mustOpen(t, Config{Entries: 8})
	cs := make([]Completion, 4)
	if allocs := testing.AllocsPerRun(100, func() {
		if err := r.PrepareNop(1); err != nil {
			t.Fatal(err)
		}
		r.SkipSuccess()
		roundTrip(t, r, -1, cs)
	}); allocs != 0 {
		t.Errorf("a skipped NOP and a round trip allocate %v times", allocs)
	}
	const count, size = 4, 64
	mem := make([]uint64, count*bufDescSizeWords)
	b := &BufRing{
		group: 1, mask: count - 1, size: size,
		ringMem: unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), count*int(unsafe.Sizeof(bufDesc{}))),
		bufMem:  make([]byte, count*size),
		slotID:  make([]uint16, count), slotLen: make([]uint32, count),
	}
	for i := range uint16(count) {
		b.Recycle(i)
	}
	b.Publish()
	id := uint16(0)
	if allocs := testing.AllocsPerRun(100, func() {
		u, err := b.Bundle(Completion{Res: size + 1, Flags: cqeFBuffer | uint32(id)<<cqeBufferShift})
		if err != nil || u.Len() != 2 || len(u.Data(1)) != 1 {
			t.Fatalf("Bundle: %d buffers, %v", u.Len(), err)
		}
		for i := range u.Len() {
			b.Recycle(u.ID(i))
		}
		b.Publish()
		id = b.slotID[b.head&b.mask]
	}); allocs != 0 {
		t.Errorf("reading a bundle allocates %v times", allocs)
	}
	b.incremental = true
	b.filled = make([]uint32, count)
	if allocs := testing.AllocsPerRun(100, func() {
		if p, last := b.Received(2, Completion{Res: 8, Flags: cqeFBuffer | 2<<cqeBufferShift | cqeFBufMore}); len(p) != 8 || last {
			t.Fatalf("Received: %d bytes, last %v", len(p), last)
		}
		b.filled[2] = 0
	}); allocs != 0 {
		t.Errorf("Received allocates %v times", allocs)
	}
}
