//go:build linux

package main

import (
	"context"
	"net"
	"sync"
)

// idleDialers is how many idle connections are opened at a time.
const idleDialers = 64

// openIdle opens n connections to addr that will send nothing, and returns
// those that opened and how many failed. They cost the generator nothing
// while open: the standard library parks them in its poller.
func openIdle(ctx context.Context, addr string, n int) ([]net.Conn, uint64) {
	if n == 0 {
		return nil, 0
	}
	var (
		mu     sync.Mutex
		conns  = make([]net.Conn, 0, n)
		failed uint64
		wg     sync.WaitGroup
		next   = make(chan struct{})
	)
	for range min(idleDialers, n) {
		wg.Go(func() {
			var d net.Dialer
			for range next {
				c, err := d.DialContext(ctx, "tcp", addr)
				mu.Lock()
				if err != nil {
					failed++
				} else {
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		})
	}
	for range n {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	return conns, failed
}

// closeAll closes conns.
func closeAll(conns []net.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}
