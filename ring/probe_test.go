package ring

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func mustProbe(t *testing.T) *Support {
	t.Helper()
	s, err := Probe()
	if errors.Is(err, ErrUnavailable) {
		skipUnavailable(t, err)
	}
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	return s
}

func TestProbe(t *testing.T) {
	s := mustProbe(t)
	ops := s.Supported()
	for _, op := range []Op{OpRecv, OpSend, OpAccept} {
		if !slices.Contains(ops, op) || !s.Has(op) {
			t.Errorf("Supported() = %v lacks %v (Has: %v)", ops, op, s.Has(op))
		}
	}
	if err := s.Require(OpRecv, OpSend, OpAccept); err != nil {
		t.Errorf("Require(RECV, SEND, ACCEPT): %v", err)
	}
	err := s.Require(OpRecv, Op(250))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Require(Op(250)) = %v, want an unavailable error", err)
	}
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Feature, "OP(250)") || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Require(Op(250)) = %v, want it to name OP(250) and wrap ErrUnsupported", err)
	}
	again := mustProbe(t)
	if again != s {
		t.Errorf("second Probe returned %p, first %p: the probe is not cached", again, s)
	}
}

func TestOpString(t *testing.T) {
	tests := []struct {
		op   Op
		want string
	}{
		{OpRecv, "RECV"},
		{OpAsyncCancel, "ASYNC_CANCEL"},
		{OpMsgRing, "MSG_RING"},
		{Op(250), "OP(250)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.op.String(); got != tt.want {
				t.Errorf("Op(%d).String() = %q, want %q", uint8(tt.op), got, tt.want)
			}
		})
	}
}

// countSetups makes every io_uring_setup count in n.
func countSetups(t *testing.T, n *atomic.Int32) {
	t.Helper()
	real := sysSetup
	swapSyscalls(t, func(entries uint32, p *params) (int, error) {
		n.Add(1)
		return real(entries, p)
	}, nil)
}

// TestProbeCache checks what a fresh probe cache keeps: a conclusive answer
// (the opcodes, or "unavailable"), and never a transient error.
func TestProbeCache(t *testing.T) {
	mustProbe(t) // skips where io_uring is off
	tests := []struct {
		name string
		// first and then are the hook's errors for the first and the
		// second call (nil: set the probe ring up for real).
		first, then error
		// cached: the second call returns the first's answer, and
		// setups is how many probe rings the two calls set up.
		cached bool
		setups int32
	}{
		{"EMFILE is not cached", unix.EMFILE, nil, false, 1},
		{"ENOMEM is not cached", unix.ENOMEM, nil, false, 1},
		{"unavailable is cached", unix.EPERM, nil, true, 0},
		{"success is cached", nil, unix.EMFILE, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var setups atomic.Int32
			countSetups(t, &setups)
			hookErr := tt.first
			t.Cleanup(SetOpenHook(func() error { return hookErr }))
			var p prober
			s1, err1 := p.get()
			if tt.first == nil && err1 != nil || tt.first != nil && !errors.Is(err1, tt.first) {
				t.Fatalf("first probe: %v, want %v", err1, tt.first)
			}
			if got, want := errors.Is(err1, ErrUnavailable), tt.first == unix.EPERM; got != want {
				t.Errorf("first probe: errors.Is(%v, ErrUnavailable) = %v, want %v", err1, got, want)
			}
			hookErr = tt.then
			s2, err2 := p.get()
			if n := setups.Load(); n != tt.setups {
				t.Errorf("%d probe rings set up by two calls, want %d", n, tt.setups)
			}
			if tt.cached {
				if s2 != s1 || err2 != err1 {
					t.Errorf("second probe: %p, %v; want the cached %p, %v", s2, err2, s1, err1)
				}
				return
			}
			if err2 != nil || s2 == nil {
				t.Errorf("second probe after a transient %v: %v, want the opcodes", err1, err2)
			}
			if s3, _ := p.get(); s3 != s2 {
				t.Errorf("third probe returned %p, the second %p: success is not cached", s3, s2)
			}
		})
	}
}

// TestProbeConcurrent checks that concurrent callers share one probe, and
// that when it fails transiently the next caller probes again.
func TestProbeConcurrent(t *testing.T) {
	mustProbe(t)
	const callers = 8
	var setups, hooks atomic.Int32
	countSetups(t, &setups)
	// The first probe fails as if the descriptor table were full.
	restore := SetOpenHook(func() error {
		if hooks.Add(1) == 1 {
			return unix.EMFILE
		}
		return nil
	})
	t.Cleanup(restore)
	var p prober
	type result struct {
		s   *Support
		err error
	}
	results := make(chan result, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			s, err := p.get()
			results <- result{s, err}
		})
	}
	wg.Wait()
	close(results)
	var failed int
	var shared *Support
	for r := range results {
		switch {
		case r.err != nil:
			failed++
			if !errors.Is(r.err, unix.EMFILE) || errors.Is(r.err, ErrUnavailable) {
				t.Errorf("probe failed with %v, want the hook's transient EMFILE", r.err)
			}
		case shared == nil:
			shared = r.s
		case r.s != shared:
			t.Errorf("callers got different answers %p and %p", r.s, shared)
		}
	}
	if failed != 1 {
		t.Errorf("%d of %d callers saw the one transient failure, want 1", failed, callers)
	}
	if n := setups.Load(); n != 1 {
		t.Errorf("%d probe rings set up for %d callers, want 1 after the failed one", n, callers)
	}
}

// TestProbeReadFailureClosesRing checks that the probe ring is closed when
// the kernel refuses the probe, whether that is conclusive or not.
func TestProbeReadFailureClosesRing(t *testing.T) {
	mustProbe(t)
	tests := []struct {
		name        string
		errno       unix.Errno
		unavailable bool
	}{
		{"no probe on this kernel", unix.EINVAL, true},
		{"transient", unix.EFAULT, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fds := make(chan int, 1)
			real := sysSetup
			swapSyscalls(t, func(entries uint32, p *params) (int, error) {
				fd, err := real(entries, p)
				if err == nil {
					fds <- fd
				}
				return fd, err
			}, func(fd int, op uint32, arg unsafe.Pointer, n uint32) error {
				if op == registerProbe {
					return tt.errno
				}
				return registerSyscall(fd, op, arg, n)
			})
			var p prober
			_, err := p.get()
			if !errors.Is(err, tt.errno) || errors.Is(err, ErrUnavailable) != tt.unavailable {
				t.Fatalf("probe: %v, want %v (unavailable: %v)", err, tt.errno, tt.unavailable)
			}
			fd := <-fds
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
				t.Errorf("probe ring descriptor %d after the failed probe: fcntl gives %v, want EBADF", fd, err)
			}
		})
	}
}
