package runtime_test

import (
	"bytes"
	"io"
	"sync/atomic"
	"testing"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/internal/rawconn"
	"github.com/percore/percore/ring"
	percore "github.com/percore/percore/runtime"
)

func TestParseUringFeatures(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want percore.UringFeatures
	}{
		{"", percore.DefaultUringFeatures},
		{"default", percore.DefaultUringFeatures},
		{"none", 0},
		{"registered_ring", percore.UringRegisteredRing},
		{" Skip_Sends ", percore.UringSkipSends},
		{"registered_ring,skip_sends", percore.UringRegisteredRing | percore.UringSkipSends},
		{"napi", percore.UringNAPI},
		{"direct_descriptors,skip_sends", percore.UringDirectDescriptors | percore.UringSkipSends},
		{"incremental_buffers", percore.UringIncrementalBuffers},
		{"zero_copy_send,skip_sends", percore.UringZeroCopySend | percore.UringSkipSends},
		{"registered_ring,Bundles", percore.UringRegisteredRing | percore.UringBundles},
	} {
		got, err := percore.ParseUringFeatures(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseUringFeatures(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, err := percore.ParseUringFeatures(got.String()); err != nil || back != got {
			t.Errorf("ParseUringFeatures(%q) = %v, %v: String does not parse back", got.String(), back, err)
		}
	}
	if _, err := percore.ParseUringFeatures("skip_sends,bundles2"); err == nil {
		t.Error("an unknown feature parsed")
	}
}

// uringFeatureSets are the settings each feature is tested under: each
// alone, none (a kernel without any), and the default.
var uringFeatureSets = []percore.UringFeatures{0, percore.UringRegisteredRing, percore.UringSkipSends,
	percore.DefaultUringFeatures, percore.DefaultUringFeatures | percore.UringNAPI,
	percore.DefaultUringFeatures | percore.UringDirectDescriptors,
	percore.UringDirectDescriptors | percore.UringSkipSends,
	percore.DefaultUringFeatures | percore.UringIncrementalBuffers,
	percore.DefaultUringFeatures | percore.UringZeroCopySend,
	percore.DefaultUringFeatures | percore.UringBundles,
	percore.DefaultUringFeatures | percore.UringBundles | percore.UringIncrementalBuffers}

// kernelFeatures is what of want the kernel here lets a loop use (the
// driver's own rule, with the default setup flags).
func kernelFeatures(t *testing.T, want percore.UringFeatures) percore.UringFeatures {
	s, err := ring.Probe()
	if err != nil {
		t.Fatal(err)
	}
	var got percore.UringFeatures
	if want&percore.UringRegisteredRing != 0 && s.HasFeature(ring.RegisteredRing) {
		got |= percore.UringRegisteredRing
	}
	if want&percore.UringSkipSends != 0 && s.HasFeature(ring.CQESkip) {
		got |= percore.UringSkipSends
	}
	if want&percore.UringNAPI != 0 && s.HasFeature(ring.NAPI) {
		got |= percore.UringNAPI
	}
	if want&percore.UringDirectDescriptors != 0 && s.HasFeature(ring.DirectDescriptors) && s.HasFeature(ring.FixedFdInstall) {
		got |= percore.UringDirectDescriptors
	}
	if want&percore.UringIncrementalBuffers != 0 && s.HasFeature(ring.IncrementalBuffers) {
		got |= percore.UringIncrementalBuffers
	}
	if want&percore.UringZeroCopySend != 0 && s.HasFeature(ring.SendZC) {
		got |= percore.UringZeroCopySend
	}
	if want&percore.UringBundles != 0 && s.HasFeature(ring.Bundles) && got&percore.UringIncrementalBuffers == 0 {
		got |= percore.UringBundles // incremental buffers win over bundles
	}
	return got
}

// replyClose answers each read with its bytes, then closes: the bytes
// queued go out first.
type replyClose struct{}

func (replyClose) OnData(c *percore.Conn, data []byte) {
	c.Write(data)
	c.Close()
}

// TestUringFeaturesEach runs the send path under each feature setting:
// the report says what the loop uses, small and large echoes (past one
// send's 256 KiB) arrive whole and in order, and a close after a write
// sends the write first, then ends the stream.
func TestUringFeaturesEach(t *testing.T) {
	pctest.NeedURing(t)
	for _, f := range uringFeatureSets {
		t.Run(f.String(), func(t *testing.T) {
			rt := start(t, percore.Config{Backend: percore.IOURing, UringFeatures: &f}, echoHandler{})
			if got, want := rt.Report().UringFeatures, kernelFeatures(t, f); got != want {
				t.Fatalf("the loop uses %v, want %v", got, want)
			}
			c := dial(t, rt)
			for i, size := range []int{1, 64, 4 << 10, 300 << 10, 1 << 20, 64} {
				p := bytes.Repeat([]byte{byte(i + 1)}, size)
				got, err := roundTrip(c, p)
				if err != nil {
					t.Fatalf("echo of %d bytes: %v", size, err)
				}
				if !bytes.Equal(got, p) {
					t.Fatalf("echo of %d bytes came back different", size)
				}
			}

			rc := start(t, percore.Config{Backend: percore.IOURing, UringFeatures: &f}, replyClose{})
			cc := dial(t, rc)
			p := bytes.Repeat([]byte("abcdefgh"), 8<<10)
			if _, err := cc.Write(p); err != nil {
				t.Fatal(err)
			}
			// The server answers each read and closes after the first:
			// what comes back is a prefix of p, then the end of the stream.
			got, err := io.ReadAll(cc)
			if err != nil {
				t.Fatalf("read to the end: %v", err)
			}
			if len(got) == 0 || !bytes.HasPrefix(p, got) {
				t.Fatalf("got %d bytes that are not a prefix of what was sent", len(got))
			}
		})
	}
}

// TestSkipSendsSaveAnEnter counts the loop's kernel enters per round trip
// of one connection's echo: with skipped sends the enter that submits the
// reply also waits for the next request, where without them a second
// enter reaps the send's completion. (A count, not a timing: the figure
// that says the feature is in use.)
func TestSkipSendsSaveAnEnter(t *testing.T) {
	pctest.NeedURing(t)
	if kernelFeatures(t, percore.UringSkipSends) == 0 {
		t.Skip("the kernel lacks IOSQE_CQE_SKIP_SUCCESS (5.17+)")
	}
	const trips = 300
	perTrip := func(f percore.UringFeatures) float64 {
		rt := start(t, percore.Config{Backend: percore.IOURing, UringFeatures: &f}, echoHandler{})
		c := rawconn.Dial(t, rt.Addr())
		p := make([]byte, 64)
		for range 20 {
			if err := c.RoundTrip(p); err != nil {
				t.Fatal(err)
			}
		}
		before := rt.Stats()
		for range trips {
			if err := c.RoundTrip(p); err != nil {
				t.Fatal(err)
			}
		}
		after := rt.Stats()
		return float64(after.Syscalls-before.Syscalls) / trips
	}
	plain, skip := perTrip(0), perTrip(percore.UringSkipSends)
	t.Logf("enters per round trip: %.2f with plain sends, %.2f with skipped sends", plain, skip)
	if skip > plain-0.5 {
		t.Errorf("skipped sends: %.2f enters per round trip, plain sends %.2f: want at least half an enter fewer", skip, plain)
	}
}

// exactQueue is an echo that checks, as each request arrives, that its
// connection's queue is empty (the client sent it only after it read the
// previous reply whole, so the kernel took that reply), and answers with
// TryWrite under an outbound cap of one and a half replies (below it, so
// that one queued reply does not make the loop wait for its send: the
// cap's pause is one of the things that does): a queue that still counted
// the previous reply would refuse it.
type exactQueue struct{ stale, refused *atomic.Int64 }

func (h exactQueue) OnData(c *percore.Conn, data []byte) {
	if c.Buffered() != 0 {
		h.stale.Add(1)
	}
	if _, err := c.TryWrite(data); err != nil {
		h.refused.Add(1)
		c.Write(data) // the client waits for its reply
	}
}

// TestUringFeaturesQueueExact runs request-response traffic under each
// feature setting and checks that a handler sees its connection's queue
// as the kernel left it: with skipped sends, the send the enter finished
// without a completion is accounted for before the next request's OnData
// (docs/decisions/0057).
func TestUringFeaturesQueueExact(t *testing.T) {
	pctest.NeedURing(t)
	const size, trips = 64, 300
	for _, f := range uringFeatureSets {
		t.Run(f.String(), func(t *testing.T) {
			var stale, refused atomic.Int64
			rt := start(t, percore.Config{Backend: percore.IOURing, UringFeatures: &f, MaxOutbound: size + size/2},
				exactQueue{&stale, &refused})
			// One connection: its reply is the send the loop sleeps
			// with, and its next request the completion that wakes it.
			c := rawconn.Dial(t, rt.Addr())
			p := make([]byte, size)
			for range trips {
				if err := c.RoundTrip(p); err != nil {
					t.Fatal(err)
				}
			}
			if n, m := stale.Load(), refused.Load(); n != 0 || m != 0 {
				t.Errorf("of %d requests, %d saw a reply already sent still queued and %d TryWrites were refused", trips, n, m)
			}
		})
	}
}
