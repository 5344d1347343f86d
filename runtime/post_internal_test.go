package runtime

import (
	"testing"
	"time"
)

// stallWake is a fakeDriver whose wake-up stops until the test releases
// it: a poster the kernel preempted inside the wake-up's system call,
// which is where a loop sharing the poster's CPU takes it over.
type stallWake struct {
	*fakeDriver
	entered chan struct{}
	letGo   chan struct{}
	wakes   int // wake-ups past the stall (the test's goroutine reads them after)
}

func (d *stallWake) wake() {
	d.entered <- struct{}{}
	<-d.letGo
	d.wakes++
}

// TestPostWakesOutsideTheLock: while a Post is inside its wake-up, the loop
// runs what was posted without waiting for the poster. With the wake-up
// under postMu (before 0073), the loop's runPosted slept on that lock until
// the preempted poster ran again: 2-3 ms in a handshake storm, where the
// poster is a handshake's goroutine (docs/performance.md, "TLS, the storm,
// part 4").
func TestPostWakesOutsideTheLock(t *testing.T) {
	l, fd, _ := newTestLoop(t, Config{}, nil)
	d := &stallWake{fakeDriver: fd, entered: make(chan struct{}), letGo: make(chan struct{})}
	l.d = d
	ran := false
	posted := make(chan error, 1)
	go func() { posted <- l.Post(func() { ran = true }) }()
	select {
	case <-d.entered:
	case err := <-posted:
		t.Fatalf("Post returned %v without waking the loop", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Post never reached its wake-up")
	}
	if !l.postMu.TryLock() {
		close(d.letGo)
		<-posted
		t.Fatal("Post holds postMu during its wake-up: the loop's runPosted would wait for the poster")
	}
	l.postMu.Unlock()
	l.runPosted()
	if !ran {
		t.Error("the posted function did not run while its poster was in the wake-up")
	}
	close(d.letGo)
	if err := <-posted; err != nil {
		t.Fatalf("Post: %v", err)
	}
	if d.wakes != 1 {
		t.Errorf("wake-ups: %d, want 1", d.wakes)
	}
}

// wakeCount counts the wake-ups that reach the driver.
type wakeCount struct {
	*fakeDriver
	wakes, anyway int
}

func (d *wakeCount) wake()       { d.wakes++ }
func (d *wakeCount) wakeAnyway() { d.anyway++ }

// TestNoWakeAfterTheDoorCloses: once the loop has closed its wake-up
// descriptor's door (wakeClosed, before it closes the descriptor), neither
// a Post queued before the loop closed its post door nor another loop's
// wake-up writes to the descriptor, whose number may be a connection's by
// then; and the loop's last runPosted still runs what was queued.
func TestNoWakeAfterTheDoorCloses(t *testing.T) {
	l, fd, _ := newTestLoop(t, Config{}, nil)
	d := &wakeCount{fakeDriver: fd}
	l.d = d
	if err := l.Post(func() {}); err != nil {
		t.Fatal(err)
	}
	if d.wakes != 1 {
		t.Fatalf("wake-ups of an open loop: %d, want 1", d.wakes)
	}
	l.wakeMu.Lock()
	l.wakeClosed = true
	l.wakeMu.Unlock()
	ran := false
	if err := l.Post(func() { ran = true }); err != nil {
		t.Fatal(err)
	}
	l.wakeIfOpen()
	l.wakeAfterExit()
	if d.wakes != 1 || d.anyway != 0 {
		t.Errorf("wake-ups after the door closed: wake %d, wakeAnyway %d; want none", d.wakes-1, d.anyway)
	}
	l.runPosted()
	if !ran {
		t.Error("a function queued before the post door closed did not run")
	}
}
