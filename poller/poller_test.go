package poller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitLimit bounds every wait for an event: the machine is shared and
// noisy, so it is generous, and a test that reaches it has failed.
const waitLimit = 10 * time.Second

func mustOpen(t *testing.T, batch int) *Poller {
	t.Helper()
	p, err := Open(batch)
	if err != nil {
		t.Fatalf("Open(%d): %v", batch, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// socketpair returns a connected AF_UNIX stream pair whose descriptors the
// test's cleanup closes unless closeFd already did.
func socketpair(t *testing.T) *[2]int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	sp := &[2]int{fds[0], fds[1]}
	t.Cleanup(func() {
		closeFd(t, &sp[0])
		closeFd(t, &sp[1])
	})
	return sp
}

// closeFd closes *fd once and marks it closed with -1.
func closeFd(t *testing.T, fd *int) {
	t.Helper()
	if *fd < 0 {
		return
	}
	if err := unix.Close(*fd); err != nil {
		t.Errorf("close %d: %v", *fd, err)
	}
	*fd = -1
}

func write(t *testing.T, fd int, b []byte) {
	t.Helper()
	if n, err := unix.Write(fd, b); err != nil || n != len(b) {
		t.Fatalf("write %q to %d: %d, %v", b, fd, n, err)
	}
}

// event is a copy of one Event, which outlives the poller's buffer.
type event struct {
	events uint32
	data   uint64
}

func (e event) String() string { return fmt.Sprintf("{events %#x data %#x}", e.events, e.data) }

func copyEvents(evs []Event) []event {
	out := make([]event, len(evs))
	for i := range evs {
		out[i] = event{evs[i].Events(), evs[i].Data()}
	}
	return out
}

// look waits zero time and returns the events ready now.
func look(t *testing.T, p *Poller) []event {
	t.Helper()
	evs, err := p.Wait(0)
	if err != nil {
		t.Fatalf("Wait(0): %v", err)
	}
	return copyEvents(evs)
}

// await waits until an event with data arrives and returns it, failing the
// test after waitLimit.
func await(t *testing.T, p *Poller, data uint64) event {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		evs, err := p.Wait(50 * time.Millisecond)
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		for _, e := range copyEvents(evs) {
			if e.data == data {
				return e
			}
		}
	}
	t.Fatalf("no event with data %#x after %v", data, waitLimit)
	return event{}
}

// only fails the test unless evs is one event with data whose bits include
// want.
func only(t *testing.T, evs []event, data uint64, want uint32) {
	t.Helper()
	if len(evs) != 1 || evs[0].data != data || evs[0].events&want != want {
		t.Fatalf("events %v, want one with data %#x and bits %#x", evs, data, want)
	}
}

func TestReadiness(t *testing.T) {
	const data = 42
	tests := []struct {
		name string
		run  func(t *testing.T, p *Poller, sp *[2]int)
	}{
		{"in is level-triggered", func(t *testing.T, p *Poller, sp *[2]int) {
			if err := p.Add(sp[0], In, data); err != nil {
				t.Fatal(err)
			}
			if evs := look(t, p); len(evs) != 0 {
				t.Fatalf("events before any data: %v", evs)
			}
			write(t, sp[1], []byte("x"))
			only(t, []event{await(t, p, data)}, data, In)
			// Unread data is reported again.
			only(t, look(t, p), data, In)
			var buf [8]byte
			if _, err := unix.Read(sp[0], buf[:]); err != nil {
				t.Fatal(err)
			}
			if evs := look(t, p); len(evs) != 0 {
				t.Fatalf("events after the data was read: %v", evs)
			}
		}},
		{"edge-triggered in is reported once", func(t *testing.T, p *Poller, sp *[2]int) {
			if err := p.Add(sp[0], In|EdgeTriggered, data); err != nil {
				t.Fatal(err)
			}
			write(t, sp[1], []byte("x"))
			only(t, []event{await(t, p, data)}, data, In)
			if evs := look(t, p); len(evs) != 0 {
				t.Fatalf("edge-triggered events again without new data: %v", evs)
			}
		}},
		{"out", func(t *testing.T, p *Poller, sp *[2]int) {
			if err := p.Add(sp[0], Out, data); err != nil {
				t.Fatal(err)
			}
			only(t, look(t, p), data, Out)
		}},
		{"modify", func(t *testing.T, p *Poller, sp *[2]int) {
			if err := p.Add(sp[0], In, data); err != nil {
				t.Fatal(err)
			}
			if evs := look(t, p); len(evs) != 0 {
				t.Fatalf("In events on an idle socket: %v", evs)
			}
			if err := p.Modify(sp[0], In|Out, data+1); err != nil {
				t.Fatal(err)
			}
			only(t, look(t, p), data+1, Out)
		}},
		{"delete", func(t *testing.T, p *Poller, sp *[2]int) {
			if err := p.Add(sp[0], In|Out, data); err != nil {
				t.Fatal(err)
			}
			only(t, look(t, p), data, Out)
			if err := p.Delete(sp[0]); err != nil {
				t.Fatal(err)
			}
			write(t, sp[1], []byte("x"))
			if evs := look(t, p); len(evs) != 0 {
				t.Fatalf("events after Delete: %v", evs)
			}
		}},
		{"peer close", func(t *testing.T, p *Poller, sp *[2]int) {
			if err := p.Add(sp[0], In|RDHup, data); err != nil {
				t.Fatal(err)
			}
			closeFd(t, &sp[1])
			// Hup is always reported; RDHup and In (end of stream) were
			// asked for.
			only(t, []event{await(t, p, data)}, data, In|RDHup|Hup)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, mustOpen(t, 0), socketpair(t))
		})
	}
}

func TestControlErrors(t *testing.T) {
	p := mustOpen(t, 8)
	sp := socketpair(t)
	tests := []struct {
		name string
		call func() error
		want unix.Errno
	}{
		{"modify unregistered", func() error { return p.Modify(sp[0], In, 1) }, unix.ENOENT},
		{"delete unregistered", func() error { return p.Delete(sp[0]) }, unix.ENOENT},
		{"add", func() error { return p.Add(sp[0], In, 1) }, 0},
		{"add twice", func() error { return p.Add(sp[0], In, 1) }, unix.EEXIST},
		{"add a closed descriptor", func() error { return p.Add(-1, In, 1) }, unix.EBADF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if tt.want == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var se *os.SyscallError
			if !errors.Is(err, tt.want) || !errors.As(err, &se) || se.Syscall != "epoll_ctl" {
				t.Errorf("error %v (%T), want epoll_ctl: %v", err, err, tt.want)
			}
		})
	}
}

func TestDataRoundTrip(t *testing.T) {
	values := []uint64{0, 1, 1<<32 - 1, 1 << 32, 0x0123_4567_89ab_cdef, 1 << 63, 0xfedc_ba98_7654_3210, WakeData - 1}
	for _, v := range values {
		t.Run(fmt.Sprintf("%#x", v), func(t *testing.T) {
			p := mustOpen(t, 4)
			sp := socketpair(t)
			if err := p.Add(sp[0], Out, v); err != nil {
				t.Fatal(err)
			}
			only(t, look(t, p), v, Out)
			if err := p.Modify(sp[0], Out, ^v); err != nil {
				t.Fatal(err)
			}
			only(t, look(t, p), ^v, Out)
			if e := NewEvent(In|Hup, v); e.Data() != v || e.Events() != In|Hup {
				t.Errorf("NewEvent(%#x, %#x) = %#x, %#x", In|Hup, v, e.Events(), e.Data())
			}
		})
	}
}

func TestWaitTimeout(t *testing.T) {
	p := mustOpen(t, 0)
	tests := []struct {
		name    string
		timeout time.Duration
	}{
		{"zero looks", 0},
		{"short", time.Millisecond},
		{"rounded up to a millisecond", time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := p.Waits()
			evs, err := p.Wait(tt.timeout)
			if err != nil || len(evs) != 0 {
				t.Fatalf("Wait(%v) with nothing ready = %v, %v; want no events and no error", tt.timeout, copyEvents(evs), err)
			}
			if got := p.Waits() - before; got != 1 {
				t.Errorf("Waits() grew by %d over one Wait", got)
			}
		})
	}
}

func TestBatch(t *testing.T) {
	const fds = 5
	p := mustOpen(t, 2)
	for i := range fds {
		sp := socketpair(t)
		if err := p.Add(sp[0], Out, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	seen := make(map[uint64]bool)
	for range fds {
		evs := look(t, p)
		if len(evs) > 2 {
			t.Fatalf("%d events from a poller of batch 2", len(evs))
		}
		for _, e := range evs {
			seen[e.data] = true
		}
	}
	if len(seen) != fds {
		t.Errorf("saw %d of %d ready descriptors through a batch of 2: %v", len(seen), fds, seen)
	}
}

// wakeCounter reads the eventfd's counter without Drain's bookkeeping.
func wakeCounter(t *testing.T, p *Poller) uint64 {
	t.Helper()
	var buf [8]byte
	n, err := unix.Read(p.wakefd, buf[:])
	if errors.Is(err, unix.EAGAIN) {
		return 0
	}
	if err != nil || n != 8 {
		t.Fatalf("read eventfd: %d, %v", n, err)
	}
	return binary.NativeEndian.Uint64(buf[:])
}

func TestWake(t *testing.T) {
	const (
		wakers = 8
		wakes  = 50 // per waker
		rounds = 3
	)
	p := mustOpen(t, 0)
	for round := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, wakers*wakes)
		for range wakers {
			wg.Go(func() {
				for range wakes {
					if err := p.Wake(); err != nil {
						errs <- err
					}
				}
			})
		}
		// The owner waits while the wakers run.
		only(t, []event{await(t, p, WakeData)}, WakeData, In)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Wake: %v", err)
		}
		only(t, look(t, p), WakeData, In) // level-triggered until drained
		if n := wakeCounter(t, p); n != 1 {
			t.Fatalf("round %d: %d wake-ups reached the eventfd, want them coalesced into 1", round, n)
		}
		p.Drain()
		if evs := look(t, p); len(evs) != 0 {
			t.Fatalf("round %d: events after Drain: %v", round, evs)
		}
	}
	// Drain with nothing to drain is harmless, and Wake works after it.
	p.Drain()
	if err := p.Wake(); err != nil {
		t.Fatal(err)
	}
	only(t, look(t, p), WakeData, In)
	p.Drain()
}

func TestClose(t *testing.T) {
	p, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	fds := []int{p.epfd, p.wakefd}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, fd := range fds {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
			t.Errorf("descriptor %d after Close: fcntl gives %v, want EBADF", fd, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestWaitFallsBackToPwait: a poller on a kernel without epoll_pwait2
// (pwait1, as its first ENOSYS or EPERM sets) still looks, waits with a
// limit and wakes.
func TestWaitFallsBackToPwait(t *testing.T) {
	for _, pwait1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("pwait1=%v", pwait1), func(t *testing.T) {
			p := mustOpen(t, 4)
			p.pwait1 = pwait1
			for _, timeout := range []time.Duration{0, time.Microsecond, time.Millisecond} {
				if evs, err := p.Wait(timeout); err != nil || len(evs) != 0 {
					t.Fatalf("Wait(%v) with nothing ready = %v, %v", timeout, copyEvents(evs), err)
				}
			}
			if err := p.Wake(); err != nil {
				t.Fatal(err)
			}
			evs, err := p.Wait(waitLimit)
			if err != nil || len(evs) != 1 || evs[0].Data() != WakeData {
				t.Fatalf("Wait after Wake = %v, %v; want the wake-up", copyEvents(evs), err)
			}
			p.Drain()
			if pwait1 && !p.pwait1 {
				t.Error("the fallback to epoll_pwait was undone")
			}
		})
	}
}
