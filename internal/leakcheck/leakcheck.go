// Package leakcheck fails a test binary that leaks file descriptors or
// goroutines. Every package's TestMain calls Main:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
//
// It snapshots the open descriptors (/proc/self/fd) and the goroutine count
// before the tests run, and after they finish waits up to a few seconds for
// both to return to the baseline (closing and exiting are often asynchronous),
// then reports what is still open and exits non-zero.
package leakcheck

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Settle is how long Main waits for descriptors and goroutines to return to
// the baseline after the tests finish.
const Settle = 5 * time.Second

// Main runs the tests and exits the process, failing the run when
// descriptors or goroutines leaked. It never returns.
//
// Under -test.fuzz the check is skipped: the fuzzing engine keeps
// goroutines and descriptors of its own (its signal handler, the worker
// pipes) past the tests.
func Main(m *testing.M) {
	initNetpoll()
	fds := OpenFDs()
	goroutines := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 && !fuzzing() {
		if err := Check(fds, goroutines, Settle); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Check waits up to settle for the open descriptors to be a subset of
// baseline and the goroutine count to be at most goroutines, and returns an
// error describing what leaked when they are not.
func Check(baseline map[int]string, goroutines int, settle time.Duration) error {
	deadline := time.Now().Add(settle)
	for {
		extra := extraFDs(baseline)
		n := runtime.NumGoroutine()
		if len(extra) == 0 && n <= goroutines {
			return nil
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			if len(extra) > 0 {
				fmt.Fprintf(&b, "%d file descriptors leaked: %s", len(extra), strings.Join(extra, ", "))
			}
			if n > goroutines {
				if b.Len() > 0 {
					b.WriteString("; ")
				}
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				fmt.Fprintf(&b, "%d goroutines leaked (%d at start, %d now):\n%s", n-goroutines, goroutines, n, buf)
			}
			return fmt.Errorf("%s", b.String())
		}
		runtime.GC() // finalizers close descriptors of dropped os.Files
		time.Sleep(10 * time.Millisecond)
	}
}

// OpenFDs returns this process's open descriptors and what each points at.
func OpenFDs() map[int]string {
	fds := make(map[int]string)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fds
	}
	for _, e := range entries {
		var fd int
		if _, err := fmt.Sscan(e.Name(), &fd); err != nil {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the descriptor ReadDir itself used, already closed
		}
		fds[fd] = target
	}
	return fds
}

func extraFDs(baseline map[int]string) []string {
	var extra []string
	for fd, target := range OpenFDs() {
		if old, ok := baseline[fd]; ok && old == target {
			continue
		}
		extra = append(extra, fmt.Sprintf("%d -> %s", fd, target))
	}
	slices.Sort(extra)
	return extra
}

// fuzzing reports whether the test binary runs with -test.fuzz.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// initNetpoll makes Go's own network poller open its epoll and eventfd
// descriptors now, so that they are part of the baseline: the runtime
// creates them on first use and never closes them.
func initNetpoll() {
	r, w, err := os.Pipe()
	if err != nil {
		return
	}
	r.Close()
	w.Close()
}
