package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestWalkThrough(t *testing.T) {
	var out bytes.Buffer
	// The connection timeout bounds whole gets: the waiter's, while the
	// test hands it a returned connection, and a new connection's dial.
	// A second leaves room for a stalled machine; the step that must time
	// out costs that second.
	err := run(&out, config{max: 3, minIdle: 2, wait: time.Second,
		idle: 2 * time.Second, reap: 20 * time.Millisecond})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"warmed", "connections 2 (idle 2, in use 0)",
		"lent 3", "connections 3 (idle 0, in use 3)",
		"it waits", "waiters 1",
		"handed straight to the waiter", "gets direct 2 waited 2",
		"within the connection timeout", "timed out 1",
		"all returned", "connections 3 (idle 3, in use 0)",
		"reaped them", "idle 3",
		"closed", "live 0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
