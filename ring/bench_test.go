package ring

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// roundTrip prepares a cancel of nothing (the cheapest operation that
// completes at once), enters the kernel to submit it and wait for its
// completion, and reaps it.
func roundTrip(tb testing.TB, r *Ring, timeout time.Duration, cs []Completion) {
	if err := r.PrepareCancel(1<<40, 1); err != nil {
		tb.Fatal(err)
	}
	if err := r.SubmitAndWait(timeout); err != nil {
		tb.Fatal(err)
	}
	if n := r.Reap(cs); n != 1 {
		tb.Fatalf("Reap returned %d completions, want 1", n)
	}
}

// TestRoundTripAllocs checks that a round trip allocates nothing, also with
// a timed wait, whose arguments live in the Ring.
func TestRoundTripAllocs(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
	}{
		{"untimed wait", -1},
		{"timed wait", waitLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustOpen(t, Config{Entries: 8})
			cs := make([]Completion, 4)
			allocs := testing.AllocsPerRun(100, func() { roundTrip(t, r, tt.timeout, cs) })
			if allocs != 0 {
				t.Errorf("a round trip allocates %v times", allocs)
			}
		})
	}
}

// BenchmarkNopRoundTrip measures one prepare, submit-and-wait and reap of an
// operation that completes at once; it reports the kernel entries per
// operation (1 is the goal).
func BenchmarkNopRoundTrip(b *testing.B) {
	r := mustOpen(b, Config{Entries: 64})
	cs := make([]Completion, 4)
	start := r.Enters()
	ops := 0
	b.ReportAllocs()
	for b.Loop() {
		roundTrip(b, r, -1, cs)
		ops++
	}
	b.ReportMetric(float64(r.Enters()-start)/float64(ops), "enters/op")
}

// BenchmarkEnter compares enters that pass the ring's descriptor with
// enters that pass its registered index (IORING_ENTER_REGISTERED_RING),
// which skips the descriptor lookup in the kernel: the round trip of
// BenchmarkNopRoundTrip, and an empty non-blocking enter (Submit with
// nothing to submit), where the lookup is the larger share.
func BenchmarkEnter(b *testing.B) {
	for _, c := range []struct {
		name       string
		registered bool
		empty      bool
	}{
		{"round trip/descriptor", false, false},
		{"round trip/registered", true, false},
		{"empty/descriptor", false, true},
		{"empty/registered", true, true},
	} {
		registered := c.registered
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r, err := Open(Config{Entries: 64, RegisterRing: registered})
			if err != nil {
				b.Skipf("Open: %v", err)
			}
			defer r.Close() // on the locked thread, which holds the registration
			if ok, why := r.RingRegistered(); ok != registered {
				b.Skipf("registered ring: %v", why)
			}
			cs := make([]Completion, 4)
			b.ReportAllocs()
			for b.Loop() {
				if c.empty {
					if err := r.Submit(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				roundTrip(b, r, -1, cs)
			}
		})
	}
}

// BenchmarkCQESkip submits batches of 16 operations that complete at once
// (NOPs) and waits for the batch: every one posting its
// completion, or the first 15 skipped (IOSQE_CQE_SKIP_SUCCESS) and only
// the last reaped. It reports per batch.
func BenchmarkCQESkip(b *testing.B) {
	const batch = 16
	for _, skip := range []bool{false, true} {
		name := "all complete"
		if skip {
			name = "skip 15 of 16"
		}
		b.Run(name, func(b *testing.B) {
			r := mustOpen(b, Config{Entries: 64})
			if s, err := Probe(); err != nil || !s.HasFeature(CQESkip) {
				b.Skip("no CQE skip")
			}
			cs := make([]Completion, batch)
			reaped := 0
			b.ReportAllocs()
			for b.Loop() {
				for i := range batch {
					if err := r.PrepareNop(uint64(i)); err != nil {
						b.Fatal(err)
					}
					if skip && i < batch-1 {
						r.SkipSuccess()
					}
				}
				want := batch
				if skip {
					want = 1
				}
				for got := 0; got < want; {
					if err := r.SubmitAndWait(-1); err != nil {
						b.Fatal(err)
					}
					got += r.Reap(cs)
				}
				reaped += want
			}
			b.ReportMetric(float64(reaped)/float64(b.N), "cqes/op")
		})
	}
}

// BenchmarkSendZC sends payloads of 64 B to 1 MiB over a loopback TCP
// connection with plain sends and with zero-copy sends (each waited for
// to its notification), a goroutine draining the other end: ring only,
// to find where zero copy starts to pay on loopback (which copies on
// delivery all the same: a NIC's crossover is lower, see
// docs/decisions/0044).
func BenchmarkSendZC(b *testing.B) {
	for _, size := range []int{64, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20} {
		for _, zc := range []bool{false, true} {
			name := "send"
			if zc {
				name = "zc"
			}
			b.Run(fmt.Sprintf("%s/%d", name, size), func(b *testing.B) {
				if zc {
					if s, err := Probe(); err != nil || !s.HasFeature(SendZC) {
						b.Skip("no zero-copy send")
					}
				}
				benchSend(b, size, zc)
			})
		}
	}
}

func benchSend(b *testing.B, size int, zc bool) {
	r := mustOpen(b, Config{Entries: 64})
	srv, cli := tcpPair(b)
	done := make(chan struct{})
	go drain(*cli, make([]byte, 1<<20), done)
	defer func() {
		unix.Shutdown(*srv, unix.SHUT_WR)
		<-done
	}()
	p := make([]byte, size)
	cs := make([]Completion, 8)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		sendAll(b, r, *srv, p, zc, cs)
	}
	runtime.KeepAlive(p)
}

// drain reads fd into buf until its end, then closes done.
func drain(fd int, buf []byte, done chan<- struct{}) {
	defer close(done)
	for {
		if n, err := unix.Read(fd, buf); n <= 0 || err != nil {
			return
		}
	}
}

// sendAll sends all of p on fd, with plain or zero-copy sends, waiting
// for each send's result and, for zero copy, its notification.
func sendAll(b *testing.B, r *Ring, fd int, p []byte, zc bool, cs []Completion) {
	off := 0
	for off < len(p) {
		var err error
		if zc {
			err = r.PrepareSendZC(fd, p[off:], 1)
		} else {
			err = r.PrepareSend(fd, p[off:], 1)
		}
		if err != nil {
			b.Fatal(err)
		}
		pending := true
		for pending {
			if err := r.SubmitAndWait(-1); err != nil {
				b.Fatal(err)
			}
			n := r.Reap(cs)
			for i := 0; i < n; i++ {
				c := cs[i]
				if c.Notif() {
					pending = false
				} else if c.Res < 0 {
					b.Fatalf("send: %s", res(c.Res))
				} else {
					off += int(c.Res)
					pending = zc && c.More()
				}
			}
		}
	}
}

// BenchmarkFixedFile sends 64 bytes on one end of a socket pair and
// receives them on the other, both in one enter, naming the sockets by
// descriptor or by fixed file table slot (IOSQE_FIXED_FILE), which skips
// the descriptor table's lookup and reference per operation.
func BenchmarkFixedFile(b *testing.B) {
	for _, fixed := range []bool{false, true} {
		name := "descriptor"
		if fixed {
			name = "slot"
		}
		b.Run(name, func(b *testing.B) {
			r := mustOpen(b, Config{Entries: 64})
			p := socketpair(b)
			a, c := p[0], p[1]
			if fixed {
				if err := r.RegisterFiles(2); err != nil {
					b.Skipf("RegisterFiles: %v", err)
				}
				fds := onHeap(b, []int32{int32(p[0]), int32(p[1])})
				if err := r.PrepareFilesUpdateAlloc(fds, 9); err != nil {
					b.Fatal(err)
				}
				if got := newReaper(b, r).one(); got.Res != 2 {
					b.Fatalf("files update: %s", res(got.Res))
				}
				a, c = int(fds[0]), int(fds[1])
			}
			out := onHeap(b, make([]byte, 64))
			in := onHeap(b, make([]byte, 64))
			cs := make([]Completion, 4)
			b.ReportAllocs()
			for b.Loop() {
				if err := r.PrepareSend(a, out, 1); err != nil {
					b.Fatal(err)
				}
				if fixed {
					r.FixedFile()
				}
				if err := r.PrepareRecv(c, in, 2); err != nil {
					b.Fatal(err)
				}
				if fixed {
					r.FixedFile()
				}
				for got := 0; got < 2; {
					if err := r.SubmitAndWait(-1); err != nil {
						b.Fatal(err)
					}
					for _, e := range cs[:r.Reap(cs)] {
						if e.Res != 64 {
							b.Fatalf("completion %+v", e)
						}
						got++
					}
				}
			}
		})
	}
}
