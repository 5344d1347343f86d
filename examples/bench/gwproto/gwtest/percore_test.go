package gwtest_test

import (
	"os"
	"testing"

	"github.com/percore/percore/examples/bench/gwproto/gwtest"
)

// TestPercoreGateway runs the protocol's cases against examples/ws_gateway
// (in the library's module, so built as a program) on both backends, and
// on io_uring with skipped sends, once that directory exists. A backend the machine cannot run skips.
func TestPercoreGateway(t *testing.T) {
	const root = "../../../.."
	if _, err := os.Stat(root + "/examples/ws_gateway"); err != nil {
		t.Skip("examples/ws_gateway does not exist yet")
	}
	if testing.Short() {
		t.Skip("builds examples/ws_gateway")
	}
	for _, backend := range []string{"epoll", "uring"} {
		t.Run(backend, func(t *testing.T) {
			gwtest.Run(t, gwtest.Program(t, root, "./examples/ws_gateway", backend == "uring", "-cores", "0", "-backend", backend))
		})
	}
	// Skipped sends (percore.UringSkipSends) whatever the default: the
	// slow-consumer case is the one that found handlers seeing a queue
	// the kernel had already sent (docs/decisions/0057).
	t.Run("uring-skip_sends", func(t *testing.T) {
		gwtest.Run(t, gwtest.Program(t, root, "./examples/ws_gateway", true, "-cores", "0", "-backend", "uring",
			"-uring-features", "registered_ring,skip_sends"))
	})
}
