//go:build linux

// Package echotest checks an echo server the same way for every baseline:
// it echoes payloads from one byte to past its buffers, and it stops when
// its context ends even with a connection open.
package echotest

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// Serve runs an echo server until ctx is done, calling ready with its
// address once it accepts connections.
type Serve func(ctx context.Context, ready func(net.Addr)) error

// Run starts serve, checks its echoes, then cancels it and checks that it
// returns.
func Run(t *testing.T, serve Serve) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan net.Addr, 1)
	served := make(chan error, 1)
	go func() { served <- serve(ctx, func(a net.Addr) { ready <- a }) }()
	var addr string
	select {
	case a := <-ready:
		addr = a.String()
	case err := <-served:
		t.Fatalf("server returned before it was ready: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("server not ready within 20s")
	}

	tests := []struct {
		name string
		size int
	}{
		{"one byte", 1},
		{"64 B", 64},
		{"larger than the buffer", 100_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			want := bytes.Repeat([]byte{0x5a, 0x01, 0xff}, tt.size/3+1)[:tt.size]
			errc := make(chan error, 1)
			go func() { _, err := c.Write(want); errc <- err }()
			got := make([]byte, tt.size)
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("read the echo: %v", err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("write: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("echo differs from what was sent")
			}
		})
	}

	// An open connection must not keep the server from stopping.
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not return within 20s of its context ending")
	}
}
