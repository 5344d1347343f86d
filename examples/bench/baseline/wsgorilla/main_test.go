package main

import (
	"context"
	"net"
	"testing"

	"github.com/percore/percore/examples/bench/gwproto"
	"github.com/percore/percore/examples/bench/gwproto/gwtest"
)

func TestProtocol(t *testing.T) {
	gwtest.Run(t, func(t *testing.T, f gwproto.Flags) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, ln, f) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
		return ln.Addr().String()
	})
}
