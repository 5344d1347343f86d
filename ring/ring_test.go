package ring

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// waitLimit bounds every wait for a completion: the machine is shared and
// noisy, so it is generous, and a test that reaches it has failed.
const waitLimit = 10 * time.Second

// skipUnavailable skips a test that needs what this host's io_uring lacks,
// or fails it where PERCORE_REQUIRE_URING is set (by .ci/run: see
// internal/pctest.NeedURing, which this package cannot import).
func skipUnavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("PERCORE_REQUIRE_URING") != "" {
		tb.Fatalf("io_uring is unavailable here, and PERCORE_REQUIRE_URING is set: %v", err)
	}
	tb.Skipf("io_uring unavailable here (%v); set PERCORE_REQUIRE_URING=1 to fail instead", err)
}

// mustOpen opens a ring that the test's cleanup closes, and skips the test
// when io_uring cannot be used on this host.
func mustOpen(tb testing.TB, cfg Config) *Ring {
	tb.Helper()
	r, err := Open(cfg)
	if errors.Is(err, ErrUnavailable) {
		skipUnavailable(tb, err)
	}
	if err != nil {
		tb.Fatalf("Open(%+v): %v", cfg, err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// mustBufRing registers a provided-buffer ring that the test's cleanup
// closes (before the ring, as cleanups run last-in first-out).
func mustBufRing(tb testing.TB, r *Ring, group uint16, count, size int) *BufRing {
	tb.Helper()
	b, err := r.NewBufRing(group, count, size)
	if errors.Is(err, ErrUnavailable) {
		skipUnavailable(tb, err)
	}
	if err != nil {
		tb.Fatalf("NewBufRing(%d, %d, %d): %v", group, count, size, err)
	}
	tb.Cleanup(func() {
		if err := b.Close(); err != nil {
			tb.Errorf("BufRing.Close: %v", err)
		}
	})
	return b
}

// reaper collects a ring's completions in arrival order.
type reaper struct {
	tb    testing.TB
	r     *Ring
	ready []Completion
}

func newReaper(tb testing.TB, r *Ring) *reaper { return &reaper{tb: tb, r: r} }

// take enters the kernel until n completions arrived and returns them, in
// arrival order. It fails the test after waitLimit.
func (q *reaper) take(n int) []Completion {
	q.tb.Helper()
	deadline := time.Now().Add(waitLimit)
	var buf [16]Completion
	for len(q.ready) < n {
		if time.Now().After(deadline) {
			q.tb.Fatalf("%d of %d completions after %v: %v", len(q.ready), n, waitLimit, q.ready)
		}
		if err := q.r.SubmitAndWait(50 * time.Millisecond); err != nil && !errors.Is(err, ErrBusy) {
			q.tb.Fatalf("SubmitAndWait: %v", err)
		}
		k := q.r.Reap(buf[:])
		q.ready = append(q.ready, buf[:k]...)
	}
	got := q.ready[:n:n]
	q.ready = q.ready[n:]
	return got
}

// one returns the next completion.
func (q *reaper) one() Completion {
	q.tb.Helper()
	return q.take(1)[0]
}

// byData returns n completions keyed by user data, failing the test on a
// duplicate.
func (q *reaper) byData(n int) map[uint64]Completion {
	q.tb.Helper()
	m := make(map[uint64]Completion, n)
	for _, c := range q.take(n) {
		if _, dup := m[c.UserData]; dup {
			q.tb.Fatalf("two completions with user data %d: %v", c.UserData, c)
		}
		m[c.UserData] = c
	}
	return m
}

// res formats a completion result, naming a negative errno.
func res(r int32) string {
	if r < 0 {
		return fmt.Sprintf("%d (%v)", r, unix.Errno(-r))
	}
	return fmt.Sprint(r)
}

// wantRes fails the test unless c completed with want.
func wantRes(tb testing.TB, what string, c Completion, want int32) {
	tb.Helper()
	if c.Res != want {
		tb.Fatalf("%s: result %s, want %s", what, res(c.Res), res(want))
	}
}

// errno returns the result a completion carries for e.
func errno(e unix.Errno) int32 { return -int32(e) }

// socketpair returns a connected AF_UNIX stream pair whose descriptors the
// test's cleanup closes unless closeFd already did.
func socketpair(tb testing.TB) *[2]int {
	tb.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatalf("socketpair: %v", err)
	}
	p := &[2]int{fds[0], fds[1]}
	tb.Cleanup(func() {
		closeFd(tb, &p[0])
		closeFd(tb, &p[1])
	})
	return p
}

// closeFd closes *fd once and marks it closed with -1.
func closeFd(tb testing.TB, fd *int) {
	tb.Helper()
	if *fd < 0 {
		return
	}
	if err := unix.Close(*fd); err != nil {
		tb.Errorf("close %d: %v", *fd, err)
	}
	*fd = -1
}

// write writes all of p to fd.
func write(tb testing.TB, fd int, p []byte) {
	tb.Helper()
	n, err := unix.Write(fd, p)
	if err != nil || n != len(p) {
		tb.Fatalf("write %q to %d: %d, %v", p, fd, n, err)
	}
}

// swapSyscalls replaces the setup and register syscalls for one test (nil
// keeps the real one) and restores them in its cleanup.
func swapSyscalls(t *testing.T, setup func(uint32, *params) (int, error), register func(int, uint32, unsafe.Pointer, uint32) error) {
	t.Helper()
	oldSetup, oldRegister := sysSetup, sysRegister
	t.Cleanup(func() { sysSetup, sysRegister = oldSetup, oldRegister })
	if setup != nil {
		sysSetup = setup
	}
	if register != nil {
		sysRegister = register
	}
}

func TestOpenSizes(t *testing.T) {
	tests := []struct {
		name           string
		cfg            Config
		wantSQ, wantCQ uint32
	}{
		{"zero config", Config{}, 1024, 4096},
		{"entries 8", Config{Entries: 8}, 8, 32},
		{"entries rounded up", Config{Entries: 5}, 8, 32},
		{"cq entries rounded up", Config{Entries: 8, CQEntries: 100}, 8, 128},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustOpen(t, tt.cfg)
			if got := r.sq.entries; got != tt.wantSQ {
				t.Errorf("submission queue has %d entries, want %d", got, tt.wantSQ)
			}
			if got := r.cq.mask + 1; got != tt.wantCQ {
				t.Errorf("completion queue has %d entries, want %d", got, tt.wantCQ)
			}
			if r.Fd() < 0 {
				t.Errorf("Fd() = %d", r.Fd())
			}
			if r.Flags() != tt.cfg.Flags {
				t.Errorf("Flags() = %v, want %v", r.Flags(), tt.cfg.Flags)
			}
		})
	}
}

func TestOpenUnavailable(t *testing.T) {
	t.Run("setup refused", func(t *testing.T) {
		restore := SetOpenHook(func() error { return unix.EPERM })
		r, err := Open(Config{})
		restore()
		if err == nil {
			r.Close()
			t.Fatal("Open succeeded with a hook returning EPERM")
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("errors.Is(%v, ErrUnavailable) = false", err)
		}
		if !errors.Is(err, unix.EPERM) {
			t.Errorf("errors.Is(%v, EPERM) = false", err)
		}
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Feature != "io_uring_setup" {
			t.Errorf("error %v (%T) does not name feature io_uring_setup", err, err)
		}
	})
	t.Run("hook restored", func(t *testing.T) {
		mustOpen(t, Config{Entries: 4})
	})
	t.Run("defer taskrun without single issuer", func(t *testing.T) {
		mustOpen(t, Config{Entries: 4}) // where io_uring is off, every setup fails alike
		r, err := Open(Config{Entries: 4, Flags: DeferTaskrun})
		if err == nil {
			r.Close()
			t.Fatal("Open with DeferTaskrun alone succeeded; the kernel requires SingleIssuer with it")
		}
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("error %v is not an unavailable EINVAL", err)
		}
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Feature != "setup flags DEFER_TASKRUN" {
			t.Errorf("error %v does not name the setup flags", err)
		}
	})
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name        string
		feature     string
		err         error
		errno       unix.Errno
		unavailable bool
		wantFeature string
	}{
		{"EPERM", "", unix.EPERM, unix.EPERM, true, "io_uring_setup"},
		{"EACCES", "", unix.EACCES, unix.EACCES, true, "io_uring_setup"},
		{"ENOSYS", "", unix.ENOSYS, unix.ENOSYS, true, "io_uring_setup"},
		{"EINVAL", "", unix.EINVAL, unix.EINVAL, true, "io_uring_setup"},
		{"EOPNOTSUPP", "", unix.EOPNOTSUPP, unix.EOPNOTSUPP, true, "io_uring_setup"},
		{"EINVAL naming a feature", "setup flags SQPOLL", unix.EINVAL, unix.EINVAL, true, "setup flags SQPOLL"},
		{"wrapped EPERM", "", fmt.Errorf("mmap: %w", unix.EPERM), unix.EPERM, true, "io_uring_setup"},
		{"ENOMEM", "", unix.ENOMEM, unix.ENOMEM, false, ""},
		{"EMFILE", "", unix.EMFILE, unix.EMFILE, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := classify("io_uring_setup", tt.feature, tt.err)
			if !errors.Is(err, tt.errno) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.errno)
			}
			if got := errors.Is(err, ErrUnavailable); got != tt.unavailable {
				t.Fatalf("errors.Is(%v, ErrUnavailable) = %v, want %v", err, got, tt.unavailable)
			}
			if tt.unavailable {
				var ue *UnavailableError
				if !errors.As(err, &ue) {
					t.Fatalf("%v is a %T, want *UnavailableError", err, err)
				}
				if ue.Feature != tt.wantFeature {
					t.Errorf("Feature = %q, want %q", ue.Feature, tt.wantFeature)
				}
				if n := strings.Count(err.Error(), "io_uring_setup"); n != 1 {
					t.Errorf("%q names io_uring_setup %d times, want once", err, n)
				}
				return
			}
			var se *os.SyscallError
			if !errors.As(err, &se) || se.Syscall != "io_uring_setup" {
				t.Errorf("%v (%T) is not an *os.SyscallError for io_uring_setup", err, err)
			}
		})
	}
	t.Run("not an errno", func(t *testing.T) {
		cause := errors.New("no such thing")
		err := classify("io_uring_setup", "", cause)
		if errors.Is(err, ErrUnavailable) || !errors.Is(err, cause) {
			t.Errorf("classify(%v) = %v", cause, err)
		}
	})
}

func TestFlagsString(t *testing.T) {
	tests := []struct {
		name  string
		flags Flags
		want  string
	}{
		{"none", 0, "none"},
		{"one", SingleIssuer, "SINGLE_ISSUER"},
		{"two", SingleIssuer | DeferTaskrun, "SINGLE_ISSUER|DEFER_TASKRUN"},
		{"all", SingleIssuer | DeferTaskrun | CoopTaskrun | SQPoll, "SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN|SQPOLL"},
		{"kernel order", SQPoll | CoopTaskrun, "COOP_TASKRUN|SQPOLL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.flags.String(); got != tt.want {
				t.Errorf("Flags(%#x).String() = %q, want %q", uint32(tt.flags), got, tt.want)
			}
		})
	}
}

func TestSubmitFullQueue(t *testing.T) {
	const (
		entries = 8
		cancels = 100
		base    = 1 << 40 // targets of the cancels; nothing in flight has them
	)
	r := mustOpen(t, Config{Entries: entries})
	for i := range uint64(cancels) {
		if err := r.PrepareCancel(base+i, i); err != nil {
			t.Fatalf("prepare cancel %d of %d with %d entries: %v", i, cancels, entries, err)
		}
		if p := r.Pending(); p > entries {
			t.Fatalf("%d pending submissions in a queue of %d", p, entries)
		}
	}
	// Twelve full queues were submitted, and their cancels completed at
	// once: more than the 32-entry completion queue holds.
	if !r.Overflowed() {
		t.Errorf("Overflowed() = false with %d completions for a completion queue of %d", cancels-cancels%entries, 4*entries)
	}
	wantCancels(t, r, cancels)
	if r.Overflowed() {
		t.Error("Overflowed() after every completion was reaped")
	}
}

func TestSubmitAndWaitTimeout(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	before := r.Enters()
	if err := r.SubmitAndWait(10 * time.Millisecond); err != nil {
		t.Fatalf("SubmitAndWait with nothing in flight: %v", err)
	}
	if err := r.SubmitAndWait(0); err != nil {
		t.Fatalf("SubmitAndWait(0): %v", err)
	}
	if err := r.Submit(); err != nil {
		t.Fatalf("Submit with nothing prepared: %v", err)
	}
	if got := r.Enters() - before; got != 3 {
		t.Errorf("Enters() grew by %d over three enters", got)
	}
	var buf [4]Completion
	if n := r.Reap(buf[:]); n != 0 {
		t.Errorf("Reap returned %d completions with nothing in flight: %v", n, buf[:n])
	}
}

func TestCloseIdempotent(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	fd := r.Fd()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("ring descriptor %d after Close: fcntl gives %v, want EBADF", fd, err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestDeferTaskrun checks that a SingleIssuer|DeferTaskrun ring delivers
// completions only when its owner enters the kernel.
func TestDeferTaskrun(t *testing.T) {
	// The kernel ties such a ring to the thread that created it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := Open(Config{Entries: 8, Flags: SingleIssuer | DeferTaskrun})
	if errors.Is(err, ErrUnavailable) {
		skipUnavailable(t, err) // the loops' default flags (6.1+)
	}
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	p := socketpair(t)
	buf := onHeap(t, make([]byte, 64)) // the kernel writes it after the submit
	if err := r.PrepareRecv(p[0], buf, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.Submit(); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	var cs [4]Completion
	if n := r.Reap(cs[:]); n != 0 {
		t.Fatalf("completions before any data: %v", cs[:n])
	}
	write(t, p[1], []byte("deferred"))
	if n := r.Ready(); n != 0 {
		t.Fatalf("Ready() = %d before the owner entered the kernel", n)
	}
	if err := r.Submit(); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	n := r.Reap(cs[:])
	if n != 1 {
		t.Fatalf("Reap after Submit returned %d completions, want 1: %v", n, cs[:n])
	}
	wantRes(t, "recv", cs[0], int32(len("deferred")))
	if got := string(buf[:cs[0].Res]); got != "deferred" {
		t.Errorf("recv read %q, want %q", got, "deferred")
	}
}

// TestFlagSets runs a receive round trip on a ring of each flag set.
func TestFlagSets(t *testing.T) {
	tests := []struct {
		name  string
		flags Flags
	}{
		{"none", 0},
		{"coop taskrun", CoopTaskrun},
		{"single issuer", SingleIssuer},
		{"single issuer and defer taskrun", SingleIssuer | DeferTaskrun},
		{"sqpoll", SQPoll},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A single-issuer ring is tied to the thread that created it.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r, err := Open(Config{Entries: 8, Flags: tt.flags, SQPollIdle: 10 * time.Millisecond})
			if errors.Is(err, ErrUnavailable) {
				if tt.flags&^(SingleIssuer|DeferTaskrun) == 0 {
					skipUnavailable(t, err) // what the loops need
				}
				// Optional flags (COOP_TASKRUN, SQPOLL) may be
				// missing or refused on a host that runs the loops.
				t.Skipf("rings with %v unavailable on this host: %v", tt.flags, err)
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer r.Close()
			if r.Flags() != tt.flags {
				t.Errorf("Flags() = %v, want %v", r.Flags(), tt.flags)
			}
			p := socketpair(t)
			q := newReaper(t, r)
			for i := range 3 {
				buf := onHeap(t, make([]byte, 16))
				if err := r.PrepareRecv(p[0], buf, uint64(i)); err != nil {
					t.Fatal(err)
				}
				msg := fmt.Sprintf("round %d", i)
				write(t, p[1], []byte(msg))
				c := q.one()
				if c.UserData != uint64(i) {
					t.Fatalf("completion for user data %d, want %d", c.UserData, i)
				}
				wantRes(t, "recv", c, int32(len(msg)))
				if got := string(buf[:c.Res]); got != msg {
					t.Fatalf("recv read %q, want %q", got, msg)
				}
			}
		})
	}
}

// TestSQPollFullQueue prepares many times the submission queue's size on an
// SQPOLL ring: a full queue must wait for the kernel's poller thread to
// consume entries, whether it is spinning or asleep, rather than fail.
func TestSQPollFullQueue(t *testing.T) {
	const (
		entries = 8
		cancels = 16 * entries
		base    = 1 << 40 // targets of the cancels; nothing in flight has them
	)
	tests := []struct {
		name   string
		idle   time.Duration
		asleep bool
	}{
		{"poller spinning", time.Second, false},
		{"poller asleep", time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Open(Config{Entries: entries, Flags: SQPoll, SQPollIdle: tt.idle})
			if errors.Is(err, ErrUnavailable) {
				t.Skipf("rings with %v unavailable on this host: %v", SQPoll, err)
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { r.Close() })
			if tt.asleep {
				// The poller sets NEED_WAKEUP once it has idled
				// for SQPollIdle with nothing to do.
				deadline := time.Now().Add(waitLimit)
				for atomic.LoadUint32(r.sq.flags)&sqNeedWakeup == 0 {
					if time.Now().After(deadline) {
						t.Fatalf("the SQPOLL thread did not go to sleep within %v", waitLimit)
					}
					time.Sleep(time.Millisecond)
				}
			}
			for i := range uint64(cancels) {
				if err := r.PrepareCancel(base+i, i); err != nil {
					t.Fatalf("prepare cancel %d of %d with %d entries: %v", i, cancels, entries, err)
				}
				if p := r.Pending(); p > entries {
					t.Fatalf("%d pending submissions in a queue of %d", p, entries)
				}
			}
			wantCancels(t, r, cancels)
		})
	}
}

// TestSQPollSubmitWithoutEnter checks that Submit on an SQPOLL ring whose
// poller is awake publishes the entries without entering the kernel.
func TestSQPollSubmitWithoutEnter(t *testing.T) {
	// A long idle keeps the poller awake for the whole test.
	r, err := Open(Config{Entries: 8, Flags: SQPoll, SQPollIdle: 10 * time.Second})
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("rings with %v unavailable on this host: %v", SQPoll, err)
	}
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	q := newReaper(t, r)
	// A new poller may be asleep: a first round trip wakes it, and it
	// then spins for SQPollIdle.
	if err := r.PrepareCancel(1<<40, 0); err != nil {
		t.Fatal(err)
	}
	wantRes(t, "first cancel", q.one(), 0)
	if f := atomic.LoadUint32(r.sq.flags); f&(sqNeedWakeup|sqCQOverflow|sqTaskrun) != 0 {
		t.Skipf("submission queue flags %#x ask for an enter: the poller went back to sleep", f)
	}
	before := r.Enters()
	if err := r.PrepareCancel(1<<40, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.Submit(); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if got := r.Enters() - before; got != 0 {
		t.Errorf("Submit entered the kernel %d times with the poller awake", got)
	}
	c := q.one()
	if c.UserData != 1 {
		t.Fatalf("completion for user data %d, want 1", c.UserData)
	}
	wantRes(t, "cancel", c, 0)
}

func TestSQThreadIdle(t *testing.T) {
	tests := []struct {
		name string
		idle time.Duration
		want uint32
	}{
		{"zero is the kernel default", 0, 0},
		{"negative is the kernel default", -time.Second, 0},
		{"below a millisecond", 100 * time.Microsecond, 1},
		{"one nanosecond", 1, 1},
		{"whole milliseconds", 10 * time.Millisecond, 10},
		{"rounded up", 10*time.Millisecond + 1, 11},
		{"clamped", 1 << 62, 1<<32 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sqThreadIdle(tt.idle); got != tt.want {
				t.Errorf("sqThreadIdle(%v) = %d, want %d", tt.idle, got, tt.want)
			}
		})
	}
}

func TestSetBatchWait(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	if err := r.SetBatchWait(8, 50*time.Microsecond); errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("batched waits unavailable on this host: %v", err)
	} else if err != nil {
		t.Fatalf("SetBatchWait: %v", err)
	}
	tests := []struct {
		name        string
		n           int
		minWait     time.Duration
		wantN       uint32
		wantMinWait uint32
	}{
		{"on", 8, 50 * time.Microsecond, 8, 50},
		{"below a microsecond", 4, 100, 4, 1},
		{"off with n 1", 1, time.Millisecond, 0, 0},
		{"on again", 8, time.Millisecond, 8, 1000},
		{"off with no wait", 8, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := r.SetBatchWait(tt.n, tt.minWait); err != nil {
				t.Fatalf("SetBatchWait(%d, %v): %v", tt.n, tt.minWait, err)
			}
			if r.waitNr != tt.wantN || r.arg.minWait != tt.wantMinWait {
				t.Errorf("SetBatchWait(%d, %v) set %d and %dµs, want %d and %dµs",
					tt.n, tt.minWait, r.waitNr, r.arg.minWait, tt.wantN, tt.wantMinWait)
			}
			// A wait with nothing in flight times out, batched or not.
			if err := r.SubmitAndWait(time.Millisecond); err != nil {
				t.Fatalf("SubmitAndWait: %v", err)
			}
			// A wait without a timeout returns once a completion
			// is there (and, batched, minWait has passed): the
			// cancel completes while it is submitted.
			if err := r.PrepareCancel(1<<40, 1); err != nil {
				t.Fatal(err)
			}
			if err := r.SubmitAndWait(-1); err != nil {
				t.Fatalf("SubmitAndWait(-1): %v", err)
			}
			var cs [2]Completion
			if n := r.Reap(cs[:]); n != 1 {
				t.Fatalf("Reap after SubmitAndWait(-1) returned %d completions, want 1: %v", n, cs[:n])
			}
			wantRes(t, "cancel", cs[0], 0)
		})
	}
}

// wantCancels reaps n completions with user data 0..n-1, each a cancel
// that found nothing to cancel (a cancel of every match completes with the
// number it found).
func wantCancels(t *testing.T, r *Ring, n int) {
	t.Helper()
	got := newReaper(t, r).byData(n)
	for i := range uint64(n) {
		c, ok := got[i]
		if !ok {
			t.Fatalf("no completion for cancel %d", i)
		}
		wantRes(t, fmt.Sprintf("cancel %d", i), c, 0)
	}
}

// TestOpenMissingFeature checks that a kernel without a feature the loops
// need is reported as unavailable, naming the feature, and that Open closes
// the ring it set up.
func TestOpenMissingFeature(t *testing.T) {
	mustOpen(t, Config{Entries: 4})
	fds := make(chan int, 1)
	real := sysSetup
	swapSyscalls(t, func(entries uint32, p *params) (int, error) {
		fd, err := real(entries, p)
		if err == nil {
			p.features &^= featExtArg // as a 5.10 kernel answers
			fds <- fd
		}
		return fd, err
	}, nil)
	r, err := Open(Config{Entries: 4})
	if err == nil {
		r.Close()
		t.Fatal("Open succeeded without IORING_FEAT_EXT_ARG")
	}
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Feature, "IORING_FEAT_EXT_ARG") || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Open: %v, want an unavailable error naming IORING_FEAT_EXT_ARG", err)
	}
	fd := <-fds
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Errorf("ring descriptor %d after the failed Open: fcntl gives %v, want EBADF", fd, err)
	}
}
