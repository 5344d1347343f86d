package ws_test

import (
	"flag"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
)

// full runs the Autobahn cases at their published sizes and counts (section
// 9's messages up to 16 MiB, 1000 messages per case of sections 9.7, 9.8,
// 12 and 13) instead of the scaled-down default that make test runs.
var full = flag.Bool("ws.full", false, "run the Autobahn cases at their published sizes and counts")

func TestMain(m *testing.M) { leakcheck.Main(m) }
