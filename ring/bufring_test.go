package ring

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestNewBufRingArguments(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	tests := []struct {
		name        string
		count, size int
	}{
		{"zero count", 0, 64},
		{"count not a power of two", 3, 64},
		{"count too large", 1 << 16, 64},
		{"zero size", 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := r.NewBufRing(1, tt.count, tt.size)
			if err == nil {
				b.Close()
				t.Fatalf("NewBufRing(1, %d, %d) succeeded", tt.count, tt.size)
			}
		})
	}
}

func TestRecvMultishot(t *testing.T) {
	const (
		recvData = 7
		buffers  = 4
		writes   = 3 * buffers // every buffer is filled, recycled and reused
	)
	r := mustOpen(t, Config{Entries: 8})
	b := mustBufRing(t, r, 3, buffers, 64)
	if b.Group() != 3 || b.Size() != 64 {
		t.Errorf("Group() = %d, Size() = %d, want 3 and 64", b.Group(), b.Size())
	}
	p := socketpair(t)
	if err := r.PrepareRecvMultishot(p[0], b, recvData); err != nil {
		t.Fatal(err)
	}
	q := newReaper(t, r)
	uses := make(map[uint16]int)
	for i := range writes {
		msg := fmt.Sprintf("message %d", i)
		write(t, p[1], []byte(msg))
		c := q.one()
		if c.UserData != recvData {
			t.Fatalf("write %d: completion for user data %d", i, c.UserData)
		}
		wantRes(t, fmt.Sprintf("recv of write %d", i), c, int32(len(msg)))
		if !c.More() {
			t.Fatalf("write %d: the multishot receive disarmed (flags %#x)", i, c.Flags)
		}
		id, ok := c.Buffer()
		if !ok {
			t.Fatalf("write %d: completion names no buffer (flags %#x)", i, c.Flags)
		}
		if int(id) >= buffers {
			t.Fatalf("write %d: buffer id %d of %d", i, id, buffers)
		}
		if got := string(b.Bytes(id, int(c.Res))); got != msg {
			t.Fatalf("write %d: buffer %d holds %q, want %q", i, id, got, msg)
		}
		uses[id]++
		b.Recycle(id)
		b.Publish()
	}
	for id := range uint16(buffers) {
		if uses[id] < 2 {
			t.Errorf("buffer %d used %d times over %d writes with %d buffers: recycled buffers were not reused (uses %v)",
				id, uses[id], writes, buffers, uses)
		}
	}
	closeFd(t, &p[1])
	c := q.one()
	wantRes(t, "recv after the peer closed", c, 0)
	if c.More() {
		t.Errorf("end of stream left the receive armed (flags %#x)", c.Flags)
	}
	if _, ok := c.Buffer(); ok {
		t.Errorf("end of stream consumed a buffer (flags %#x)", c.Flags)
	}
}

func TestRecvMultishotExhausted(t *testing.T) {
	const buffers = 2
	r := mustOpen(t, Config{Entries: 8})
	b := mustBufRing(t, r, 1, buffers, 16)
	p := socketpair(t)
	if err := r.PrepareRecvMultishot(p[0], b, 1); err != nil {
		t.Fatal(err)
	}
	q := newReaper(t, r)
	for i := range buffers {
		write(t, p[1], []byte("data"))
		c := q.one()
		wantRes(t, fmt.Sprintf("recv %d", i), c, 4)
		if _, ok := c.Buffer(); !ok || !c.More() {
			t.Fatalf("recv %d: flags %#x, want a buffer and More", i, c.Flags)
		}
	}
	write(t, p[1], []byte("data"))
	c := q.one()
	wantRes(t, "recv with every buffer taken", c, errno(unix.ENOBUFS))
	if c.More() {
		t.Errorf("ENOBUFS left the receive armed (flags %#x)", c.Flags)
	}
}

// mapping returns the permissions of the mapping of this process that
// holds addr, or "" when none does.
func mapping(t *testing.T, addr unsafe.Pointer) string {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		var lo, hi uintptr
		var perms string
		if _, err := fmt.Sscanf(s.Text(), "%x-%x %s", &lo, &hi, &perms); err != nil {
			t.Fatalf("/proc/self/maps line %q: %v", s.Text(), err)
		}
		if lo <= uintptr(addr) && uintptr(addr) < hi {
			return perms
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return ""
}

// reserve maps an inaccessible placeholder at exactly [addr, addr+n) and
// reports whether the range was free. The placeholder keeps other mappings
// (the race detector's, the Go runtime's) out of the range until the test's
// cleanup unmaps it.
func reserve(t *testing.T, addr unsafe.Pointer, n int) bool {
	t.Helper()
	p, err := unix.MmapPtr(-1, 0, addr, uintptr(n), unix.PROT_NONE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED_NOREPLACE)
	if errors.Is(err, unix.EEXIST) {
		return false
	}
	if err != nil {
		t.Fatalf("mmap placeholder at %p: %v", addr, err)
	}
	t.Cleanup(func() { unix.MunmapPtr(p, uintptr(n)) })
	return p == addr // a kernel without MAP_FIXED_NOREPLACE takes addr as a hint
}

func TestBufRingCloseUnmaps(t *testing.T) {
	tests := []struct {
		name           string
		closeRingFirst bool
	}{
		{"ring open", false},
		{"ring closed first", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustOpen(t, Config{Entries: 4})
			b, err := r.NewBufRing(2, 4, 4096)
			if err != nil {
				t.Fatal(err)
			}
			regions := []struct {
				name string
				addr unsafe.Pointer
				size int
			}{
				{"descriptor ring", unsafe.Pointer(unsafe.SliceData(b.ringMem)), len(b.ringMem)},
				{"buffers", unsafe.Pointer(unsafe.SliceData(b.bufMem)), len(b.bufMem)},
			}
			for _, m := range regions {
				if perms := mapping(t, m.addr); perms != "rw-p" {
					t.Fatalf("%s at %p before Close: mapping %q, want rw-p", m.name, m.addr, perms)
				}
			}
			if tt.closeRingFirst {
				r.Close()
			}
			if err := b.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			for _, m := range regions {
				if !reserve(t, m.addr, m.size) {
					t.Errorf("%s at %p is still mapped after Close (%s)", m.name, m.addr, mapping(t, m.addr))
				}
			}
			for _, m := range regions {
				if perms := mapping(t, m.addr); perms != "---p" {
					t.Errorf("%s at %p after Close: mapping %q, want only the placeholder", m.name, m.addr, perms)
				}
			}
			if err := b.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}

// TestBufRingGroupReusable checks that Close unregisters the group: a new
// ring of the same group registers on the same ring.
func TestBufRingGroupReusable(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	for i := range 3 {
		b, err := r.NewBufRing(5, 2, 64)
		if err != nil {
			t.Fatalf("registration %d of group 5: %v", i, err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Close %d: %v", i, err)
		}
	}
}

// TestBufRingGroupTaken checks that registering a group that is in use is a
// real error, not "unavailable", and that it says which call failed.
func TestBufRingGroupTaken(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	mustBufRing(t, r, 6, 2, 64)
	b, err := r.NewBufRing(6, 2, 64)
	if err == nil {
		b.Close()
		t.Fatal("a second registration of group 6 succeeded")
	}
	if errors.Is(err, ErrUnavailable) || !errors.Is(err, unix.EEXIST) {
		t.Errorf("error %v is not an available EEXIST", err)
	}
	var se *os.SyscallError
	if !errors.As(err, &se) || se.Syscall != "io_uring_register(PBUF_RING)" {
		t.Errorf("error %v (%T) does not name io_uring_register(PBUF_RING)", err, err)
	}
}

// TestTailWord checks the word Publish stores for both byte orders: read
// back in that order, its first half is entry 0's bid and its second the
// tail, as struct io_uring_buf_ring lays them out.
func TestTailWord(t *testing.T) {
	tests := []struct {
		name      string
		bigEndian bool
		order     binary.ByteOrder
	}{
		{"little-endian", false, binary.LittleEndian},
		{"big-endian", true, binary.BigEndian},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range []struct{ bid, tail uint16 }{{0x1234, 0xabcd}, {0, 1}, {0xffff, 0}, {7, 0xffff}} {
				var b [4]byte
				tt.order.PutUint32(b[:], tailWord(tt.bigEndian, v.bid, v.tail))
				if bid, tail := tt.order.Uint16(b[0:2]), tt.order.Uint16(b[2:4]); bid != v.bid || tail != v.tail {
					t.Errorf("tailWord(%#x, %#x) stores bid %#x and tail %#x", v.bid, v.tail, bid, tail)
				}
			}
		})
	}
	if got := bigEndian(); got != (binary.NativeEndian.Uint16([]byte{0, 1}) == 1) {
		t.Errorf("bigEndian() = %v on this host", got)
	}
}

// TestPublishTail checks, on this host, that Publish writes the tail where
// the kernel reads it (byte 14 of the descriptor ring) and leaves entry 0's
// bid as Recycle wrote it, also when the 16-bit tail wraps. It needs no
// kernel: the descriptor ring is Go memory.
func TestPublishTail(t *testing.T) {
	const count = 4
	mem := make([]uint64, count*bufDescSizeWords)
	b := &BufRing{
		mask:    count - 1,
		size:    8,
		ringMem: unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), count*int(unsafe.Sizeof(bufDesc{}))),
		bufMem:  make([]byte, count*8),
		slotID:  make([]uint16, count),
		slotLen: make([]uint32, count),
	}
	tail := func() uint16 { return *(*uint16)(unsafe.Pointer(&b.ringMem[14])) }
	bid0 := func() uint16 { return *(*uint16)(unsafe.Pointer(&b.ringMem[12])) }
	var want, wantBid0 uint16
	for round := range 1<<16 + 3 { // the tail wraps past 65535
		// Entry round%count gets a buffer id that changes from one
		// pass over the ring to the next.
		id := uint16((round/count + round) % count)
		if round%count == 0 {
			wantBid0 = id
		}
		b.Recycle(id)
		b.Publish()
		want++
		if tail() != want {
			t.Fatalf("round %d: tail %d after Publish, want %d", round, tail(), want)
		}
		if got := bid0(); got != wantBid0 {
			t.Fatalf("round %d: entry 0's bid is %d after Publish, want %d (as Recycle wrote it)", round, got, wantBid0)
		}
	}
	b.Publish() // nothing staged: no store
	if tail() != want {
		t.Errorf("an empty Publish moved the tail to %d, want %d", tail(), want)
	}
}

// bufDescSizeWords is a descriptor's size in uint64 words.
const bufDescSizeWords = int(unsafe.Sizeof(bufDesc{}) / 8)

// TestBufRingDiscard: with no receive armed, Discard drops the buffers'
// pages (they read back zeroed) and the ring keeps working.
func TestBufRingDiscard(t *testing.T) {
	r := mustOpen(t, Config{Entries: 8})
	b := mustBufRing(t, r, 1, 4, 64)
	q := newReaper(t, r)
	recvOnce := func(msg string) uint16 {
		t.Helper()
		p := socketpair(t)
		if err := r.PrepareRecvMultishot(p[0], b, 1); err != nil {
			t.Fatal(err)
		}
		write(t, p[1], []byte(msg))
		c := q.one()
		wantRes(t, "recv", c, int32(len(msg)))
		id, ok := c.Buffer()
		if !ok {
			t.Fatal("no buffer")
		}
		if got := string(b.Bytes(id, len(msg))); got != msg {
			t.Fatalf("buffer holds %q, want %q", got, msg)
		}
		b.Recycle(id)
		b.Publish()
		closeFd(t, &p[1]) // end of stream disarms the receive
		wantRes(t, "recv at end of stream", q.one(), 0)
		return id
	}
	id := recvOnce("before the discard")
	if err := b.Discard(); err != nil {
		t.Fatal(err)
	}
	for i, c := range b.Bytes(id, b.Size()) {
		if c != 0 {
			t.Fatalf("byte %d of a discarded buffer is %#x, want 0", i, c)
		}
	}
	recvOnce("after the discard")
}
