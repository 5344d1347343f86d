package main

import (
	"testing"

	"github.com/percore/percore/examples/bench/gwproto/gwtest"
)

// TestProtocol runs the gateway in process, or, under the race detector,
// as a program built without it: nbio's accept goroutine and its pollers
// share each connection's address without synchronisation the detector
// can see (nbio marks its own functions //go:norace; the write it reports
// is net's, in Accept), so a race-enabled nbio fails every test on nbio's
// account. The test code itself still runs with the detector.
func TestProtocol(t *testing.T) {
	start := gwtest.InProcess(serve)
	if raceEnabled {
		start = subprocess(t)
	}
	gwtest.Run(t, start)
}

func subprocess(t *testing.T) gwtest.Start {
	if testing.Short() {
		t.Skip("-race -short: building wsnbio without the race detector is not short")
	}
	return gwtest.Program(t, ".", ".", false)
}
