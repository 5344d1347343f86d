package runtime_test

import (
	"encoding/binary"
	"io"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// numberedPieces answers each byte it receives with queuePieces writes of
// queuePiece bytes, each piece filled with its index: far more than the
// socket takes, so the connection's queue grows past the largest pooled
// buffer while the client reads slowly.
type numberedPieces struct{}

const (
	queuePieces = 96
	queuePiece  = 64 << 10
)

func (numberedPieces) OnData(c *percore.Conn, p []byte) {
	piece := make([]byte, queuePiece)
	for range p {
		for i := range queuePieces {
			for off := 0; off < len(piece); off += 4 {
				binary.LittleEndian.PutUint32(piece[off:], uint32(i))
			}
			c.Write(piece)
		}
	}
}

// TestLongQueueArrivesInOrder queues 6 MiB in 64 KiB writes on one
// connection and reads it back through small reads: every byte arrives,
// in the order written, on both backends.
func TestLongQueueArrivesInOrder(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, percore.Config{Backend: b, MaxOutbound: -1}, numberedPieces{})
		c := dial(t, rt)
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, queuePiece)
		for i := range queuePieces {
			// Read each piece in 4 KiB steps, as a slow reader would.
			for off := 0; off < len(buf); off += 4 << 10 {
				if _, err := io.ReadFull(c, buf[off:off+4<<10]); err != nil {
					t.Fatalf("piece %d at %d: %v", i, off, err)
				}
			}
			for off := 0; off < len(buf); off += 4 {
				if got := binary.LittleEndian.Uint32(buf[off:]); got != uint32(i) {
					t.Fatalf("piece %d holds %d at offset %d", i, got, off)
				}
			}
		}
	})
}
