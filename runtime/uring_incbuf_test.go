package runtime_test

import (
	"bytes"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// The io_uring loop with incremental receive buffers (UringIncrementalBuffers,
// uring_incbuf.go) on the kernel: receives of many connections share
// buffers, bytes arrive whole and in order whatever holds them back (the
// turn budget, a paused read, a close), and every buffer is back with the
// kernel once the connections are quiet.

// needIncremental starts an io_uring runtime with incremental buffers, or
// skips where the kernel lacks them (6.12+).
func needIncremental(t *testing.T, cfg percore.Config, h percore.Handler) *percore.Runtime {
	t.Helper()
	pctest.NeedURing(t)
	f := percore.DefaultUringFeatures | percore.UringIncrementalBuffers
	if kernelFeatures(t, f)&percore.UringIncrementalBuffers == 0 {
		t.Skip("the kernel lacks IOU_PBUF_RING_INC (6.12+)")
	}
	cfg.Backend, cfg.UringFeatures = percore.IOURing, &f
	rt := start(t, cfg, h)
	if rt.Report().UringFeatures&percore.UringIncrementalBuffers == 0 {
		t.Fatalf("the loop does not use incremental buffers: %v", rt.Report().UringFeatures)
	}
	return rt
}

// recvParts reads RecvParts on rt's loop.
func recvParts(t *testing.T, rt *percore.Runtime) (held, out, buffers int, recycled uint64) {
	t.Helper()
	done := make(chan struct{})
	l := rt.Loops()[0]
	var ok bool
	if err := l.Post(func() {
		held, out, buffers, recycled, ok = percore.RecvParts(l)
		close(done)
	}); err != nil {
		t.Fatal(err)
	}
	<-done
	if !ok {
		t.Fatal("the loop keeps no record of incremental buffers")
	}
	return
}

// quiet checks that rt's loop holds no part and that every buffer is the
// kernel's, and returns how many buffers it recycled. Call it when the
// loop can hold nothing: every connection idle with its input delivered,
// or closed (OnClose has run).
func quiet(t *testing.T, rt *percore.Runtime) (recycled uint64) {
	t.Helper()
	held, out, _, rec := recvParts(t, rt)
	if held != 0 || out != 0 {
		t.Fatalf("the loop still holds %d parts and %d buffers are not back with the kernel", held, out)
	}
	return rec
}

// TestIncrementalBuffersShare: 50 connections' 64-byte round trips fill
// buffers a part at a time: a buffer is recycled only once full, so the
// loop recycles about one buffer per 64 KiB received, where a plain ring
// recycles one per receive.
func TestIncrementalBuffersShare(t *testing.T) {
	rt := needIncremental(t, percore.Config{}, echoHandler{})
	const conns, trips, size = 50, 40, 64
	echoMany(t, rt, conns, trips, func(conn, _ int) []byte { return bytes.Repeat([]byte{byte(conn)}, size) })
	recycled := quiet(t, rt)
	t.Logf("%d receives of %d bytes: %d buffers recycled", conns*trips, size, recycled)
	received := uint64(conns * trips * size)
	if max := received / percore.IncrementalBufferSize; recycled > max {
		t.Errorf("%d receives of %d bytes recycled %d buffers of %d: want at most %d (one per full buffer)",
			conns*trips, size, recycled, percore.IncrementalBufferSize, max)
	}
}

var errEcho = &net.OpError{Op: "echo", Err: errString("the echo came back different")}

type errString string

func (e errString) Error() string { return string(e) }

// pauser echoes, and now and then pauses its connection's reading for a
// millisecond (a server's choice, not the test's synchronisation), so
// that receives wait, holding their parts, while other connections'
// receives go on in the same buffers.
type pauser struct{ closed chan struct{} }

func (p pauser) OnClose(*percore.Conn, error) { p.closed <- struct{}{} }

func (pauser) OnData(c *percore.Conn, data []byte) {
	c.Write(data)
	if data[0]%7 == 0 && !c.ReadPaused() {
		c.PauseRead()
		c.Loop().AfterFunc(time.Millisecond, c.ResumeRead)
	}
}

// TestIncrementalBuffersHeld: echoes of random sizes (up to 200 KiB, past
// a buffer) over 64 connections with a small turn budget and pauses, so
// that many receives wait for a later turn holding parts of shared
// buffers (past the quarter of the buffers that may be held, so that some
// are copied out), and some connections reset with data in flight: what
// arrives is whole and in order, and once the connections are gone every
// buffer is back with the kernel.
func TestIncrementalBuffersHeld(t *testing.T) {
	const conns = 64
	closed := make(chan struct{}, conns)
	rt := needIncremental(t, percore.Config{TurnBudget: 2 << 10}, pauser{closed})
	before := rt.Stats()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		c := dial(t, rt)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 28))
			for trip := range 6 {
				p := make([]byte, 1+rng.IntN(200<<10))
				for j := range p {
					p[j] = byte(rng.Uint32())
				}
				if i%8 == 7 && trip == 3 {
					// A reset with the request in flight: its
					// parts are released by the close.
					c.Write(p)
					c.(*net.TCPConn).SetLinger(0)
					c.Close()
					return
				}
				got, err := roundTrip(c, p)
				if err == nil && !bytes.Equal(got, p) {
					err = errEcho
				}
				if err != nil {
					errs <- err
					return
				}
			}
			c.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for range conns {
		<-closed
	}
	recycled := quiet(t, rt)
	d := rt.Stats().Deferrals - before.Deferrals
	t.Logf("%d receives deferred, %d buffers recycled", d, recycled)
	if d == 0 {
		t.Errorf("no receive was deferred: the test held no part")
	}
}
