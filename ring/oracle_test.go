package ring

// giouring as the oracle of ring's own io_uring binding: every submission a
// Prepare method builds is compared, byte for byte, with the one giouring's
// prepare helpers build for the same operation, and ring setup is compared
// with giouring's for the same parameters. This is the only file that
// imports giouring, and the reason the ring test binary needs
// -ldflags=-checklinkname=0 (docs/decisions/0014-own-io_uring-binding.md).

import (
	"bytes"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// oracleCase is one submission: ring builds it with method (called by name
// through reflection, so that the name cannot disagree with what runs) and
// args; giouring builds it with oracle on a zeroed entry.
type oracleCase struct {
	name   string
	method string
	args   []any
	oracle func(e *giouring.SubmissionQueueEntry)
}

// calls splits a case's method into the Prepare method and the flag
// setters (methods of *Ring without arguments: FixedFile, SkipSuccess,
// Link) called after it, in order: "PrepareSend+FixedFile+Link".
func (c oracleCase) calls() (prepare string, then []string) {
	parts := strings.Split(c.method, "+")
	return parts[0], parts[1:]
}

// oracleArgs are the memory the cases point at. Only their addresses go
// into the entries: nothing is submitted.
type oracleArgs struct {
	br  *BufRing
	buf []byte
	msg *unix.Msghdr
	sa  *unix.RawSockaddrInet6
	ts  *unix.Timespec
	fds []int32
}

func newOracleArgs() *oracleArgs {
	return &oracleArgs{
		br:  &BufRing{group: 0x1234},
		buf: make([]byte, 4099),
		msg: &unix.Msghdr{},
		sa:  &unix.RawSockaddrInet6{Family: unix.AF_INET6},
		ts:  &unix.Timespec{Sec: 3, Nsec: 5},
		fds: []int32{7, 8, 9},
	}
}

func addr[T any](p *T) uintptr { return uintptr(unsafe.Pointer(p)) }

// oracleCases lists every Prepare method of Ring with the flags the runtime
// passes (TestOracleCoversEveryPrepare fails when one has no case).
func oracleCases(a *oracleArgs) []oracleCase {
	const (
		fd = 17
		ud = uint64(0xfeedface_00000001) // user data with high bits set
	)
	bufp := uintptr(unsafe.Pointer(unsafe.SliceData(a.buf)))
	n := uint32(len(a.buf))
	accept := unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	return append([]oracleCase{
		{"multishot accept", "PrepareAcceptMultishot", []any{fd, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareMultishotAccept(fd, 0, 0, accept)
		}},
		{"accept", "PrepareAccept", []any{fd, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareAccept(fd, 0, 0, uint32(accept))
		}},
		{"multishot recv with buffer select", "PrepareRecvMultishot", []any{fd, a.br, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareRecvMultishot(fd, 0, 0, 0)
			e.Flags |= giouring.SqeBufferSelect
			e.BufIG = a.br.group
		}},
		{"recv", "PrepareRecv", []any{fd, a.buf, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareRecv(fd, bufp, n, 0)
		}},
		{"recv into nothing", "PrepareRecv", []any{fd, []byte(nil), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareRecv(fd, 0, 0, 0)
		}},
		{"recv with buffer select", "PrepareRecvSelect", []any{fd, a.br, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareRecv(fd, 0, 0, 0)
			e.Flags |= giouring.SqeBufferSelect
			e.BufIG = a.br.group
		}},
		{"send with MSG_NOSIGNAL", "PrepareSend", []any{fd, a.buf, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareSend(fd, bufp, n, unix.MSG_NOSIGNAL)
		}},
		{"sendmsg with MSG_NOSIGNAL", "PrepareSendmsg", []any{fd, a.msg, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareSendMsg(fd, (*syscall.Msghdr)(unsafe.Pointer(a.msg)), unix.MSG_NOSIGNAL)
		}},
		{"multishot recvmsg with buffer select", "PrepareRecvmsgMultishot", []any{fd, a.msg, uint32(unix.MSG_TRUNC), a.br, ud},
			func(e *giouring.SubmissionQueueEntry) {
				e.PrepareRecvMsgMultishot(fd, (*syscall.Msghdr)(unsafe.Pointer(a.msg)), unix.MSG_TRUNC)
				e.Flags |= giouring.SqeBufferSelect
				e.BufIG = a.br.group
			}},
		{"connect", "PrepareConnect", []any{fd, unsafe.Pointer(a.sa), uint32(unix.SizeofSockaddrInet6), ud},
			func(e *giouring.SubmissionQueueEntry) {
				// giouring takes the sockaddr as a *syscall.Sockaddr
				// and passes its address on.
				e.PrepareConnect(fd, (*syscall.Sockaddr)(unsafe.Pointer(a.sa)), unix.SizeofSockaddrInet6)
			}},
		{"close", "PrepareClose", []any{fd, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareClose(fd)
		}},
		{"shutdown write", "PrepareShutdown", []any{fd, unix.SHUT_WR, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareShutdown(fd, unix.SHUT_WR)
		}},
		{"shutdown both", "PrepareShutdown", []any{fd, unix.SHUT_RDWR, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareShutdown(fd, unix.SHUT_RDWR)
		}},
		{"message to another ring", "PrepareMsgRing", []any{fd, uint32(7), uint64(0x8000_0000_0000_0099), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareMsgRing(fd, 7, 0x8000_0000_0000_0099, 0)
		}},
		{"cancel all by user data", "PrepareCancel", []any{uint64(0x8000_0000_0000_0042), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareCancel64(0x8000_0000_0000_0042, int(giouring.AsyncCancelAll))
		}},
		{"cancel all by descriptor", "PrepareCancelFd", []any{fd, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareCancelFd(fd, giouring.AsyncCancelAll)
		}},
		{"poll in", "PreparePollIn", []any{fd, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PreparePollAdd(fd, unix.POLLIN)
			if bigEndian() {
				// liburing word-swaps poll32_events on big-endian
				// hosts, as the kernel expects; giouring does not.
				e.OpcodeFlags = e.OpcodeFlags<<16 | e.OpcodeFlags>>16
			}
		}},
		{"timeout", "PrepareTimeout", []any{a.ts, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareTimeout((*syscall.Timespec)(unsafe.Pointer(a.ts)), 0, 0)
			// giouring's helper stores the address of its own
			// parameter (&spec), not the timespec's; liburing and
			// the kernel want the timespec's.
			e.Addr = uint64(addr(a.ts))
		}},
		{"read at offset", "PrepareRead", []any{fd, a.buf, uint64(1 << 40), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareRead(fd, bufp, n, 1<<40)
		}},
		{"read at the current position", "PrepareRead", []any{fd, a.buf, ^uint64(0), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareRead(fd, bufp, n, ^uint64(0))
		}},
		{"nop", "PrepareNop", []any{ud}, func(e *giouring.SubmissionQueueEntry) { e.PrepareNop() }},
		{"write at offset", "PrepareWrite", []any{fd, a.buf, uint64(4099), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareWrite(fd, bufp, n, 4099)
		}},
	}, append(fileOracleCases(), featureOracleCases(a)...)...)
}

// memRing returns a Ring whose queues live in Go memory, set up by the same
// code as a kernel ring's (point), with every submission entry filled with
// 0xff so that an entry ring does not clear shows. It never enters the
// kernel (its descriptor is -1) and has room for entries submissions.
func memRing(entries uint32) (*Ring, []sqe) {
	sqMem := make([]uint32, 16+entries) // head, tail, mask, entries, flags, dropped; the array at word 16
	cqMem := make([]uint32, 16+4*entries*uint32(unsafe.Sizeof(cqe{})/4))
	sqes := make([]sqe, entries)
	for i := range sqes {
		b := (*[unsafe.Sizeof(sqe{})]byte)(unsafe.Pointer(&sqes[i]))
		for j := range b {
			b[j] = 0xff
		}
	}
	sqMem[2], sqMem[3] = entries-1, entries
	cqMem[2], cqMem[3] = 4*entries-1, 4*entries
	r := &Ring{fd: -1}
	r.params.sqOff = sqOffsets{head: 0, tail: 4, ringMask: 8, ringEntries: 12, flags: 16, dropped: 20, array: 64}
	r.params.cqOff = cqOffsets{head: 0, tail: 4, ringMask: 8, ringEntries: 12, overflow: 16, cqes: 64}
	r.point(unsafe.Pointer(&sqMem[0]), unsafe.Pointer(&cqMem[0]), unsafe.Pointer(&sqes[0]))
	return r, sqes
}

// sqeBytes returns the 64 bytes of an entry.
func sqeBytes[T any](e *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(e)), unsafe.Sizeof(*e))
}

// TestPrepareOracle compares every submission ring builds with giouring's.
func TestPrepareOracle(t *testing.T) {
	a := newOracleArgs()
	for _, c := range oracleCases(a) {
		t.Run(c.name, func(t *testing.T) {
			r, sqes := memRing(4)
			method, then := c.calls()
			m := reflect.ValueOf(r).MethodByName(method)
			if !m.IsValid() {
				t.Fatalf("*Ring has no method %s", method)
			}
			if m.Type().NumIn() != len(c.args) {
				t.Fatalf("%s takes %d arguments, the case gives %d", c.method, m.Type().NumIn(), len(c.args))
			}
			in := make([]reflect.Value, len(c.args))
			for i, arg := range c.args {
				in[i] = reflect.ValueOf(arg)
				if want := m.Type().In(i); in[i].Type() != want {
					t.Fatalf("%s argument %d: the case gives a %v, the method takes a %v", c.method, i, in[i].Type(), want)
				}
			}
			if err, _ := m.Call(in)[0].Interface().(error); err != nil {
				t.Fatalf("%s: %v", c.method, err)
			}
			for _, name := range then {
				f := reflect.ValueOf(r).MethodByName(name)
				if !f.IsValid() || f.Type().NumIn() != 0 {
					t.Fatalf("*Ring has no method %s()", name)
				}
				f.Call(nil)
			}
			if r.Pending() != 1 {
				t.Fatalf("%s queued %d entries, want 1", c.method, r.Pending())
			}
			var want giouring.SubmissionQueueEntry
			c.oracle(&want)
			want.UserData = c.args[len(c.args)-1].(uint64)
			got := &sqes[0]
			if !bytes.Equal(sqeBytes(got), sqeBytes(&want)) {
				t.Errorf("%s builds\n\t%+v\ngiouring builds\n\t%+v\nbytes\n\t% x\n\t% x",
					c.method, *got, want, sqeBytes(got), sqeBytes(&want))
			}
			runtime.KeepAlive(a)
		})
	}
}

// TestOracleCoversEveryPrepare fails when Ring exports a Prepare method that
// no oracle case calls: add a case to oracleCases for it.
func TestOracleCoversEveryPrepare(t *testing.T) {
	covered := make(map[string]bool)
	for _, c := range oracleCases(newOracleArgs()) {
		method, _ := c.calls()
		covered[method] = true
	}
	var prepares []string
	rt := reflect.TypeFor[*Ring]()
	for i := range rt.NumMethod() {
		if name := rt.Method(i).Name; strings.HasPrefix(name, "Prepare") {
			prepares = append(prepares, name)
			if !covered[name] {
				t.Errorf("(*Ring).%s has no case in oracleCases: add one that builds the same entry with giouring", name)
			}
		}
	}
	for name := range covered {
		if !slices.Contains(prepares, name) {
			t.Errorf("oracleCases names %s, which *Ring does not export", name)
		}
	}
	if len(prepares) < 16 {
		t.Errorf("found only %d Prepare methods (%v): the method set was not read", len(prepares), prepares)
	}
}

// gioField returns the unexported field path of giouring's ring (read
// through reflection: giouring exports none of it), failing the test when
// giouring no longer has it.
func gioField(t *testing.T, gr *giouring.Ring, path ...string) reflect.Value {
	t.Helper()
	v := reflect.ValueOf(gr).Elem()
	for _, name := range path {
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		f := v.FieldByName(name)
		if !f.IsValid() {
			t.Fatalf("giouring.Ring has no field %s: the oracle test needs updating for this giouring", strings.Join(path, "."))
		}
		v = f
	}
	return v
}

// gioUint32 reads the kernel-shared word a giouring *uint32 field points at.
func gioUint32(t *testing.T, gr *giouring.Ring, path ...string) uint32 {
	t.Helper()
	return *(*uint32)(gioField(t, gr, path...).UnsafePointer())
}

// TestSetupOracle sets a ring up with Open and with giouring for the same
// parameters and compares what the kernel returned (entries, flags,
// features, every offset), the sizes and sharing of the mappings, the queue
// sizes and the submission index array.
func TestSetupOracle(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"zero config", Config{}},
		{"entries 8", Config{Entries: 8}},
		{"entries rounded up", Config{Entries: 5, CQEntries: 100}},
		{"clamped", Config{Entries: 1 << 16, CQEntries: 1 << 20}},
		{"single issuer and defer taskrun", Config{Entries: 8, Flags: SingleIssuer | DeferTaskrun}},
		{"coop taskrun", Config{Entries: 8, Flags: CoopTaskrun}},
		{"sqpoll", Config{Entries: 8, Flags: SQPoll, SQPollIdle: 10 * time.Millisecond}},
	}
	mustOpen(t, Config{Entries: 4}) // skips where io_uring is off
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runtime.LockOSThread() // SINGLE_ISSUER binds both rings to this thread
			defer runtime.UnlockOSThread()
			r, err := Open(tt.cfg)
			if err == nil {
				defer r.Close()
			}

			// giouring's Params is struct io_uring_params too, with
			// unexported fields: set it through ring's type
			// (TestUAPIMatchesGiouring checks the layouts agree).
			var gp giouring.Params
			p := (*params)(unsafe.Pointer(&gp))
			entries, cqEntries := tt.cfg.Entries, tt.cfg.CQEntries
			if entries == 0 {
				entries = 1024
			}
			if cqEntries == 0 {
				cqEntries = 4 * entries
			}
			p.flags = tt.cfg.Flags.setup() | setupCQSize | setupClamp
			p.cqEntries = cqEntries
			if tt.cfg.Flags&SQPoll != 0 {
				p.sqThreadIdle = sqThreadIdle(tt.cfg.SQPollIdle)
			}
			gr := giouring.NewRing()
			gerr := gr.QueueInitParams(entries, &gp)
			if gerr == nil {
				defer gr.QueueExit()
			}
			if err != nil || gerr != nil {
				var errno unix.Errno
				if err == nil || gerr == nil || !errors.As(gerr, &errno) || !errors.Is(err, errno) {
					t.Fatalf("Open: %v; giouring: %v", err, gerr)
				}
				t.Skipf("both refuse %v on this host: %v", tt.cfg.Flags, err)
			}

			if r.params != *p {
				t.Errorf("io_uring_setup returned\n\t%+v\nto ring, and\n\t%+v\nto giouring", r.params, *p)
			}
			if got := uint32(gioField(t, gr, "features").Uint()); r.params.features != got {
				t.Errorf("features %#x, giouring's %#x", r.params.features, got)
			}
			if got := uint32(gioField(t, gr, "flags").Uint()); r.params.flags != got {
				t.Errorf("setup flags %#x, giouring's %#x", r.params.flags, got)
			}
			sizes := []struct {
				what      string
				got, want uintptr
			}{
				{"submission ring mapping", r.maps.sqRingSize, uintptr(gioField(t, gr, "sqRing", "ringSize").Uint())},
				{"completion ring mapping", r.maps.cqRingSize, uintptr(gioField(t, gr, "cqRing", "ringSize").Uint())},
				{"submission queue entries", uintptr(r.sq.entries), uintptr(gioUint32(t, gr, "sqRing", "ringEntries"))},
				{"submission queue mask", uintptr(r.sq.mask), uintptr(gioUint32(t, gr, "sqRing", "ringMask"))},
				{"completion queue mask", uintptr(r.cq.mask), uintptr(gioUint32(t, gr, "cqRing", "ringMask"))},
				{"submission space", uintptr(r.sq.entries - r.Pending()), uintptr(gr.SQSpaceLeft())},
			}
			for _, s := range sizes {
				if s.got != s.want {
					t.Errorf("%s: %d, giouring's %d", s.what, s.got, s.want)
				}
			}
			gioSingle := gioField(t, gr, "sqRing", "ringPtr").Pointer() == gioField(t, gr, "cqRing", "ringPtr").Pointer()
			if single := r.maps.cqRing == r.maps.sqRing; single != gioSingle {
				t.Errorf("one mapping for both rings: %v, giouring: %v (features %#x)", single, gioSingle, r.params.features)
			}
			if r.params.features&featSingleMmap != 0 && r.maps.cqRing != r.maps.sqRing {
				t.Errorf("the kernel has IORING_FEAT_SINGLE_MMAP, and ring mapped the rings apart")
			}
			gioArray := gioField(t, gr, "sqRing", "array").UnsafePointer()
			for i := range r.sq.entries {
				at := uintptr(r.params.sqOff.array) + uintptr(i)*4
				ours := *(*uint32)(unsafe.Add(r.maps.sqRing, at))
				theirs := *(*uint32)(unsafe.Add(gioArray, uintptr(i)*4))
				if ours != i || theirs != i {
					t.Fatalf("submission index array slot %d: %d, giouring's %d; want %d", i, ours, theirs, i)
				}
			}
		})
	}
}

// TestProbeOracle compares the opcodes Probe reports with giouring's probe.
func TestProbeOracle(t *testing.T) {
	s := mustProbe(t)
	gp, err := giouring.GetProbe()
	if err != nil {
		t.Fatalf("giouring.GetProbe: %v", err)
	}
	for op := range 256 {
		if got, want := s.Has(Op(op)), gp.IsSupported(uint8(op)); got != want {
			t.Errorf("opcode %v: Has = %v, giouring says %v", Op(op), got, want)
		}
	}
}

// TestUAPIMatchesGiouring checks ring's kernel structures against giouring's
// (size, and each field's offset and size where both declare the same
// fields) and ring's constants against giouring's names for them.
func TestUAPIMatchesGiouring(t *testing.T) {
	layouts := []struct {
		name         string
		ours, theirs reflect.Type
		fields       bool
	}{
		{"SubmissionQueueEntry", reflect.TypeFor[sqe](), reflect.TypeFor[giouring.SubmissionQueueEntry](), true},
		{"CompletionQueueEvent", reflect.TypeFor[cqe](), reflect.TypeFor[giouring.CompletionQueueEvent](), true},
		{"Params", reflect.TypeFor[params](), reflect.TypeFor[giouring.Params](), true},
		{"SQRingOffsets", reflect.TypeFor[sqOffsets](), reflect.TypeFor[giouring.SQRingOffsets](), true},
		{"CQRingOffsets", reflect.TypeFor[cqOffsets](), reflect.TypeFor[giouring.CQRingOffsets](), true},
		{"GetEventsArg", reflect.TypeFor[getEventsArg](), reflect.TypeFor[giouring.GetEventsArg](), true},
		{"BufAndRing", reflect.TypeFor[bufDesc](), reflect.TypeFor[giouring.BufAndRing](), true},
		{"ProbeOp", reflect.TypeFor[probeOp](), reflect.TypeFor[giouring.ProbeOp](), true},
		{"Probe", reflect.TypeFor[probeArg](), reflect.TypeFor[giouring.Probe](), true},
		// giouring declares the reserved tail as [3]uint64, ring as
		// [6]uint32 (min_left and resv[5] in newer headers).
		{"BufReg", reflect.TypeFor[bufReg](), reflect.TypeFor[giouring.BufReg](), false},
		{"RsrcUpdate", reflect.TypeFor[rsrcUpdate](), reflect.TypeFor[giouring.RsrcUpdate](), true},
		{"RsrcRegister", reflect.TypeFor[rsrcRegister](), reflect.TypeFor[giouring.RsrcRegister](), true},
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			if l.ours.Size() != l.theirs.Size() {
				t.Fatalf("%v is %d bytes, giouring.%s %d", l.ours, l.ours.Size(), l.name, l.theirs.Size())
			}
			if !l.fields {
				return
			}
			if l.ours.NumField() != l.theirs.NumField() {
				t.Fatalf("%v has %d fields, giouring.%s %d", l.ours, l.ours.NumField(), l.name, l.theirs.NumField())
			}
			for i := range l.ours.NumField() {
				o, g := l.ours.Field(i), l.theirs.Field(i)
				if o.Offset != g.Offset || o.Type.Size() != g.Type.Size() {
					t.Errorf("field %d: %s (%v) at %d, giouring's %s (%v) at %d",
						i, o.Name, o.Type, o.Offset, g.Name, g.Type, g.Offset)
				}
			}
		})
	}

	consts := []struct {
		name         string
		ours, theirs uint64
	}{
		{"SetupSQPoll", setupSQPoll, uint64(giouring.SetupSQPoll)},
		{"SetupCQSize", setupCQSize, uint64(giouring.SetupCQSize)},
		{"SetupClamp", setupClamp, uint64(giouring.SetupClamp)},
		{"SetupCoopTaskrun", setupCoopTaskrun, uint64(giouring.SetupCoopTaskrun)},
		{"SetupTaskrunFlag", setupTaskrunFlag, uint64(giouring.SetupTaskrunFlag)},
		{"SetupSingleIssuer", setupSingleIssuer, uint64(giouring.SetupSingleIssuer)},
		{"SetupDeferTaskrun", setupDeferTaskrun, uint64(giouring.SetupDeferTaskrun)},
		{"FeatSingleMMap", featSingleMmap, uint64(giouring.FeatSingleMMap)},
		{"FeatNoDrop", featNoDrop, uint64(giouring.FeatNoDrop)},
		{"FeatFastPoll", featFastPoll, uint64(giouring.FeatFastPoll)},
		{"FeatExtArg", featExtArg, uint64(giouring.FeatExtArg)},
		// IORING_FEAT_MIN_TIMEOUT (6.12) is newer than giouring:
		// TestUAPILayout checks it against the header.
		{"SQNeedWakeup", sqNeedWakeup, uint64(giouring.SQNeedWakeup)},
		{"SQCQOverflow", sqCQOverflow, uint64(giouring.SQCQOverflow)},
		{"SQTaskrun", sqTaskrun, uint64(giouring.SQTaskrun)},
		{"EnterGetEvents", enterGetEvents, uint64(giouring.EnterGetEvents)},
		{"EnterSQWakeup", enterSQWakeup, uint64(giouring.EnterSQWakeup)},
		{"EnterSQWait", enterSQWait, uint64(giouring.EnterSQWait)},
		{"EnterExtArg", enterExtArg, uint64(giouring.EnterExtArg)},
		{"RegisterProbe", registerProbe, uint64(giouring.RegisterProbe)},
		{"RegisterPbufRing", registerPbufRing, uint64(giouring.RegisterPbufRing)},
		{"UnregisterPbufRing", unregisterPbufRing, uint64(giouring.UnregisterPbufRing)},
		{"CQEFBuffer", cqeFBuffer, uint64(giouring.CQEFBuffer)},
		{"CQEFMore", cqeFMore, uint64(giouring.CQEFMore)},
		{"CQEBufferShift", cqeBufferShift, uint64(giouring.CQEBufferShift)},
		{"SqeBufferSelect", sqeBufferSelect, uint64(giouring.SqeBufferSelect)},
		{"RecvMultishot", recvMultishot, uint64(giouring.RecvMultishot)},
		{"AcceptMultishot", acceptMultishot, uint64(giouring.AcceptMultishot)},
		{"AsyncCancelAll", asyncCancelAll, uint64(giouring.AsyncCancelAll)},
		{"AsyncCancelFd", asyncCancelFd, uint64(giouring.AsyncCancelFd)},
		{"OpPollAdd", uint64(OpPollAdd), uint64(giouring.OpPollAdd)},
		{"OpSendmsg", uint64(OpSendmsg), uint64(giouring.OpSendmsg)},
		{"OpRecvmsg", uint64(OpRecvmsg), uint64(giouring.OpRecvmsg)},
		{"OpTimeout", uint64(OpTimeout), uint64(giouring.OpTimeout)},
		{"OpAccept", uint64(OpAccept), uint64(giouring.OpAccept)},
		{"OpAsyncCancel", uint64(OpAsyncCancel), uint64(giouring.OpAsyncCancel)},
		{"OpConnect", uint64(OpConnect), uint64(giouring.OpConnect)},
		{"OpClose", uint64(OpClose), uint64(giouring.OpClose)},
		{"OpRead", uint64(OpRead), uint64(giouring.OpRead)},
		{"OpWrite", uint64(OpWrite), uint64(giouring.OpWrite)},
		{"OpSend", uint64(OpSend), uint64(giouring.OpSend)},
		{"OpRecv", uint64(OpRecv), uint64(giouring.OpRecv)},
		{"OpShutdown", uint64(OpShutdown), uint64(giouring.OpShutdown)},
		{"OpMsgRing", uint64(OpMsgRing), uint64(giouring.OpMsgRing)},
		{"OpFilesUpdate", uint64(OpFilesUpdate), uint64(giouring.OpFilesUpdate)},
		{"MsgSendFd", msgSendFd, uint64(giouring.MsgSendFd)},
		{"OpNop", uint64(OpNop), uint64(giouring.OpNop)},
		// The features' (IORING_OP_FIXED_FD_INSTALL, bundles,
		// incremental buffers, NAPI and the newer feature bits are
		// newer than giouring: TestUAPIFeatureConstants checks them
		// against the header).
		{"OpSendZC", uint64(OpSendZC), uint64(giouring.OpSendZC)},
		{"OpSendMsgZC", uint64(OpSendmsgZC), uint64(giouring.OpSendMsgZC)},
		{"SqeFixedFile", sqeFixedFile, uint64(giouring.SqeFixedFile)},
		{"SqeCQESkipSuccess", sqeCQESkipSucc, uint64(giouring.SqeCQESkipSuccess)},
		{"FeatCQESkip", featCQESkip, uint64(giouring.FeatCQESkip)},
		{"FeatRegRegRing", featRegRegRing, uint64(giouring.FeatRegRegRing)},
		{"EnterRegisteredRing", enterRegisteredRing, uint64(giouring.EnterRegisteredRing)},
		{"RegisterFiles2", registerFiles2, uint64(giouring.RegisterFiles2)},
		{"UnregisterFiles", unregisterFiles, uint64(giouring.UnregisterFiles)},
		{"RegisterRingFDs", registerRingFds, uint64(giouring.RegisterRingFDs)},
		{"UnregisterRingFDs", unregisterRingFds, uint64(giouring.UnregisterRingFDs)},
		{"RsrcRegisterSparse", rsrcRegisterSparse, uint64(giouring.RsrcRegisterSparse)},
		{"FileIndexAlloc", uint64(fileIndexAlloc), uint64(giouring.FileIndexAlloc)},
		{"registerRingFdOffset", uint64(registerRingFdAlloc), uint64(giouring.FileIndexAlloc)},
		{"AsyncCancelFdFixed", asyncCancelFdFixed, uint64(giouring.AsyncCancelFdFixed)},
		{"SendZCReportUsage", sendZCReportUsage, uint64(giouring.SendZCReportUsage)},
		{"CQEFNotif", cqeFNotif, uint64(giouring.CQEFNotif)},
		{"NotifUsageZCCopied", notifUsageZCCopied, uint64(giouring.NotifUsageZCCopied)},
	}
	for _, c := range consts {
		if c.ours != c.theirs {
			t.Errorf("%s: ring has %#x, giouring %#x", c.name, c.ours, c.theirs)
		}
	}
	if n := len(opNames); n != 15 {
		t.Errorf("ring names %d opcodes, and this test compares 15: add the new one to consts", n)
	}
}
