package pool

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// fakeClock is a clock that moves only when a test moves it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *fakeClock) Advance(d time.Duration) { c.set(c.Now().Add(d)) }

// fakeLoop is a deterministic single-threaded Loop: timers run when the test
// advances the clock, posted functions when it drains them, and the
// OnPublish functions when it ends a turn (publish).
type fakeLoop struct {
	clock     *fakeClock
	timers    []*fakeTimer
	seq       int
	onStop    []func()
	onPublish []func()

	mu      sync.Mutex
	posted  []func()
	stopped bool
}

type fakeTimer struct {
	when time.Time
	seq  int
	f    func()
	live bool
}

func newFakeLoop(c *fakeClock) *fakeLoop { return &fakeLoop{clock: c} }

func (fl *fakeLoop) Schedule(d time.Duration, f func()) func() bool {
	t := &fakeTimer{when: fl.clock.Now().Add(d), seq: fl.seq, f: f, live: true}
	fl.seq++
	fl.timers = append(fl.timers, t)
	return func() bool {
		was := t.live
		t.live = false
		return was
	}
}

func (fl *fakeLoop) Post(f func()) error {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.stopped {
		return fmt.Errorf("post to fake loop: %w", net.ErrClosed)
	}
	fl.posted = append(fl.posted, f)
	return nil
}

func (fl *fakeLoop) OnStop(f func()) { fl.onStop = append(fl.onStop, f) }

func (fl *fakeLoop) OnPublish(f func()) { fl.onPublish = append(fl.onPublish, f) }

// publish ends a turn: the OnPublish functions run, as a percore loop runs
// them between its callbacks.
func (fl *fakeLoop) publish() {
	for _, f := range fl.onPublish {
		f()
	}
}

// advance moves the clock forward by d, running the timers that come due on
// the way in deadline order (each at its deadline).
func (fl *fakeLoop) advance(d time.Duration) {
	end := fl.clock.Now().Add(d)
	for {
		var next *fakeTimer
		at := -1
		for i, t := range fl.timers {
			if !t.live {
				continue
			}
			if !t.when.After(end) && (next == nil || t.when.Before(next.when) ||
				(t.when.Equal(next.when) && t.seq < next.seq)) {
				next, at = t, i
			}
		}
		if next == nil {
			break
		}
		fl.timers = append(fl.timers[:at], fl.timers[at+1:]...)
		next.live = false
		if next.when.After(fl.clock.Now()) {
			fl.clock.set(next.when)
		}
		next.f()
	}
	live := fl.timers[:0]
	for _, t := range fl.timers {
		if t.live {
			live = append(live, t)
		}
	}
	fl.timers = live
	fl.clock.set(end)
}

// drain runs posted functions until none is left.
func (fl *fakeLoop) drain() {
	for {
		fl.mu.Lock()
		fs := fl.posted
		fl.posted = nil
		fl.mu.Unlock()
		if len(fs) == 0 {
			return
		}
		for _, f := range fs {
			f()
		}
	}
}

// stop runs the OnStop functions, refuses further posts, runs what was
// posted before and publishes a last time, as a percore loop does.
func (fl *fakeLoop) stop() {
	for _, f := range fl.onStop {
		f()
	}
	fl.mu.Lock()
	fl.stopped = true
	fl.mu.Unlock()
	fl.drain()
	fl.publish()
}

// liveTimers counts the timers still pending.
func (fl *fakeLoop) liveTimers() int {
	n := 0
	for _, t := range fl.timers {
		if t.live {
			n++
		}
	}
	return n
}

// fakeConn is an in-memory connection.
type fakeConn struct {
	id      int
	broken  bool // the peer went away: Broken reports it, validation fails
	invalid bool // validation fails
	closed  bool
}

// fakeMode says how the fake manager answers.
type fakeMode uint8

const (
	answerAtOnce fakeMode = iota // before Connect/Validate returns
	answerPosted                 // from a function posted to the loop
	answerHeld                   // when the test releases it
)

var errRefused = errors.New("fake: connection refused")

// fakeManager is an in-memory Manager. Several loops may share it: its
// counters are under mu, and callbacks run outside it. A connection's fields
// belong to the thread of the loop that opened it.
type fakeManager struct {
	mu                        sync.Mutex
	connectMode, validateMode fakeMode
	failConnects              bool
	failValidations           bool

	nextID      int
	created     int
	closed      int
	closedTwice int
	open        map[*fakeConn]bool
	connects    []func(*fakeConn, error) // held connects
	validations []heldValidation
}

type heldValidation struct {
	c    *fakeConn
	done func(error)
}

func newFakeManager() *fakeManager { return &fakeManager{open: map[*fakeConn]bool{}} }

// set changes the manager's modes under its lock.
func (m *fakeManager) set(f func(m *fakeManager)) {
	m.mu.Lock()
	f(m)
	m.mu.Unlock()
}

// counts returns created, closed and open.
func (m *fakeManager) counts() (created, closed, open int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.created, m.closed, len(m.open)
}

func (m *fakeManager) Connect(loop Loop, done func(*fakeConn, error)) {
	m.mu.Lock()
	mode, ok := m.connectMode, !m.failConnects
	if mode == answerHeld {
		m.connects = append(m.connects, done)
	}
	m.mu.Unlock()
	switch mode {
	case answerAtOnce:
		m.answerConnect(done, ok)
	case answerPosted:
		if err := loop.Post(func() { m.answerConnect(done, ok) }); err != nil {
			done(nil, err)
		}
	}
}

func (m *fakeManager) answerConnect(done func(*fakeConn, error), ok bool) {
	if !ok {
		done(nil, errRefused)
		return
	}
	m.mu.Lock()
	m.nextID++
	m.created++
	c := &fakeConn{id: m.nextID}
	m.open[c] = true
	m.mu.Unlock()
	done(c, nil)
}

// releaseConnect answers held connect i. It must run on the loop's thread.
func (m *fakeManager) releaseConnect(i int, ok bool) {
	m.mu.Lock()
	done := m.connects[i]
	m.connects = append(m.connects[:i], m.connects[i+1:]...)
	m.mu.Unlock()
	m.answerConnect(done, ok)
}

func (m *fakeManager) validationError(c *fakeConn) error {
	if m.failValidations || c.invalid || c.broken || c.closed {
		return errors.New("fake: validation failed")
	}
	return nil
}

func (m *fakeManager) Validate(loop Loop, c *fakeConn, done func(error)) {
	m.mu.Lock()
	mode, err := m.validateMode, m.validationError(c)
	if mode == answerHeld {
		m.validations = append(m.validations, heldValidation{c, done})
	}
	m.mu.Unlock()
	switch mode {
	case answerAtOnce:
		done(err)
	case answerPosted:
		if perr := loop.Post(func() { done(err) }); perr != nil {
			done(perr)
		}
	}
}

// releaseValidation answers held validation i. It must run on the loop's
// thread.
func (m *fakeManager) releaseValidation(i int, ok bool) {
	m.mu.Lock()
	v := m.validations[i]
	m.validations = append(m.validations[:i], m.validations[i+1:]...)
	m.mu.Unlock()
	var err error
	if !ok {
		err = errors.New("fake: validation failed")
	}
	v.done(err)
}

func (m *fakeManager) Broken(c *fakeConn) bool { return c.broken || c.closed }

func (m *fakeManager) Close(c *fakeConn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.closed {
		m.closedTwice++
		return
	}
	c.closed = true
	m.closed++
	delete(m.open, c)
}
