package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestBackpressure(t *testing.T) {
	const requests, max = 500, 3
	r, err := fanout(config{requests: requests, max: max, wait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.ok != requests || r.failed != 0 {
		t.Errorf("%d ok, %d failed", r.ok, r.failed)
	}
	if r.stats.Created > max || r.peak > max || r.accepts > max {
		t.Errorf("opened %d connections (upstream accepted %d), peak in use %d; max %d",
			r.stats.Created, r.accepts, r.peak, max)
	}
	if r.stats.GetsWaited < requests-max || r.state.Connections != int(r.stats.Created) {
		t.Errorf("state %v; statistics %v", r.state, r.stats)
	}
	var out bytes.Buffer
	if err := run(&out, config{requests: 20, max: 2, wait: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if !strings.Contains(out.String(), "20 ok, 0 failed") {
		t.Errorf("output:\n%s", out.String())
	}
}
