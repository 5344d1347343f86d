package main

import (
	"context"
	"net"
	"testing"

	"github.com/cloudwego/netpoll"
	"github.com/percore/percore/internal/echotest"
	"github.com/percore/percore/internal/leakcheck"
)

// TestMain starts netpoll's pollers before leakcheck takes its baseline:
// they are process-wide and never stop. The test serves with one loop, the
// number netpoll starts with on a machine of fewer than 20 cores, so serve
// starts no other.
func TestMain(m *testing.M) {
	netpoll.Initialize()
	leakcheck.Main(m)
}

func TestEchoesAndStops(t *testing.T) {
	echotest.Run(t, func(ctx context.Context, ready func(net.Addr)) error {
		return serve(ctx, "127.0.0.1:0", 1, false, ready)
	})
}
