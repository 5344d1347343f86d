package ring

import (
	"errors"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/pawelgaczynski/giouring"
)

// sameLayout fails the test unless mirror has the size of orig and the same
// number of fields, each at the same offset with the same size and kind.
// Field names may differ: the mirrors blank the fields percore never reads.
func sameLayout(t *testing.T, mirror, orig reflect.Type) {
	t.Helper()
	if mirror.Size() != orig.Size() {
		t.Errorf("%v is %d bytes, %v is %d", mirror, mirror.Size(), orig, orig.Size())
	}
	if mirror.NumField() != orig.NumField() {
		t.Fatalf("%v has %d fields, %v has %d", mirror, mirror.NumField(), orig, orig.NumField())
	}
	for i := range mirror.NumField() {
		m, o := mirror.Field(i), orig.Field(i)
		if m.Offset != o.Offset || m.Type.Size() != o.Type.Size() || m.Type.Kind() != o.Type.Kind() {
			t.Errorf("%v field %d (%s %v at %d) does not match %v field %s %v at %d",
				mirror, i, m.Name, m.Type, m.Offset, orig, o.Name, o.Type, o.Offset)
		}
	}
}

// TestLayout checks the mirrors of giouring's unexported structures against
// the pinned giouring: statically, field by field, and functionally, by
// comparing what the mirrors read with what giouring's own accessors read.
// A giouring upgrade that moves a field fails here.
func TestLayout(t *testing.T) {
	t.Run("sizes", func(t *testing.T) {
		sizes := []struct {
			name         string
			mirror, orig uintptr
		}{
			{"Ring", unsafe.Sizeof(ringLayout{}), unsafe.Sizeof(giouring.Ring{})},
			{"SubmissionQueue", unsafe.Sizeof(sqLayout{}), unsafe.Sizeof(giouring.SubmissionQueue{})},
			{"CompletionQueue", unsafe.Sizeof(cqLayout{}), unsafe.Sizeof(giouring.CompletionQueue{})},
			{"Params", unsafe.Sizeof(paramsLayout{}), unsafe.Sizeof(giouring.Params{})},
			{"SQRingOffsets", unsafe.Sizeof(offsetsLayout{}), unsafe.Sizeof(giouring.SQRingOffsets{})},
			{"CQRingOffsets", unsafe.Sizeof(offsetsLayout{}), unsafe.Sizeof(giouring.CQRingOffsets{})},
			{"BufAndRing", unsafe.Sizeof(bufDesc{}), unsafe.Sizeof(giouring.BufAndRing{})},
			{"GetEventsArg", unsafe.Sizeof(getEventsArg{}), unsafe.Sizeof(giouring.GetEventsArg{})},
		}
		for _, s := range sizes {
			if s.mirror != s.orig {
				t.Errorf("mirror of giouring.%s is %d bytes, giouring's is %d", s.name, s.mirror, s.orig)
			}
		}
	})

	t.Run("fields", func(t *testing.T) {
		pairs := []struct {
			name         string
			mirror, orig reflect.Type
		}{
			{"Ring", reflect.TypeFor[ringLayout](), reflect.TypeFor[giouring.Ring]()},
			{"SubmissionQueue", reflect.TypeFor[sqLayout](), reflect.TypeFor[giouring.SubmissionQueue]()},
			{"CompletionQueue", reflect.TypeFor[cqLayout](), reflect.TypeFor[giouring.CompletionQueue]()},
			{"Params", reflect.TypeFor[paramsLayout](), reflect.TypeFor[giouring.Params]()},
			{"SQRingOffsets", reflect.TypeFor[offsetsLayout](), reflect.TypeFor[giouring.SQRingOffsets]()},
			{"CQRingOffsets", reflect.TypeFor[offsetsLayout](), reflect.TypeFor[giouring.CQRingOffsets]()},
			{"BufAndRing", reflect.TypeFor[bufDesc](), reflect.TypeFor[giouring.BufAndRing]()},
			{"GetEventsArg", reflect.TypeFor[getEventsArg](), reflect.TypeFor[giouring.GetEventsArg]()},
		}
		for _, p := range pairs {
			t.Run(p.name, func(t *testing.T) { sameLayout(t, p.mirror, p.orig) })
		}
	})

	t.Run("params", func(t *testing.T) {
		// giouring copies the flags and features the kernel returns in
		// Params into its Ring: both mirrors must see the same values.
		var p giouring.Params
		pv := viewParams(&p)
		pv.flags = giouring.SetupCQSize | giouring.SetupClamp
		pv.cqEntries = 64
		gr := giouring.NewRing()
		if err := gr.QueueInitParams(8, &p); err != nil {
			if errors.Is(classify("io_uring_setup", "", err), ErrUnavailable) {
				skipUnavailable(t, err)
			}
			t.Fatalf("QueueInitParams: %v", err)
		}
		defer gr.QueueExit()
		v := viewRing(gr)
		if pv.sqEntries != 8 || pv.cqEntries != 64 {
			t.Errorf("params mirror reads %d/%d entries, want 8/64", pv.sqEntries, pv.cqEntries)
		}
		if v.flags != pv.flags {
			t.Errorf("ring mirror flags %#x, params mirror flags %#x", v.flags, pv.flags)
		}
		if v.features != pv.features || v.features&giouring.FeatNoDrop == 0 {
			t.Errorf("ring mirror features %#x, params mirror features %#x", v.features, pv.features)
		}
		if v.ringFd != gr.RingFd() || v.enterRingFd != gr.RingFd() {
			t.Errorf("ring mirror fds %d/%d, RingFd() = %d", v.ringFd, v.enterRingFd, gr.RingFd())
		}
		if *v.sq.ringEntries != 8 || *v.cq.ringMask != 63 {
			t.Errorf("queue mirrors read %d entries and mask %d, want 8 and 63", *v.sq.ringEntries, *v.cq.ringMask)
		}
	})

	t.Run("queues", func(t *testing.T) {
		const entries, prepared = 8, 5
		r := mustOpen(t, Config{Entries: entries})
		gr := r.gr
		if v := viewRing(gr); v.ringFd != gr.RingFd() || r.Fd() != gr.RingFd() {
			t.Errorf("mirror fd %d, Fd() %d, giouring RingFd() %d", v.ringFd, r.Fd(), gr.RingFd())
		}
		if setup := viewRing(gr).flags; setup&giouring.SetupCQSize == 0 {
			t.Errorf("setup flags %#x lack IORING_SETUP_CQSIZE", setup)
		}
		for i := range uint64(prepared) {
			if err := r.PrepareCancel(1<<40+i, i); err != nil {
				t.Fatal(err)
			}
		}
		if got := r.Pending(); got != prepared {
			t.Errorf("Pending() = %d, want %d", got, prepared)
		}
		if got := gr.SQReady(); got != prepared {
			t.Errorf("giouring SQReady() = %d after %d prepares", got, prepared)
		}
		if got := gr.SQSpaceLeft(); got != entries-prepared {
			t.Errorf("giouring SQSpaceLeft() = %d, want %d", got, entries-prepared)
		}
		if err := r.SubmitAndWait(time.Second); err != nil {
			t.Fatalf("SubmitAndWait: %v", err)
		}
		if r.Pending() != 0 || gr.SQReady() != 0 {
			t.Errorf("after submit: Pending() = %d, giouring SQReady() = %d", r.Pending(), gr.SQReady())
		}
		// The cancels complete while they are submitted.
		if got, want := r.Ready(), int(gr.CQReady()); got != want || got != prepared {
			t.Errorf("Ready() = %d, giouring CQReady() = %d, want %d", got, want, prepared)
		}
		if r.Overflowed() != gr.CQHasOverflow() {
			t.Errorf("Overflowed() = %v, giouring CQHasOverflow() = %v", r.Overflowed(), gr.CQHasOverflow())
		}
		// Reap must release the slots where giouring (and the kernel)
		// look for the head.
		var cs [entries]Completion
		if n := r.Reap(cs[:2]); n != 2 {
			t.Fatalf("Reap into 2 slots returned %d", n)
		}
		if got := gr.CQReady(); got != prepared-2 {
			t.Errorf("giouring CQReady() = %d after reaping 2 of %d", got, prepared)
		}
		n := r.Reap(cs[2:])
		if n != prepared-2 || gr.CQReady() != 0 {
			t.Errorf("second Reap returned %d, then giouring CQReady() = %d", n, gr.CQReady())
		}
		for i, c := range cs[:prepared] {
			if c.UserData != uint64(i) || c.Res != 0 {
				t.Errorf("completion %d: user data %d, result %s", i, c.UserData, res(c.Res))
			}
		}
	})
}
