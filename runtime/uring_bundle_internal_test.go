//go:build linux

package runtime

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/percore/percore/ring"
)

// fakeBundles answers every bundle read with bufs, or with err.
type fakeBundles struct {
	bufs  []bundleBuf
	err   error
	calls int // reads asked for
}

func (f *fakeBundles) bundle(_ ring.Completion, dst []bundleBuf) ([]bundleBuf, error) {
	f.calls++
	if f.err != nil {
		return dst, f.err
	}
	return append(dst, f.bufs...), nil
}

// TestBundleDeliveredPerBuffer: a completion of three buffers (not in id
// order: the ring's order) is three OnData calls in that order, each
// buffer recycled after its own, the last holding only its part; past the
// turn budget (32 bytes) the rest waits, in order, for the next turn.
func TestBundleDeliveredPerBuffer(t *testing.T) {
	l, d, _, fb, c, got := uringTestLoop(t)
	d.useBundles(&fakeBundles{bufs: []bundleBuf{{3, 16}, {5, 16}, {1, 5}}})
	copy(fb.mem[5], payload(5))
	copy(fb.mem[1], "tail.")
	recv(d, fb, c, 3, payload(3)) // the completion names buffer 3 only
	if want := []string{payload(3), payload(5)}; !slices.Equal(*got, want) {
		t.Fatalf("first turn delivered %q, want %q", *got, want)
	}
	if held(c) != 1 {
		t.Fatalf("%d receives held past the budget, want 1", held(c))
	}
	nextTurn(l, d)
	if want := []string{payload(3), payload(5), "tail."}; !slices.Equal(*got, want) {
		t.Fatalf("delivered %q, want %q", *got, want)
	}
	if !slices.Equal(fb.recycled, []uint16{3, 5, 1}) {
		t.Fatalf("recycled %v, want 3, 5, 1", fb.recycled)
	}
	if l.cnt[sBundles] != 1 || l.cnt[sBundleBuffers] != 3 {
		t.Errorf("counted %d bundles of %d buffers, want 1 of 3", l.cnt[sBundles], l.cnt[sBundleBuffers])
	}
}

// TestBundleReadErrorFails: a completion the ring's record refuses fails
// its connection (a driver fault), as a receive without a buffer does,
// delivers nothing, and breaks the driver: the next completion is not
// read (its buffers would be the wrong ones), and the next enter reports
// the error once, which stops the loop.
func TestBundleReadErrorFails(t *testing.T) {
	_, d, _, fb, c, got := uringTestLoop(t)
	fake := &fakeBundles{err: errors.New("buffer ring 0: completion used buffer 2 first, the ring's head holds 0")}
	d.useBundles(fake)
	recv(d, fb, c, 2, payload(2))
	if len(*got) != 0 {
		t.Fatalf("delivered %q from a bundle the record refused", *got)
	}
	if !c.closed() {
		t.Fatal("the connection is open after its bundle could not be read")
	}
	if err := d.bundleFailed(); err == nil || !strings.Contains(err.Error(), "head holds 0") {
		t.Fatalf("enter's error after a refused bundle: %v; want the refusal", err)
	}
	if err := d.bundleFailed(); err != nil {
		t.Fatalf("the refusal reported twice: %v", err)
	}
	calls := fake.calls
	d.dropBundle(&ring.Completion{Res: 2, Flags: 1}) // a later completion
	if fake.calls != calls {
		t.Fatal("a completion was read from the record after it broke")
	}
}
