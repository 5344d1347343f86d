package runtime

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"testing"
	"time"
)

// The cross-loop calls and wake-ups, driven as a model: two to four loops,
// each a real Loop running its real run() on an io_uring driver over the
// stand-in kernel (model_sim_test.go), some waking each other through
// MSG_RING and some through their eventfds. Seeded random sequences of
// steps: functions posted from outside (Post) that make calls to random
// loops, calls made from inside calls and done functions, queues between
// loops that are small and that a push may find full (as it does when the
// consumer pops just after the producer looked), MSG_RINGs that fail, loops
// that take their turns in any order or not at all for a while, and loops
// that stop (as Close and Shutdown stop them) and exit. The oracle, after
// every step:
//
//   - a loop's wake-up flag is never set without a wake-up on its way to
//     it (else every later wake-up is swallowed, and its Shutdown, then
//     Close, wait forever);
//   - a loop with posted functions or calls queued for it has a wake-up on
//     its way, and a loop whose calls wait for room in a full queue, or
//     that made calls it has not sent, does not wait without a limit;
//   - a loop that has calls in flight to a loop that exited is woken to
//     fail them;
//   - a call's function runs at most once, on its target, and only before
//     its done function; the done function runs once, on the caller, with
//     nil if and only if the function ran;
//   - between two loops, calls run in the order they were made and their
//     done functions run in that order (those refused with ErrLoopBusy
//     apart: they never ran);
//   - what a loop holds for a full queue stays within Config.MaxHeldCalls.
//
// At the end every call of a loop that is still running has completed,
// and every loop, stopped, exits.
//
// Run longer with -model.seeds and -model.steps; one seed with -model.seed;
// FuzzModelCalls takes the sequence of choices as its input.

func TestModelCalls(t *testing.T) {
	seen := map[string]int{}
	eachModelSeed(t, func(t *testing.T, seed uint64, steps int) {
		m := runCallModel(t, fmt.Sprintf("seed %d", seed), seededInput(seed), steps)
		for k, v := range m.seen {
			seen[k] += v
		}
	})
	// The sequences must reach what the oracle is there for; a change
	// that made them stop reaching it would leave the test passing and
	// testing nothing.
	if *modelSeed == 0 && *modelSeeds >= 20 && !t.Failed() {
		for _, what := range []string{"held", "refused", "stopped", "failed MSG_RING", "exit", "peer gone"} {
			if seen[what] == 0 {
				t.Errorf("no sequence reached %q", what)
			}
		}
	}
	t.Logf("reached: %v", seen)
}

func FuzzModelCalls(f *testing.F) {
	for seed := uint64(1); seed <= 8; seed++ {
		in := seededInput(seed)
		data := make([]byte, 512)
		for i := range data {
			data[i] = byte(in.intn(256))
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		runCallModel(t, "fuzz input", &modelInput{data: data}, len(data))
	})
}

// callModel is one sequence.
type callModel struct {
	in    *modelInput
	k     *simKernel
	rt    *Runtime
	loops []*Loop
	rings []*simRing
	ds    []*uringDriver
	cur   int // the loop whose thread runs now, -1 for none
	calls []*modelCall
	// lastRun and lastDone are, by caller and target, the sequence number
	// of the last call that ran and whose done function ran (ErrLoopBusy
	// apart), and next the next one to make.
	lastRun, lastDone, lastBusy, next [][]int
	stopped                           []bool
	posts, postsRun                   int
	step                              int
	trace                             []string       // the last steps, for a failure's report
	seen                              map[string]int // what the sequence reached
}

// log records what a step did.
func (m *callModel) log(format string, args ...any) {
	if len(m.trace) == 40 {
		m.trace = m.trace[1:]
	}
	m.trace = append(m.trace, fmt.Sprintf("%d: ", m.step)+fmt.Sprintf(format, args...))
}

// modelCall is one call the model made.
type modelCall struct {
	from, to, seq int
	ran, done     int
	err           error
}

func runCallModel(t *testing.T, label string, in *modelInput, steps int) *callModel {
	t.Helper()
	m := newCallModel(in)
	defer func() {
		r := recover()
		if r == nil {
			if len(m.k.faults) > 0 {
				t.Fatalf("%s, step %d: %s\nthe last steps:\n\t%s", label, m.step, strings.Join(m.k.faults, "; "),
					strings.Join(m.trace, "\n\t"))
			}
			return
		}
		if _, ok := r.(simFault); !ok {
			panic(r)
		}
		t.Fatalf("%s, step %d: %s\nthe last steps:\n\t%s", label, m.step, strings.Join(m.k.faults, "; "),
			strings.Join(m.trace, "\n\t"))
	}()
	for m.step = 1; m.step <= steps && !in.exhausted(); m.step++ {
		m.randomStep()
		m.check()
	}
	m.step = -1 // the end
	m.settle()
	m.finalChecks(false)
	for i, l := range m.loops {
		if !m.rings[i].exited {
			m.stop(l, true)
		}
	}
	m.settle()
	for i, r := range m.rings {
		if !r.exited {
			m.faultf("loop %d did not exit once stopped: it waits with nothing to wake it (woken %v, %d completions ready)",
				i, m.ds[i].waker.Pending(), len(r.cq))
		}
	}
	m.finalChecks(true)
	return m
}

func newCallModel(in *modelInput) *callModel {
	n := 2 + in.intn(3)
	m := &callModel{in: in, k: newSimKernel(), cur: -1, seen: map[string]int{}}
	cfg := Config{MaxHeldCalls: 2 + in.intn(12)}
	m.k.msgFail = func() bool {
		if m.in.chance(1, 16) {
			m.seen["failed MSG_RING"]++
			m.log("a MSG_RING fails")
			return true
		}
		return false
	}
	for i := range n {
		l, r, d := m.k.newLoop(i, cfg, nil)
		d.msgRing = in.intn(4) != 0
		m.loops, m.rings, m.ds = append(m.loops, l), append(m.rings, r), append(m.ds, d)
	}
	m.rt = &Runtime{cfg: m.loops[0].cfg, peers: m.loops, loops: m.loops, seed: maphash.MakeSeed()}
	m.rt.started.Store(true)
	size := 1 + in.intn(3)
	for _, l := range m.loops {
		l.rt = m.rt
		l.initCalls(n, size)
		for _, q := range l.calls.inbound {
			if q != nil {
				q.refuse = func() bool { return m.in.chance(1, 5) }
			}
		}
	}
	grid := func() [][]int {
		g := make([][]int, n)
		for i := range g {
			g[i] = make([]int, n)
		}
		return g
	}
	m.lastRun, m.lastDone, m.lastBusy, m.next = grid(), grid(), grid(), grid()
	m.stopped = make([]bool, n)
	for _, r := range m.rings {
		m.k.start(r)
	}
	return m
}

func (m *callModel) faultf(format string, args ...any) {
	m.k.fault(format, args...)
	panic(simFault{})
}

// randomStep takes one step.
func (m *callModel) randomStep() {
	in := m.in
	i := in.intn(len(m.loops))
	l, r := m.loops[i], m.rings[i]
	switch x := in.intn(100); {
	case x < 40:
		m.post(l)
	case x < 92:
		if r.runnable() {
			m.run(i)
		}
	case x < 96:
		// Another loop's turns, several in a row, while this one waits.
		for range 1 + in.intn(6) {
			if r.runnable() {
				m.run(i)
			}
			m.post(l)
		}
	default:
		if !m.stopped[i] && in.chance(1, 3) {
			m.stop(l, in.chance(1, 2))
		}
	}
}

// post posts to l (from outside any loop) a function that makes calls.
func (m *callModel) post(l *Loop) {
	m.log("post to loop %d", l.id)
	m.posts++
	if l.Post(func() { m.postsRun++; m.makeCalls(l, 1+m.in.intn(4)) }) != nil {
		m.posts--
	}
}

// stop stops l as Close (forced) or Shutdown does.
func (m *callModel) stop(l *Loop, forced bool) {
	m.log("stop loop %d (forced %v)", l.id, forced)
	m.stopped[l.id] = true
	f := l.beginShutdown
	if forced {
		f = func() { l.forceStop(ErrShutdown) }
	}
	_ = l.post(f, true)
}

// run lets loop i take its turns until it waits again.
func (m *callModel) run(i int) {
	m.log("loop %d runs (woken %v, %d completions ready)", i, m.ds[i].waker.Pending(), len(m.rings[i].cq))
	m.cur = i
	m.k.resumeLoop(m.rings[i])
	m.cur = -1
	if m.rings[i].exited && m.step > 0 {
		m.seen["exit"]++
	}
	if len(m.k.faults) > 0 {
		panic(simFault{})
	}
}

// makeCalls makes n calls from l, the loop that runs, to random loops.
func (m *callModel) makeCalls(l *Loop, n int) {
	if m.cur != l.id {
		m.faultf("a function posted to loop %d ran on loop %d", l.id, m.cur)
	}
	for range n {
		to := m.in.intn(len(m.loops))
		if to == l.id && m.in.chance(3, 4) {
			to = (to + 1) % len(m.loops)
		}
		m.call(l, m.loops[to])
	}
}

// call makes one call from l to to, with the oracle's checks in its
// function and its done function; each may make more calls.
func (m *callModel) call(l, to *Loop) {
	from := l.id
	mc := &modelCall{from: from, to: to.id, seq: m.next[from][to.id]}
	m.next[from][to.id]++
	m.calls = append(m.calls, mc)
	l.Call(to, func() {
		switch {
		case m.cur != mc.to:
			m.faultf("call %d from %d to %d ran on loop %d", mc.seq, from, mc.to, m.cur)
		case mc.ran > 0:
			m.faultf("call %d from %d to %d ran twice", mc.seq, from, mc.to)
		case mc.done > 0:
			m.faultf("call %d from %d to %d ran after its done function", mc.seq, from, mc.to)
		case from != mc.to && mc.seq <= m.lastRun[from][mc.to]-1:
			m.faultf("call %d from %d to %d ran after call %d: out of order", mc.seq, from, mc.to, m.lastRun[from][mc.to]-1)
		}
		mc.ran++
		m.lastRun[from][mc.to] = mc.seq + 1
		if m.in.chance(1, 8) {
			m.makeCalls(to, 1)
		}
	}, func(err error) {
		switch {
		case m.cur != from:
			m.faultf("the done function of call %d from %d to %d ran on loop %d", mc.seq, from, mc.to, m.cur)
		case mc.done > 0:
			m.faultf("the done function of call %d from %d to %d ran twice", mc.seq, from, mc.to)
		case err == nil && mc.ran != 1:
			m.faultf("call %d from %d to %d done with nil, its function ran %d times", mc.seq, from, mc.to, mc.ran)
		case err != nil && mc.ran != 0:
			m.faultf("call %d from %d to %d done with %v, but its function ran", mc.seq, from, mc.to, err)
		case err != nil && !errors.Is(err, ErrLoopStopped) && !errors.Is(err, ErrLoopBusy):
			m.faultf("call %d from %d to %d done with %v", mc.seq, from, mc.to, err)
		}
		last := m.lastDone
		switch {
		case errors.Is(err, ErrLoopBusy):
			last = m.lastBusy
			m.seen["refused"]++
		case err != nil:
			m.seen["stopped"]++
		}
		if from != mc.to && mc.seq <= last[from][mc.to]-1 {
			m.faultf("the done function of call %d from %d to %d ran after that of call %d: out of order",
				mc.seq, from, mc.to, last[from][mc.to]-1)
		}
		last[from][mc.to] = mc.seq + 1
		mc.done++
		mc.err = err
		if m.in.chance(1, 8) {
			m.makeCalls(l, 1)
		}
	})
}

// wakeOwed reports whether a ring that runs holds a failed MSG_RING to
// loop i, which its loop makes good when it reaps it.
func (m *callModel) wakeOwed(i int) bool {
	for _, r := range m.rings {
		if r.exited || r.closed {
			continue
		}
		for _, e := range r.cq {
			if uint8(e.UserData>>56) == kindMsgSent && e.Res < 0 && int(uint32(e.UserData)) == i {
				return true
			}
		}
	}
	return false
}

// hasWork reports whether something waits for l to run it: posted
// functions, or batches other loops pushed.
func hasWork(l *Loop) bool {
	l.postMu.Lock()
	n := len(l.posted)
	l.postMu.Unlock()
	if n > 0 {
		return true
	}
	for _, q := range l.calls.inbound {
		if q != nil && q.tail.Load() != q.head.Load() {
			return true
		}
	}
	return false
}

// check runs the oracle's checks between steps, while every loop waits.
func (m *callModel) check() {
	k := m.k
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, r := range m.rings {
		if r.exited {
			continue
		}
		l, d := m.loops[i], m.ds[i]
		if len(l.calls.held) > 0 {
			m.seen["held"]++
		}
		if slices.Contains(l.calls.gone, true) {
			m.seen["peer gone"]++
		}
		wake := r.hasWake() || m.wakeOwed(i)
		if d.waker.Pending() && !wake {
			m.faultf("loop %d: its wake-up flag is set and no wake-up is on its way: every later wake-up is lost", i)
		}
		if hasWork(l) && !wake {
			m.faultf("loop %d: posted functions or calls wait for it and no wake-up is on its way", i)
		}
		if len(l.calls.dirty) > 0 && len(r.cq) == 0 && r.timeout != 0 {
			m.faultf("loop %d waits with calls made and not sent", i)
		}
		if len(l.calls.held) > 0 && len(r.cq) == 0 && r.timeout < 0 {
			m.faultf("loop %d waits without a limit while calls wait for room in a full queue", i)
		}
		for j, p := range m.rings {
			c := &l.calls
			if p.exited && !c.gone[j] && (c.inFlight[j] > 0 || c.backlog[j].len() > 0) && !wake {
				m.faultf("loop %d has calls in flight to loop %d, which exited, and nothing wakes it to fail them", i, j)
			}
			if j == i {
				continue
			}
			n := 0
			for _, b := range c.backlog[j].bs[c.backlog[j].head:] {
				if !b.reply {
					n += len(b.calls)
				}
			}
			if n != c.heldCalls[j] || n > l.cfg.MaxHeldCalls {
				m.faultf("loop %d holds %d calls for loop %d (counted %d), the bound is %d", i, n, j, c.heldCalls[j], l.cfg.MaxHeldCalls)
			}
			if (c.backlog[j].len() > 0) != slices.Contains(c.held, m.loops[j]) && !c.gone[j] {
				m.faultf("loop %d: its backlog for loop %d holds %d batches, and its list of peers with a backlog is %v",
					i, j, c.backlog[j].len(), c.held)
			}
		}
	}
}

// settle lets the loops run until none has anything to do, or a bound.
func (m *callModel) settle() {
	began := m.k.now
	for range 20000 {
		ran := false
		for i, r := range m.rings {
			if r.runnable() && len(r.cq) > 0 {
				m.run(i)
				ran = true
			}
		}
		if ran {
			continue
		}
		// Timers (a full queue's retry): only while there is something
		// to retry, and for at most a minute of the loops' time.
		for i, r := range m.rings {
			l := m.loops[i]
			if r.runnable() && (len(l.calls.dirty) > 0 || len(l.calls.held) > 0 || m.stopped[i]) && m.k.now.Sub(began) < time.Minute {
				m.run(i)
				ran = true
			}
		}
		if !ran {
			return
		}
	}
	m.faultf("the loops did not settle")
}

// finalChecks: every call of a loop that runs has completed; once all
// have exited, no call is done twice or ran without its done function
// unless its caller exited first.
func (m *callModel) finalChecks(exited bool) {
	for _, mc := range m.calls {
		callerGone := m.rings[mc.from].exited
		if mc.done == 0 && !callerGone {
			m.faultf("call %d from %d to %d never completed (ran %d)", mc.seq, mc.from, mc.to, mc.ran)
		}
	}
	if exited && m.postsRun > m.posts {
		m.faultf("%d posted functions ran, %d were posted", m.postsRun, m.posts)
	}
}

// TestPushWakesOnlyAnOpenLoop: a push to a loop that has closed its door
// (it is exiting: its wake-up descriptor is closed, or about to be) but
// has not yet marked itself exited writes nothing to its eventfd. The
// push used to write it without the lock the door is closed under, into
// a descriptor that may by then be another's.
func TestPushWakesOnlyAnOpenLoop(t *testing.T) {
	k := newSimKernel()
	a, _, _ := k.newLoop(0, Config{}, nil)
	z, zr, zd := k.newLoop(1, Config{}, nil)
	zd.msgRing = false // woken through its eventfd
	rt := &Runtime{peers: []*Loop{a, z}, loops: []*Loop{a, z}, seed: maphash.MakeSeed()}
	for _, l := range rt.peers {
		l.rt = rt
		l.initCalls(2, batchQueueSize)
	}
	// z is on its way out: doors closed (posts, then the wake-up
	// descriptor's, as Loop.run closes them), descriptor closed; a has not
	// seen it exit yet.
	z.postMu.Lock()
	z.postClosed = true
	z.postMu.Unlock()
	z.wakeMu.Lock()
	z.wakeClosed = true
	z.wakeMu.Unlock()
	zr.wake.Close()
	a.Call(z, func() {}, func(error) {})
	a.flushCalls()
	if len(k.faults) > 0 {
		t.Fatal(strings.Join(k.faults, "; "))
	}
}
