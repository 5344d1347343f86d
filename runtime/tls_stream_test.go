package runtime_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// randomWriter echoes what it receives through a random mix of Write,
// Writev and Reserve/Commit, seeded.
type randomWriter struct {
	mu  sync.Mutex
	rng *rand.Rand
}

func (h *randomWriter) OnData(c *percore.Conn, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(data) > 0 {
		n := min(len(data), 1+h.rng.IntN(20000))
		p := data[:n]
		data = data[n:]
		switch h.rng.IntN(3) {
		case 0:
			c.Write(p)
		case 1:
			k := h.rng.IntN(len(p) + 1)
			c.Writev(p[:k], p[k:])
		case 2:
			room := c.Reserve(len(p) + h.rng.IntN(100))
			copy(room, p)
			if err := c.Commit(len(p)); err != nil {
				panic(err)
			}
		}
		if b := c.Buffered(); b < 0 {
			panic("negative Buffered")
		}
	}
}

// TestTLSRandomStream: a seeded random stream of writes of random sizes
// from the peer, echoed through every write method, comes back whole and
// in order (the oracle is what was sent), on TLS 1.2 and 1.3.
func TestTLSRandomStream(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			seed := uint64(v)
			h := &randomWriter{rng: rand.New(rand.NewPCG(seed, 1))}
			_, addr, _ := startTLS(t, b, percore.Config{MaxOutbound: 64 << 10}, h)
			cfg := pctest.TestPKI().ClientTLS()
			cfg.MaxVersion = v
			c := tlsDial(t, addr, cfg)
			rng := rand.New(rand.NewPCG(seed, 2))
			var sent bytes.Buffer
			for sent.Len() < 4<<20 {
				chunk := make([]byte, 1+rng.IntN(70000))
				for i := range chunk {
					chunk[i] = byte(rng.Uint32())
				}
				sent.Write(chunk)
			}
			done := make(chan error, 1)
			go func() {
				p := sent.Bytes()
				for len(p) > 0 {
					n := min(len(p), 1+rng.IntN(70000))
					if _, err := c.Write(p[:n]); err != nil {
						done <- err
						return
					}
					p = p[n:]
				}
				done <- nil
			}()
			got := make([]byte, sent.Len())
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, sent.Bytes()) {
				i := 0
				for i < len(got) && got[i] == sent.Bytes()[i] {
					i++
				}
				t.Fatalf("version %x: echo differs at byte %d of %d", v, i, len(got))
			}
			c.Close()
		}
	})
}
