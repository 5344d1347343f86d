package main

import (
	"context"
	"net"
	"testing"

	"github.com/percore/percore/internal/echotest"
	"github.com/percore/percore/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestEchoesAndStops(t *testing.T) {
	echotest.Run(t, func(ctx context.Context, ready func(net.Addr)) error {
		return serve(ctx, "127.0.0.1:0", 1, ready)
	})
}
