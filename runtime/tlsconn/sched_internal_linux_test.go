//go:build linux

package tlsconn

import (
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/internal/sys"
)

// TestWorkerStuck: when the kernel does not let a thread back (an
// unprivileged process leaving nice 19: EPERM), the worker keeps its
// goroutine locked to the lowered thread, later stretches change nothing,
// and the thread ends with the goroutine.
func TestWorkerStuck(t *testing.T) {
	prev := restoreSched
	restoreSched = func(unix.SchedAttr) error { return unix.EPERM }
	defer func() { restoreSched = prev }()
	type result struct {
		locked, stuck bool
		nice          int32
		tid           int
	}
	got := make(chan result)
	go func() {
		var w worker
		pl := threadPlan{sched: SchedNice}
		for range 2 { // a second stretch finds the thread stuck
			w.enter(&pl)
			w.leave()
		}
		a, err := sys.ThreadSched()
		if err != nil {
			t.Error(err)
		}
		got <- result{w.locked, w.stuck, a.Nice, unix.Gettid()}
		// Returns locked: Go ends the thread.
	}()
	r := <-got
	if !r.locked || !r.stuck || r.nice != 19 {
		t.Fatalf("after a refused restore: locked %v, stuck %v, nice %d; want locked, stuck, 19", r.locked, r.stuck, r.nice)
	}
	if r.tid == os.Getpid() {
		return // the main thread: Go wedges it rather than end it, and runs nothing on it again
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(r.tid)); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the lowered thread outlived its goroutine")
		}
		time.Sleep(time.Millisecond)
	}
}
