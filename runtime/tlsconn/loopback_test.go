//go:build linux

package tlsconn_test

import (
	"bytes"
	"crypto/tls"
	"sync"
	"testing"

	"github.com/percore/percore/runtime/tlsconn"
)

// TestLoopbackEcho: many crypto/tls clients at once over real sockets,
// one loop, every byte echoed.
func TestLoopbackEcho(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{MaxHandshakes: 8})
	l := newEloop(t, serverConfig(t), pool)
	const clients = 32
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := clientConfig(t)
			if i%2 == 1 {
				cfg.MaxVersion = tls.VersionTLS12
			}
			c, err := tls.Dial("tcp", l.addr, cfg)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for _, n := range []int{10, 5000, 70_000} {
				msg := bytes.Repeat([]byte{byte(i)}, n)
				if err := exchange(c, msg); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	est, fails := l.count()
	if est != clients || len(fails) != 0 {
		t.Fatalf("established %d, failures %v", est, fails)
	}
	if st := pool.Stats(); st.Started != clients || st.Succeeded != clients {
		t.Fatalf("pool stats %+v", st)
	}
}
