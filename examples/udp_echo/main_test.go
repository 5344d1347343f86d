//go:build linux

package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net"
	"testing"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/examples/internal/serverflag"
	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// start runs the server on 127.0.0.1:0 with one loop and the backend, and
// stops it at cleanup, checking that the shutdown succeeds.
func start(t *testing.T, b percore.Backend) *net.UDPAddr {
	t.Helper()
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		o := options{Flags: serverflag.Flags{Addr: "127.0.0.1:0", Cores: cores[:1], Backend: b}}
		done <- run(ctx, o, func(a net.Addr) { ready <- a })
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := pctest.Recv(t, done, "run's return after the shutdown"); err != nil {
			t.Errorf("run returned %v after the shutdown", err)
		}
	})
	return addr.(*net.UDPAddr)
}

// Every datagram comes back whole to its own source, from the smallest to
// the largest loopback carries, from several sources at once.
func TestEchoesEveryDatagramToItsSource(t *testing.T) {
	sizes := []struct {
		name string
		n    int
	}{
		{"one byte", 1},
		{"typical", 64},
		{"ethernet payload", 1472},
		{"jumbo", 9000},
		{"near the limit", 65000},
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		addr := start(t, b)
		var clients []*net.UDPConn
		for range 3 {
			c, err := net.DialUDP("udp", nil, addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			clients = append(clients, c)
		}
		buf := make([]byte, 65536)
		for _, sz := range sizes {
			t.Run(sz.name, func(t *testing.T) {
				for i, c := range clients {
					want := bytes.Repeat([]byte{byte(i + 1)}, sz.n)
					if _, err := c.Write(want); err != nil {
						t.Fatal(err)
					}
					// A loopback datagram is not lost unless a buffer
					// overflows; the deadline bounds a failing test.
					_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
					n, err := c.Read(buf)
					if err != nil {
						t.Fatalf("client %d: %v", i, err)
					}
					if !bytes.Equal(buf[:n], want) {
						t.Fatalf("client %d: got %d bytes back, want its own %d", i, n, sz.n)
					}
				}
			})
		}
	})
}

// A bad -backend or -cores is refused when the flags are parsed, a bad
// address when the runtime starts.
func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		parseErr bool // refused by the flag set; otherwise by run
	}{
		{"backend", []string{"-addr", "127.0.0.1:0", "-backend", "nope"}, true},
		{"cores", []string{"-addr", "127.0.0.1:0", "-cores", "x"}, true},
		{"address", []string{"-addr", "not an address"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("udp_echo", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o, err := parse(fs, tt.args)
			if tt.parseErr {
				if err == nil {
					t.Errorf("parse(%q) succeeded", tt.args)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse(%q): %v", tt.args, err)
			}
			if err := run(context.Background(), o, nil); err == nil {
				t.Error("run succeeded")
			}
		})
	}
}
