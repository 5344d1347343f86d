//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/ring"
	percore "github.com/percore/percore/runtime"
)

// TestUringFeaturesFlag: -uring-features reaches the runtime's Config (the
// proxy forwards with skipped sends, and the loops report them where the
// kernel has them), and a name it does not know is refused before anything
// listens, naming the flag.
func TestUringFeaturesFlag(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		up := upstreamServer(t, echoHandler)
		s := startProxy(t, b, hostPort(up), func(c *config) { c.features = "registered_ring,skip_sends" })
		cl := httpClient(t)
		for i := range 10 {
			resp, body := get(t, cl, fmt.Sprintf("http://%s/f/%d", s.rt.Addr(), i))
			if want := fmt.Sprintf("GET /f/%d ", i); resp.StatusCode != 200 || body != want {
				t.Fatalf("%d %q, want 200 %q", resp.StatusCode, body, want)
			}
		}
		if b != percore.IOURing {
			return
		}
		// The report lists what was asked for and the kernel has: skipped
		// sends are 5.17+, and never in the default.
		got := s.rt.Report().UringFeatures
		if got&^(percore.UringRegisteredRing|percore.UringSkipSends) != 0 {
			t.Fatalf("the loops use %v, asked for registered_ring,skip_sends", got)
		}
		probe, err := ring.Probe()
		if err != nil {
			t.Fatal(err)
		}
		if probe.HasFeature(ring.CQESkip) && got&percore.UringSkipSends == 0 {
			t.Fatalf("the loops use %v: skip_sends did not reach the runtime", got)
		}
	})
	cfg := config{addr: "127.0.0.1:0", upstreams: "127.0.0.1:1", cores: "0", backend: "auto", max: 1,
		wait: time.Second, timeout: time.Second, maxBody: -1, maxOutbound: 1 << 16,
		features: "sqpoll", logger: slog.New(slog.DiscardHandler)}
	s, err := start(cfg)
	if err == nil {
		s.close()
		t.Fatal("-uring-features sqpoll accepted")
	}
	if msg := err.Error(); !strings.Contains(msg, "-uring-features") || !strings.Contains(msg, `"sqpoll"`) {
		t.Fatalf("error %q does not name the flag and the value", msg)
	}
}
