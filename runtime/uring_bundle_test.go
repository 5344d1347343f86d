package runtime_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// Receive bundles (UringBundles, uring_bundle.go) on the kernel: with
// 512-byte buffers one receive of a 64 KiB message fills many buffers in
// one completion, and each is delivered as its own OnData of at most
// BufferSize, in order, whatever stops the delivery in the middle of a
// bundle (a close, a pause, the turn budget). On epoll the feature is
// ignored and the same traffic runs as usual.

const bundleBufSize = 512

// bundleConfig is cfg on backend b with bundles asked for and 512-byte
// buffers.
func bundleConfig(b percore.Backend, cfg percore.Config) percore.Config {
	f := percore.DefaultUringFeatures | percore.UringBundles
	cfg.Backend, cfg.UringFeatures, cfg.BufferSize = b, &f, bundleBufSize
	return cfg
}

// startBundles starts a runtime of bundleConfig's; on io_uring it checks
// that the loop uses bundles where the kernel has them.
func startBundles(t *testing.T, b percore.Backend, cfg percore.Config, h percore.Handler) *percore.Runtime {
	t.Helper()
	cfg = bundleConfig(b, cfg)
	rt := start(t, cfg, h)
	if b == percore.IOURing {
		if got, want := rt.Report().UringFeatures, kernelFeatures(t, *cfg.UringFeatures); got != want {
			t.Fatalf("the loop uses %v, want %v", got, want)
		}
	}
	return rt
}

// usesBundles reports whether rt's loop receives in bundles.
func usesBundles(rt *percore.Runtime) bool {
	return rt.Report().UringFeatures&percore.UringBundles != 0
}

// randomBytes returns n bytes from seed.
func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 71))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	return p
}

// sizeCheck echoes and counts the reads larger than BufferSize, which no
// backend may deliver.
type sizeCheck struct{ big *atomic.Int64 }

func (h sizeCheck) OnData(c *percore.Conn, data []byte) {
	if len(data) > bundleBufSize {
		h.big.Add(1)
	}
	c.Write(data)
}

// TestBundlesEcho: 64 KiB messages over four connections come back byte
// for byte, no OnData is given more than BufferSize, and on io_uring the
// loop counts completions of several buffers.
func TestBundlesEcho(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		var big atomic.Int64
		rt := startBundles(t, b, percore.Config{}, sizeCheck{&big})
		before := rt.Stats()
		echoMany(t, rt, 4, 8, randomPayload(64<<10))
		if n := big.Load(); n > 0 {
			t.Errorf("%d reads delivered more than BufferSize (%d)", n, bundleBufSize)
		}
		s := rt.Stats()
		bundles, bufs := s.Bundles-before.Bundles, s.BundleBuffers-before.BundleBuffers
		t.Logf("%d completions of several buffers, %d buffers in them", bundles, bufs)
		if usesBundles(rt) && bundles == 0 {
			t.Errorf("32 receives of 64 KiB into %d-byte buffers: no completion filled more than one", bundleBufSize)
		}
	})
}

// closeOrEcho closes a connection after its first part when that part
// starts with 0xff (writing the part back first), and echoes the others.
type closeOrEcho struct{}

func (closeOrEcho) OnData(c *percore.Conn, data []byte) {
	c.Write(data)
	if c.Value() == nil && data[0] == 0xff {
		c.Close()
		return
	}
	c.SetValue(true)
}

// TestBundlesCloseAfterFirst: a handler that closes after its first part
// gets no more of the bundle: the peer reads back at most one buffer's
// bytes, a prefix of what it sent, then the end of the stream. The rest of
// the bundle's buffers go back to the ring through its record, so the
// connections after it still receive in order (a record gone wrong fails
// their reads).
func TestBundlesCloseAfterFirst(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := startBundles(t, b, percore.Config{}, closeOrEcho{})
		for i := range 8 {
			c := dial(t, rt)
			p := randomBytes(uint64(i), 64<<10)
			p[0] = 0xff
			if _, err := c.Write(p); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			switch {
			case errors.Is(err, syscall.ECONNRESET):
				// Close (not CloseLinger) with the peer's bytes still
				// arriving: the kernel resets, and the reset may come
				// before what was written back. What this test checks
				// is the echo after it.
				if !bytes.HasPrefix(p, got) || len(got) > bundleBufSize {
					t.Fatalf("connection %d: got %d bytes back before the reset; want a prefix of at most %d", i, len(got), bundleBufSize)
				}
			case err != nil:
				t.Fatalf("connection %d: read to the end: %v", i, err)
			case len(got) == 0 || len(got) > bundleBufSize || !bytes.HasPrefix(p, got):
				t.Fatalf("connection %d: got %d bytes back; want a prefix of what was sent of at most %d", i, len(got), bundleBufSize)
			}
			c.Close()
			// An echo after each: its bundles start where the
			// closed connection's ended in the ring.
			e := dial(t, rt)
			q := randomBytes(uint64(100+i), 64<<10)
			q[0] = 0
			if got, err := roundTrip(e, q); err != nil || !bytes.Equal(got, q) {
				t.Fatalf("the echo after connection %d: %v (whole: %v)", i, err, bytes.Equal(got, q))
			}
			e.Close()
		}
	})
}

// pauseMid echoes and pauses its connection's reading after every fifth
// part, resuming it from a function posted to the loop: the parts of a
// bundle after the pause wait, in order, until then.
type pauseMid struct{ n *atomic.Int64 }

func (h pauseMid) OnData(c *percore.Conn, data []byte) {
	c.Write(data)
	if h.n.Add(1)%5 == 0 {
		c.PauseRead()
		c.Loop().Post(c.ResumeRead)
	}
}

// TestBundlesPauseMidStream: pauses in the middle of bundles hold the rest
// back and deliver it after the resume, in order.
func TestBundlesPauseMidStream(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		var n atomic.Int64
		rt := startBundles(t, b, percore.Config{}, pauseMid{&n})
		before := rt.Stats()
		echoMany(t, rt, 4, 6, randomPayload(64<<10))
		t.Logf("%d parts, %d receives deferred", n.Load(), rt.Stats().Deferrals-before.Deferrals)
	})
}

// TestBundlesTurnBudget: with a turn budget of two buffers, a bundle's
// buffers past it wait for later turns, in order, and the echoes come back
// whole.
func TestBundlesTurnBudget(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := startBundles(t, b, percore.Config{TurnBudget: 2 * bundleBufSize}, echoHandler{})
		before := rt.Stats()
		echoMany(t, rt, 8, 4, randomPayload(64<<10))
		d := rt.Stats().Deferrals - before.Deferrals
		t.Logf("%d receives deferred", d)
		if usesBundles(rt) && d == 0 {
			t.Errorf("64 KiB echoes under a budget of %d bytes a turn: no receive deferred", 2*bundleBufSize)
		}
	})
}

// randomPayload gives each trip of each connection its own random bytes.
func randomPayload(size int) func(conn, trip int) []byte {
	return func(conn, trip int) []byte { return randomBytes(uint64(conn*1000+trip), size) }
}
