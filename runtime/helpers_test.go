package runtime_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/internal/rawconn"
	percore "github.com/percore/percore/runtime"
)

// allCores returns the CPUs this test may use.
func allCores(t testing.TB) []int {
	t.Helper()
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	return cores
}

// start starts a runtime for the test (pctest.Start): one loop, a listener
// on 127.0.0.1:0 when h is not nil, closed at cleanup.
func start(t testing.TB, cfg percore.Config, h percore.Handler) *percore.Runtime {
	t.Helper()
	return pctest.Start(t, cfg, h)
}

type echoHandler struct{}

func (echoHandler) OnData(c *percore.Conn, data []byte) { c.Write(data) }

// dial connects to rt with a deadline on every read and write.
func dial(t *testing.T, rt *percore.Runtime) net.Conn {
	t.Helper()
	return pctest.Dial(t, rt.Addr().String())
}

// roundTrip writes p and reads len(p) bytes back, concurrently so that a
// payload larger than the socket buffers cannot deadlock.
func roundTrip(c net.Conn, p []byte) ([]byte, error) {
	var werr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, werr = c.Write(p)
	}()
	got := make([]byte, len(p))
	_, rerr := io.ReadFull(c, got)
	wg.Wait()
	if werr != nil {
		return got, werr
	}
	return got, rerr
}

var discard = slog.New(slog.DiscardHandler)

func shutdownCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// assertNoAllocs fails t unless a 512-byte echo round trip with rt, after a
// warm-up, allocates nothing on either side of the process.
func assertNoAllocs(t *testing.T, rt *percore.Runtime) {
	t.Helper()
	c := rawconn.Dial(t, rt.Addr())
	p := make([]byte, 512)
	for i := range p {
		p[i] = byte(i)
	}
	for range 200 { // warm up: buffers, slices, the loop's first turns
		if err := c.RoundTrip(p); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	allocs := testing.AllocsPerRun(2000, func() {
		if e := c.RoundTrip(p); e != nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per round trip, want 0", allocs)
	}
}

// echoMany runs trips echoes on each of conns connections at once, each
// of payload(connection, trip), and fails t unless each comes back whole.
func echoMany(t *testing.T, rt *percore.Runtime, conns, trips int, payload func(conn, trip int) []byte) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for i := range conns {
		c := dial(t, rt)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for trip := range trips {
				p := payload(i, trip)
				got, err := roundTrip(c, p)
				if err == nil && !bytes.Equal(got, p) {
					err = errEcho
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
