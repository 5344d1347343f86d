package ring

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestFeatures checks the probe's answer on the running kernel: a kernel
// with IORING_FEAT_MIN_TIMEOUT (6.12, newer than every feature but NAPI)
// has them all, and NAPI is there or refused as unknown (a kernel built
// without CONFIG_NET_RX_BUSY_POLL). Elsewhere each missing feature must
// say why, as an unavailable error.
func TestFeatures(t *testing.T) {
	s := mustProbe(t)
	r := mustOpen(t, Config{Entries: 4})
	modern := r.params.features&featMinTimeout != 0
	for _, f := range Features() {
		err := s.FeatureError(f)
		t.Logf("%v: %v", f, err)
		if s.HasFeature(f) != (err == nil) {
			t.Errorf("%v: HasFeature %v, FeatureError %v", f, s.HasFeature(f), err)
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), f.String()) {
			t.Errorf("%v is missing with %v, want an unavailable error naming it", f, err)
		}
		if modern && f != NAPI {
			t.Errorf("the kernel has IORING_FEAT_MIN_TIMEOUT (6.12+), and the probe finds no %v: %v", f, err)
		}
	}
	if s.HasFeature(numFeatures) || !strings.HasPrefix(numFeatures.String(), "Feature(") {
		t.Errorf("a feature past the last one: HasFeature true or String %q", numFeatures.String())
	}
}

// featureStub makes the probe find one feature missing, as an older
// kernel would: it refuses the feature's registration with EINVAL, or
// clears its setup bit, or its opcode in the probe's answer.
type featureStub struct {
	feature  Feature
	register uint32 // the registration refused, or 0
	bit      uint32 // the params.features bit cleared, or 0
	op       Op     // the opcode cleared, or 0
}

var featureStubs = []featureStub{
	{feature: RegisteredRing, register: registerRingFds},
	{feature: DirectDescriptors, register: registerFiles2},
	{feature: FixedFdInstall, op: OpFixedFdInstall},
	{feature: CQESkip, bit: featCQESkip},
	{feature: Bundles, bit: featRecvSendBundle},
	{feature: IncrementalBuffers, register: registerPbufRing},
	{feature: SendZC, op: OpSendZC},
	{feature: NAPI, register: registerNAPI},
}

// install swaps the syscalls for the test so that errno refuses the stub's
// registration.
func (st featureStub) install(t *testing.T, errno unix.Errno) {
	setup := func(entries uint32, p *params) (int, error) {
		fd, err := setupSyscall(entries, p)
		p.features &^= st.bit
		return fd, err
	}
	register := func(fd int, op uint32, arg unsafe.Pointer, n uint32) error {
		if st.register != 0 && op == st.register {
			return errno
		}
		err := registerSyscall(fd, op, arg, n)
		if op == registerProbe && st.op != 0 {
			pa := (*probeArg)(arg)
			for i := range pa.ops {
				if Op(pa.ops[i].op) == st.op {
					pa.ops[i].flags = 0
				}
			}
		}
		return err
	}
	swapSyscalls(t, setup, register)
}

// TestFeaturesAbsent checks, for each feature in turn, that a kernel
// without it gets an answer in which that feature, and only it, is
// missing, cleanly: an unavailable error that names it, and the answer
// still cached. A transient failure of a feature's probe leaves the
// feature missing but the answer uncached.
func TestFeaturesAbsent(t *testing.T) {
	real := mustProbe(t)
	for _, st := range featureStubs {
		t.Run(st.feature.String(), func(t *testing.T) {
			if !real.HasFeature(st.feature) {
				t.Skipf("this kernel lacks %v already", st.feature)
			}
			st.install(t, unix.EINVAL)
			var p prober
			s, err := p.get()
			if err != nil {
				t.Fatalf("probe: %v", err)
			}
			if s.HasFeature(st.feature) {
				t.Fatalf("%v present with its probe refused", st.feature)
			}
			ferr := s.FeatureError(st.feature)
			var ue *UnavailableError
			if !errors.As(ferr, &ue) || ue.Feature != st.feature.String() || !errors.Is(ferr, ErrUnavailable) {
				t.Errorf("FeatureError(%v) = %v, want an *UnavailableError for it", st.feature, ferr)
			}
			if st.register != 0 && !errors.Is(ferr, unix.EINVAL) {
				t.Errorf("FeatureError(%v) = %v, want it to carry the kernel's EINVAL", st.feature, ferr)
			}
			if st.register == 0 && !errors.Is(ferr, errors.ErrUnsupported) {
				t.Errorf("FeatureError(%v) = %v, want errors.ErrUnsupported", st.feature, ferr)
			}
			for _, f := range Features() {
				if f != st.feature && s.HasFeature(f) != real.HasFeature(f) {
					t.Errorf("%v: %v with %v stubbed out, %v for real", f, s.HasFeature(f), st.feature, real.HasFeature(f))
				}
			}
			for _, op := range []Op{OpRecv, OpSend, OpAccept} {
				if !s.Has(op) {
					t.Errorf("the opcode probe lost %v", op)
				}
			}
			if again, _ := p.get(); again != s {
				t.Errorf("a conclusive answer without %v is not cached", st.feature)
			}
		})
	}
	t.Run("transient", func(t *testing.T) {
		if !real.HasFeature(NAPI) {
			t.Skip("this kernel lacks NAPI busy polling")
		}
		featureStub{feature: NAPI, register: registerNAPI}.install(t, unix.ENOMEM)
		var p prober
		s, err := p.get()
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		if s.HasFeature(NAPI) || !errors.Is(s.FeatureError(NAPI), unix.ENOMEM) {
			t.Errorf("NAPI after a transient ENOMEM: present %v, error %v", s.HasFeature(NAPI), s.FeatureError(NAPI))
		}
		if again, _ := p.get(); again == s {
			t.Errorf("an answer with a transient failure is cached")
		}
	})
}

// TestFeatureRefusals checks that each Ring method of a feature the
// kernel refuses returns an unavailable error naming the feature, and that
// the ring goes on working.
func TestFeatureRefusals(t *testing.T) {
	mustProbe(t)
	tests := []struct {
		stub featureStub
		use  func(r *Ring) error
	}{
		{featureStub{feature: RegisteredRing, register: registerRingFds}, func(r *Ring) error { return r.RegisterRing() }},
		{featureStub{feature: DirectDescriptors, register: registerFiles2}, func(r *Ring) error { return r.RegisterFiles(4) }},
		{featureStub{feature: IncrementalBuffers, register: registerPbufRing}, func(r *Ring) error {
			_, err := r.NewIncrementalBufRing(1, 2, 64)
			return err
		}},
		{featureStub{feature: NAPI, register: registerNAPI}, func(r *Ring) error { return r.RegisterNAPI(time.Millisecond, false) }},
	}
	for _, tt := range tests {
		t.Run(tt.stub.feature.String(), func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r := mustOpen(t, Config{Entries: 4})
			tt.stub.install(t, unix.EINVAL)
			err := tt.use(r)
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, unix.EINVAL) ||
				!strings.Contains(err.Error(), tt.stub.feature.String()) {
				t.Errorf("refused: %v, want an unavailable error naming %v", err, tt.stub.feature)
			}
			roundTrip(t, r, waitLimit, make([]Completion, 4))
		})
	}
	t.Run("Config.RegisterRing falls back", func(t *testing.T) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		featureStub{feature: RegisteredRing, register: registerRingFds}.install(t, unix.EINVAL)
		r := mustOpen(t, Config{Entries: 4, RegisterRing: true})
		if ok, err := r.RingRegistered(); ok || !errors.Is(err, ErrUnavailable) {
			t.Errorf("RingRegistered() = %v, %v; want false and why", ok, err)
		}
		if r.enterFd != r.fd || r.enterFlags != 0 {
			t.Errorf("enters use %d with flags %#x, want the descriptor %d", r.enterFd, r.enterFlags, r.fd)
		}
		roundTrip(t, r, waitLimit, make([]Completion, 4))
	})
}

// TestRegisteredRing opens rings with their descriptors registered, on
// one locked thread, until the thread's table (16 slots) is full: each
// registered ring enters through its index, the one past the table falls
// back to its descriptor with the kernel's EBUSY, all of them work, and
// closing them frees the slots again.
func TestRegisteredRing(t *testing.T) {
	if s := mustProbe(t); !s.HasFeature(RegisteredRing) {
		t.Skipf("%v", s.FeatureError(RegisteredRing))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cs := make([]Completion, 4)
	var rings []*Ring
	defer func() {
		for _, r := range rings {
			r.Close()
		}
	}()
	registered := 0
	for len(rings) < 17 {
		r, err := Open(Config{Entries: 4, RegisterRing: true})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		rings = append(rings, r)
		ok, why := r.RingRegistered()
		switch {
		case ok:
			registered++
			if r.enterFlags != enterRegisteredRing || r.enterFd < 0 || r.enterFd >= 16 || why != nil {
				t.Errorf("ring %d: registered, and enters with %d, flags %#x (%v)", len(rings), r.enterFd, r.enterFlags, why)
			}
		case !errors.Is(why, unix.EBUSY):
			t.Errorf("ring %d: not registered: %v, want the full table's EBUSY", len(rings), why)
		}
		before := r.Enters()
		roundTrip(t, r, waitLimit, cs)
		if r.Enters() != before+1 {
			t.Errorf("ring %d: %d enters for one round trip", len(rings), r.Enters()-before)
		}
	}
	// The test's own thread may hold registrations of its own (none in
	// this package), so at least one fell back and most registered.
	if registered == 17 || registered < 8 {
		t.Errorf("%d of 17 rings registered, want the table's 16 at most", registered)
	}
	for _, r := range rings {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	rings = rings[:0]
	// Opened and closed here, on the locked thread (a cleanup would
	// run after the unlock, perhaps on another thread).
	r, err := Open(Config{Entries: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	if err := r.RegisterRing(); err != nil {
		t.Fatalf("RegisterRing after the others closed: %v", err)
	}
	if err := r.RegisterRing(); err != nil {
		t.Errorf("a second RegisterRing: %v, want nil (already registered)", err)
	}
	roundTrip(t, r, waitLimit, cs)
}

// TestCloseRegisteredOnAnotherThread checks that Close on another thread
// than the registration's leaves the other thread's table alone and says
// so.
func TestCloseRegisteredOnAnotherThread(t *testing.T) {
	if s := mustProbe(t); !s.HasFeature(RegisteredRing) {
		t.Skipf("%v", s.FeatureError(RegisteredRing))
	}
	rc := make(chan *Ring)
	hold := make(chan struct{})
	go func() {
		runtime.LockOSThread() // this thread ends with the goroutine, dropping its table
		r, err := Open(Config{Entries: 4, RegisterRing: true})
		if err != nil {
			t.Errorf("Open: %v", err)
			close(rc)
			return
		}
		rc <- r
		<-hold
	}()
	r, ok := <-rc
	if !ok {
		return
	}
	defer close(hold)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if ok, why := r.RingRegistered(); !ok {
		t.Fatalf("not registered: %v", why)
	}
	err := r.Close()
	if err == nil || !strings.Contains(err.Error(), "registered on thread") {
		t.Errorf("Close on another thread: %v, want it to say the registration stays", err)
	}
}

// TestSkipSuccess checks IOSQE_CQE_SKIP_SUCCESS: a send that succeeds
// posts no completion, and one that fails posts its error.
func TestSkipSuccess(t *testing.T) {
	if s := mustProbe(t); !s.HasFeature(CQESkip) {
		t.Skipf("%v", s.FeatureError(CQESkip))
	}
	const (
		okData = iota + 1
		failData
		markData
	)
	r := mustOpen(t, Config{Entries: 8})
	p := socketpair(t)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(efd) })
	msg := []byte("skipped")
	// The marker is linked to the successful send, so that it completes
	// only after the send did: by then the send's completion, had it
	// been posted, would be in the queue before it.
	if err := r.Reserve(2); err != nil {
		t.Fatal(err)
	}
	if err := r.PrepareSend(p[0], msg, okData); err != nil {
		t.Fatal(err)
	}
	r.SkipSuccess()
	r.Link()
	if err := r.PrepareCancel(1<<40, markData); err != nil {
		t.Fatal(err)
	}
	if err := r.PrepareSend(efd, msg, failData); err != nil { // not a socket
		t.Fatal(err)
	}
	r.SkipSuccess()
	q := newReaper(t, r)
	got := q.byData(2)
	if _, ok := got[okData]; ok {
		t.Errorf("the successful send posted a completion: %v", got)
	}
	wantRes(t, "marker linked after the skipped send", got[markData], 0)
	wantRes(t, "failed send", got[failData], errno(unix.ENOTSOCK))
	roundTrip(t, r, waitLimit, make([]Completion, 4))
	if n := r.Ready(); n != 0 {
		t.Errorf("%d completions left after the round trip", n)
	}
	buf := make([]byte, 32)
	n, err := unix.Read(p[1], buf)
	if err != nil || string(buf[:n]) != string(msg) {
		t.Errorf("peer read %q, %v; want %q", buf[:n], err, msg)
	}
	runtime.KeepAlive(msg)
}

// TestSkipSuccessOnFlushed checks that the flag setters leave an entry
// already handed to the kernel alone.
func TestSkipSuccessOnFlushed(t *testing.T) {
	r, sqes := memRing(4)
	if err := r.PrepareCancel(1, 2); err != nil {
		t.Fatal(err)
	}
	r.flush()
	r.SkipSuccess()
	r.FixedFile()
	if sqes[0].flags != 0 {
		t.Errorf("flags %#x on a published entry", sqes[0].flags)
	}
}

// TestNAPI registers NAPI busy polling, which loopback cannot use: the
// kernel takes the registration (or refuses it as unknown, as the probe
// says), and unregistering returns what was set.
func TestNAPI(t *testing.T) {
	s := mustProbe(t)
	r := mustOpen(t, Config{Entries: 4})
	err := r.RegisterNAPI(50*time.Microsecond, true)
	if !s.HasFeature(NAPI) {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("RegisterNAPI where the probe found none: %v, want an unavailable error", err)
		}
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatalf("RegisterNAPI: %v", err)
	}
	roundTrip(t, r, waitLimit, make([]Completion, 4))
	d, prefer, err := r.UnregisterNAPI()
	if err != nil || d != 50*time.Microsecond || !prefer {
		t.Errorf("UnregisterNAPI() = %v, %v, %v; want 50µs, true", d, prefer, err)
	}
	if d, prefer, err := r.UnregisterNAPI(); err != nil || d != 0 || prefer {
		t.Errorf("UnregisterNAPI() again = %v, %v, %v; want 0, false", d, prefer, err)
	}
}

// TestSkipSuccessNoWaitSend checks the buffer-lifetime signal of a skipped
// send that never waits: with room in the socket it sends everything
// within the enter that submits it and posts nothing, so its buffer may be
// reused as soon as the enter returns; with none it posts what it could
// not do.
func TestSkipSuccessNoWaitSend(t *testing.T) {
	needFeature(t, CQESkip)
	runtime.LockOSThread() // SINGLE_ISSUER, as the loop's ring
	defer runtime.UnlockOSThread()
	r := mustOpen(t, Config{Entries: 8, Flags: SingleIssuer | DeferTaskrun})
	p := socketpair(t)
	msg := onHeap(t, payload(1024, 5))
	want := bytes.Clone(msg)
	if err := r.PrepareSendNoWait(p[0], msg, 1); err != nil {
		t.Fatal(err)
	}
	r.SkipSuccess()
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	clear(msg) // free once the enter returned: the send ran inline
	roundTrip(t, r, waitLimit, make([]Completion, 4))
	if n := r.Ready(); n != 0 {
		t.Fatalf("%d completions after a send that had room", n)
	}
	got := make([]byte, len(want))
	if n, err := unix.Read(p[1], got); n != len(want) || err != nil || !bytes.Equal(got, want) {
		t.Fatalf("peer read %d bytes, %v; want the %d sent, as they were before the buffer was cleared", n, err, len(want))
	}

	// Fill the socket, then send again: the send cannot wait, so it
	// fails, and posts how far it got.
	if err := unix.SetNonblock(p[0], true); err != nil {
		t.Fatal(err)
	}
	fill := make([]byte, 4096)
	filled := 0
	for {
		n, err := unix.Write(p[0], fill)
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil {
			t.Fatalf("fill: %v", err)
		}
		filled += n
	}
	if err := r.PrepareSendNoWait(p[0], msg, 2); err != nil {
		t.Fatal(err)
	}
	r.SkipSuccess()
	c := newReaper(t, r).one()
	if c.UserData != 2 || c.Res != errno(unix.EAGAIN) && (c.Res <= 0 || c.Res >= int32(len(msg))) {
		t.Fatalf("send into a full socket: %+v (result %s), want -EAGAIN or a short count", c, res(c.Res))
	}
	t.Logf("full socket (%d bytes queued): the skipped send completed with %s", filled, res(c.Res))

	// More than the socket has room for: a short count, which is what
	// the peer gets.
	small := socketpair(t)
	if err := unix.SetsockoptInt(small[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
		t.Fatal(err)
	}
	big := onHeap(t, payload(256<<10, 6))
	if err := r.PrepareSendNoWait(small[0], big, 3); err != nil {
		t.Fatal(err)
	}
	r.SkipSuccess()
	c = newReaper(t, r).one()
	if c.UserData != 3 || c.Res <= 0 || c.Res >= int32(len(big)) {
		t.Fatalf("send of %d bytes into a small socket: %+v (result %s), want a short count", len(big), c, res(c.Res))
	}
	if err := unix.SetNonblock(small[1], true); err != nil {
		t.Fatal(err)
	}
	var read []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(small[1], buf)
		if n <= 0 || err != nil {
			break
		}
		read = append(read, buf[:n]...)
	}
	if !bytes.Equal(read, big[:c.Res]) {
		t.Errorf("peer read %d bytes; the short count said %d", len(read), c.Res)
	}
	runtime.KeepAlive(big)
}
