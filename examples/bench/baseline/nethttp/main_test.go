package main

import (
	"context"
	"net"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestPlaintext: keep-alive and pipelined plaintext requests are answered,
// and the server stops when asked.
func TestPlaintext(t *testing.T) {
	pctest.CheckPlaintext(t, func(ctx context.Context, ready func(string)) error {
		return serve(ctx, "127.0.0.1:0", func(a net.Addr) { ready(a.String()) })
	})
}
