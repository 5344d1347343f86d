package tlsconn_test

import (
	"testing"

	"github.com/percore/percore/runtime/tlsconn"
)

// TestDecryptAllocs: a read full of small records allocates a few times,
// not once per record (several whole records go to crypto/tls in one
// hand-over, and the buffers are pooled), and Encrypt into a reused buffer
// allocates nothing.
func TestDecryptAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops at random under -race")
	}
	pool := newPool(t, tlsconn.PoolConfig{})
	srv, cli := inMemoryPair(t, pool, 0)
	const perRead = 64
	msg := make([]byte, 100)
	reads := make([][]byte, 200)
	for i := range reads {
		for range perRead {
			var err error
			if reads[i], err = cli.Encrypt(reads[i], msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	scratch := make([]byte, 0, 64<<10)
	i := 0
	allocs := testing.AllocsPerRun(len(reads)-1, func() {
		p, err := srv.Decrypt(scratch[:0], reads[i], 0)
		if err != nil || len(p) != perRead*len(msg) {
			t.Fatal(len(p), err)
		}
		i++
	})
	t.Logf("%.1f allocations per read of %d records", allocs, perRead)
	if allocs > 8 {
		t.Fatalf("%.1f allocations per read of %d records: one per record?", allocs, perRead)
	}
	out := make([]byte, 0, 64<<10)
	if a := testing.AllocsPerRun(100, func() { out, _ = srv.Encrypt(out[:0], msg) }); a != 0 {
		t.Fatalf("Encrypt allocates %.1f times", a)
	}
}
