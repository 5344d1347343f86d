//go:build linux

package main

import (
	"testing"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestServes: both shapes answer the three endpoints.
func TestServes(t *testing.T) {
	for _, serve := range []string{"adapt", "inline"} {
		t.Run(serve, func(t *testing.T) {
			srv, err := newServer(serve)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			addr := pctest.Start(t, percore.Config{}, srv.Handler()).Addr().String()
			for path, want := range map[string]string{"/plaintext": "Hello, World!", "/json": `{"message":"Hello, World!"}` + "\n", "/sleep": "slept"} {
				if got := pctest.HTTPGet(t, "http://"+addr+path); got != want {
					t.Fatalf("%s %s: %q, want %q", serve, path, got, want)
				}
			}
		})
	}
}
