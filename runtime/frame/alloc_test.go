package frame_test

import (
	"bytes"
	"testing"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/internal/rawconn"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// TestFramedRoundTripAllocs: a framed request in, a framed reply out
// (WriteLine, WriteFrame), with frames whole and split across writes,
// allocates nothing on either backend.
func TestFramedRoundTripAllocs(t *testing.T) {
	lines := frame.Lines(frame.HandlerFunc(func(c *percore.Conn, line []byte) {
		frame.WriteLine(c, line)
	}), frame.LineConfig{})
	frames := frame.LengthPrefixed(frame.HandlerFunc(func(c *percore.Conn, payload []byte) {
		frame.WriteFrame(c, payload)
	}), frame.LengthConfig{})
	req := frame.AppendFrame(frame.AppendFrame(nil, []byte("first")), bytes.Repeat([]byte("z"), 100))
	tests := []struct {
		name   string
		h      percore.Handler
		pieces [][]byte
	}{
		{"lines", lines, [][]byte{[]byte("ping\nsplit li"), []byte("ne\n")}},
		{"length", frames, [][]byte{req[:20], req[20:]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				rt := serve(t, b, tt.h)
				c := rawconn.Dial(t, rt.Addr())
				for range 200 { // warm up: buffers and the loop's first turns
					if err := c.RoundTrip(tt.pieces...); err != nil {
						t.Fatal(err)
					}
				}
				var err error
				allocs := testing.AllocsPerRun(1000, func() {
					if e := c.RoundTrip(tt.pieces...); e != nil {
						err = e
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				if allocs != 0 {
					t.Fatalf("%v allocations per round trip, want 0", allocs)
				}
			})
		})
	}
}
