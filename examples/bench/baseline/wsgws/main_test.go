package main

import (
	"testing"

	"github.com/percore/percore/examples/bench/gwproto/gwtest"
)

func TestProtocol(t *testing.T) {
	gwtest.Run(t, gwtest.InProcess(serve))
}
