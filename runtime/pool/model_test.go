package pool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// The randomized model test and the fuzz target drive a Local on a fake loop
// with a fake clock and a fake manager through sequences of operations
// decoded from bytes, and check the pool's invariants after every step.

// modelTimeout is the connection timeout of the model's pools.
const modelTimeout = 500 * time.Millisecond

// Operations, one byte each, followed by one argument byte.
const (
	opGet = iota
	opGet2
	opGet3
	opPut
	opPutBroken
	opAdvance
	opMaintain
	opClear
	opCloseOrReap
	opConnectOK
	opConnectFail
	opValidateOK
	opValidateFail
	opModes
	opBreakIdle
	opWarm
	opDrain
	opPutStale
	opPublish
	numOps
)

var opNames = [numOps]string{"get", "get", "get", "put", "put broken", "advance", "maintain",
	"clear", "close or reap", "connect ok", "connect fail", "validate ok", "validate fail",
	"modes", "break idle", "warm", "drain", "put stale", "publish"}

// get is one Get the model issued.
type get struct {
	id    int
	start time.Time
	ended bool
}

// model runs one operation sequence.
type model struct {
	step   int
	fatal  func(step int, msg string)
	clock  *fakeClock
	loop   *fakeLoop
	m      *fakeManager
	p      *Pool[*fakeConn]
	l      *Local[*fakeConn]
	cfg    settings
	issued int
	ended  int
	held   []Lease[*fakeConn]
	stale  []Lease[*fakeConn] // leases already put back (the last few)
	isHeld map[*fakeConn]bool
	gets   map[*request[*fakeConn]]*get // the request of each get that waits
	prev   Statistics
	closed bool // Pool.Close was called

	// The oracle of Pool.Snapshot: what the Local was when its loop last
	// published (ended a turn), and the last snapshot read.
	pubState State
	pubStats Statistics
	prevSnap Statistics
}

// newModel decodes a configuration from the first bytes of data.
func newModel(data []byte, fatal func(step int, msg string)) (*model, []byte) {
	b := func(i int) byte {
		if i < len(data) {
			return data[i]
		}
		return 0
	}
	cfg := Config{
		MaxSize:            1 + int(b(0)%4),
		MinIdle:            int(b(1) % 3),
		ConnectionTimeout:  modelTimeout,
		IdleTimeout:        []time.Duration{time.Second, -1}[b(2)&1],
		MaxLifetime:        []time.Duration{3 * time.Second, -1}[(b(2)>>1)&1],
		SkipTestOnCheckout: b(2)&4 != 0,
		ReapInterval:       []time.Duration{700 * time.Millisecond, -1}[(b(2)>>3)&1],
	}
	md := &model{fatal: fatal, clock: newFakeClock(), m: newFakeManager(),
		isHeld: map[*fakeConn]bool{}, gets: map[*request[*fakeConn]]*get{}}
	cfg.Clock = md.clock.Now
	md.loop = newFakeLoop(md.clock)
	md.m.connectMode = fakeMode(b(3) % 3)
	md.m.validateMode = fakeMode((b(3) / 3) % 3)
	p, err := New[*fakeConn](md.m, cfg)
	if err != nil {
		fatal(0, err.Error())
		return nil, nil
	}
	md.p, md.cfg = p, p.cfg
	md.pubState = State{Loops: 1} // published as it was made, before it warmed
	md.l = p.Local(md.loop)
	md.check()
	if len(data) < 4 {
		return md, nil
	}
	return md, data[4:]
}

func (md *model) failf(format string, args ...any) {
	md.fatal(md.step, fmt.Sprintf(format, args...))
}

func (md *model) apply(op, arg byte) {
	l, m := md.l, md.m
	switch op {
	case opGet, opGet2, opGet3:
		md.get()
	case opPut, opPutBroken:
		if len(md.held) == 0 {
			return
		}
		i := int(arg) % len(md.held)
		ls := md.held[i]
		md.held = append(md.held[:i], md.held[i+1:]...)
		delete(md.isHeld, ls.Conn())
		if op == opPutBroken {
			ls.Conn().broken = true
		}
		md.put(ls)
	case opAdvance:
		md.loop.advance(time.Duration(arg) * 10 * time.Millisecond)
	case opMaintain:
		l.Maintain()
	case opClear:
		l.Clear()
	case opCloseOrReap:
		if arg < 8 {
			md.closed = true
			md.p.Close()
		} else {
			l.Reap()
		}
	case opConnectOK, opConnectFail:
		if n := len(m.connects); n > 0 {
			m.releaseConnect(int(arg)%n, op == opConnectOK)
		}
	case opValidateOK, opValidateFail:
		if n := len(m.validations); n > 0 {
			m.releaseValidation(int(arg)%n, op == opValidateOK)
		}
	case opModes:
		m.connectMode = fakeMode(arg % 3)
		m.validateMode = fakeMode((arg / 3) % 3)
		m.failConnects = arg&0x10 != 0
		m.failValidations = arg&0x20 != 0
	case opBreakIdle:
		if n := len(l.idle); n > 0 {
			l.idle[int(arg)%n].conn.broken = true
		}
	case opWarm:
		l.Warm()
	case opDrain:
		md.loop.drain()
	case opPutStale:
		if len(md.stale) == 0 {
			return
		}
		md.putStale(md.stale[int(arg)%len(md.stale)])
	case opPublish:
		md.publish()
	}
}

// publish ends the loop's turn: the Local publishes what it holds now.
func (md *model) publish() {
	md.loop.publish()
	md.pubState, md.pubStats = md.l.State(), md.l.Statistics()
}

// checkSnapshot checks what Pool.Snapshot returns: what the Local was at
// its last publication, whatever happened since, so that the conservation
// law holds in it even while the Local is between two of its own counts.
func (md *model) checkSnapshot() {
	st, s := md.p.Snapshot()
	if st != md.pubState || s != md.pubStats {
		md.failf("snapshot %v; %+v\nwant the last publication %v; %+v", st, s, md.pubState, md.pubStats)
	}
	if s.Created != s.Closed()+uint64(st.Connections) {
		md.failf("conservation in the snapshot: created %d != closed %d + live %d", s.Created, s.Closed(), st.Connections)
	}
	if st.Loops != 1 || st.Connections+st.Connecting > md.cfg.maxSize || s.Gets() > uint64(md.ended) {
		md.failf("snapshot %v; %+v: %d loops, over max size %d, or more gets than the %d that ended", st, s, st.Loops, md.cfg.maxSize, md.ended)
	}
	if f := wentDown(md.prevSnap, s); f != "" {
		md.failf("%s went down in the snapshot: was %+v\n now %+v", f, md.prevSnap, s)
	}
	md.prevSnap = s
}

// wentDown names a counter of now that is below its value in was, or "".
func wentDown(was, now Statistics) string {
	w, n := reflect.ValueOf(was), reflect.ValueOf(now)
	for i := range w.NumField() {
		if n.Field(i).Convert(reflect.TypeFor[uint64]()).Uint() < w.Field(i).Convert(reflect.TypeFor[uint64]()).Uint() {
			return w.Type().Field(i).Name
		}
	}
	return ""
}

// putStale puts back a lease that was put back already: Put must ignore
// it, whatever its connection does now (idle, lent again, closed).
func (md *model) putStale(ls Lease[*fakeConn]) {
	l := md.l
	st, s, idle := l.State(), l.Statistics(), append([]*fakeConn(nil), md.idleConns()...)
	l.Put(ls)
	st2, s2 := l.State(), l.Statistics()
	if st2 != st || s2 != s || !equalConns(md.idleConns(), idle) {
		md.failf("a stale Put changed the pool: state %+v -> %+v, statistics %+v -> %+v", st, st2, s, s2)
	}
}

func (md *model) idleConns() []*fakeConn {
	var cs []*fakeConn
	for _, e := range md.l.idle {
		cs = append(cs, e.conn)
	}
	return cs
}

func equalConns(a, b []*fakeConn) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// get issues a Get and checks what it may do at once.
func (md *model) get() {
	l := md.l
	md.issued++
	g := &get{id: md.issued, start: md.clock.Now()}
	queued := l.waiters.len > 0
	closed := l.closed
	l.Get(func(ls Lease[*fakeConn], err error) { md.ended++; md.done(g, ls, err) })
	if closed && !g.ended {
		md.failf("get %d on a closed pool did not fail at once", g.id)
	}
	if queued && g.ended && !closed {
		md.failf("get %d arrived behind %d waiters but was served at once (barging)", g.id, l.waiters.len)
	}
	if !g.ended {
		md.gets[l.active.tail] = g
	}
}

// done is every get's callback.
func (md *model) done(g *get, ls Lease[*fakeConn], err error) {
	if g.ended {
		md.failf("get %d ended twice", g.id)
	}
	g.ended = true
	for r, x := range md.gets {
		if x == g {
			delete(md.gets, r)
		}
	}
	if err != nil {
		if ls != (Lease[*fakeConn]{}) {
			md.failf("get %d: a lease with error %v", g.id, err)
		}
		switch {
		case errors.Is(err, ErrTimeout):
			if waited := md.clock.Now().Sub(g.start); waited < md.cfg.timeout {
				md.failf("get %d timed out after %v, before the connection timeout", g.id, waited)
			}
		case errors.Is(err, ErrClosed), errors.Is(err, errRefused):
		default:
			md.failf("get %d: unexpected error %v", g.id, err)
		}
		return
	}
	c := ls.Conn()
	switch {
	case md.isHeld[c]:
		md.failf("get %d: connection %d handed out twice", g.id, c.id)
	case c.closed:
		md.failf("get %d: closed connection %d lent", g.id, c.id)
	case ls.e.state != leaseOut:
		md.failf("get %d: lease of connection %d in state %d", g.id, c.id, ls.e.state)
	}
	md.isHeld[c] = true
	md.held = append(md.held, ls)
}

// put returns a lease, checking that a waiter, if any, gets it first.
func (md *model) put(ls Lease[*fakeConn]) {
	l := md.l
	var oldest *get
	if l.waiters.len > 0 {
		oldest = md.gets[l.waiters.head]
	}
	healthy := !ls.Conn().broken && ls.e.gen == l.gen && !l.closed &&
		(md.cfg.maxLifetime == 0 || md.clock.Now().Sub(ls.e.created) < md.cfg.maxLifetime)
	l.Put(ls)
	if md.stale = append(md.stale, ls); len(md.stale) > 8 {
		md.stale = md.stale[1:]
	}
	if healthy && oldest != nil && !oldest.ended {
		md.failf("a healthy connection came back but the oldest waiter (get %d) was not served", oldest.id)
	}
}

// check verifies the invariants.
func (md *model) check() {
	l, m := md.l, md.m
	st, s := l.State(), l.Statistics()
	if st.Connections+st.Connecting > md.cfg.maxSize {
		md.failf("%d connections and %d connecting exceed max size %d", st.Connections, st.Connecting, md.cfg.maxSize)
	}
	if s.Created != s.Closed()+uint64(st.Connections) {
		md.failf("conservation: created %d != closed %d + live %d", s.Created, s.Closed(), st.Connections)
	}
	if int(s.Created) != m.created || int(s.Closed()) != m.closed || len(m.open) != st.Connections {
		md.failf("pool counts created %d closed %d live %d; manager %d, %d, %d",
			s.Created, s.Closed(), st.Connections, m.created, m.closed, len(m.open))
	}
	if m.closedTwice != 0 {
		md.failf("%d connections closed twice", m.closedTwice)
	}
	if st.Connecting != len(m.connects) && len(md.loop.posted) == 0 {
		md.failf("%d connecting, manager holds %d connects", st.Connecting, len(m.connects))
	}
	if want := st.Idle + len(md.held) + len(m.validations); st.Connections != want && len(md.loop.posted) == 0 {
		md.failf("%d connections, but %d idle + %d held + %d validating", st.Connections, st.Idle, len(md.held), len(m.validations))
	}
	if got := s.Gets(); got != uint64(md.ended) {
		md.failf("statistics count %d ended gets, callbacks ran %d", got, md.ended)
	}
	if pending := md.issued - md.ended; pending != l.active.len || len(md.gets) != pending {
		md.failf("%d gets pending, %d requests active, %d tracked", pending, l.active.len, len(md.gets))
	}
	if f := wentDown(md.prev, s); f != "" {
		md.failf("%s went down:\n was %+v\n now %+v", f, md.prev, s)
	}
	md.prev = s
	md.checkSnapshot()
	// The wait ends at the connection timeout.
	now := md.clock.Now()
	for r, g := range md.gets {
		if !now.Before(g.start.Add(md.cfg.timeout)) {
			md.failf("get %d still pending %v after it started (request state %d)", g.id, now.Sub(g.start), r.state)
		}
	}
	// Gets in arrival order; waiters only when no slot is free and
	// nothing is idle (so a new get cannot barge).
	for r := l.active.head; r != nil && r.next != nil; r = r.next {
		if r.seq >= r.next.seq {
			md.failf("gets out of arrival order")
		}
	}
	n := 0
	for r := l.waiters.head; r != nil; r = r.qnext {
		n++
		if r.state != requestWaiting || (r.qnext != nil && r.seq >= r.qnext.seq) {
			md.failf("waiter queue out of order or holds a request in state %d", r.state)
		}
	}
	if n != l.waiters.len {
		md.failf("waiter queue holds %d, len says %d", n, l.waiters.len)
	}
	if l.waiters.len > 0 && !l.closed && (len(l.idle) > 0 || l.open+l.connecting < md.cfg.maxSize) {
		md.failf("%d waiters while %d idle and %d of %d slots taken", l.waiters.len, len(l.idle), l.open+l.connecting, md.cfg.maxSize)
	}
	for _, ls := range l.idle {
		if ls.state != leaseIdle || ls.conn.closed || md.isHeld[ls.conn] {
			md.failf("idle connection %d in state %d (closed %v, held %v)", ls.conn.id, ls.state, ls.conn.closed, md.isHeld[ls.conn])
		}
	}
	if l.closed {
		if st.Idle != 0 || st.Waiters != 0 || l.active.len != 0 {
			md.failf("closed, yet %d idle, %d waiters, %d gets pending", st.Idle, st.Waiters, l.active.len)
		}
	}
}

// settle answers everything outstanding, returns every lease, then stops
// the loop, and checks that nothing is left behind.
func (md *model) settle() {
	md.step++
	m := md.m
	m.connectMode, m.validateMode = answerAtOnce, answerAtOnce
	for len(m.connects) > 0 || len(m.validations) > 0 || len(md.loop.posted) > 0 {
		if len(m.connects) > 0 {
			m.releaseConnect(0, true)
		}
		if len(m.validations) > 0 {
			m.releaseValidation(0, true)
		}
		md.loop.drain()
		md.check()
	}
	md.loop.advance(md.cfg.timeout)
	md.check()
	for len(md.held) > 0 {
		ls := md.held[0]
		md.held = md.held[1:]
		delete(md.isHeld, ls.Conn())
		md.l.Put(ls)
		md.loop.drain()
		md.check()
	}
	if md.l.active.len != 0 {
		md.failf("%d gets still pending after settling", md.l.active.len)
	}
	st := md.l.State()
	if st.Connections != st.Idle {
		md.failf("settled, yet %d connections and %d idle", st.Connections, st.Idle)
	}
	md.loop.stop()
	md.step++
	s := md.l.Statistics()
	if s.Created != s.Closed() || len(m.open) != 0 {
		md.failf("after stop: created %d, closed %d, %d still open", s.Created, s.Closed(), len(m.open))
	}
	if n := len(md.p.reg.Load().locals); n != 0 {
		md.failf("after stop the registry holds %d locals", n)
	}
	if r := md.p.reg.Load().retired; r != s {
		md.failf("retired statistics %+v, want %+v", r, s)
	}
	if st, ps := md.p.Snapshot(); st != (State{}) || ps != s {
		md.failf("after stop the snapshot is %v; %+v, want no state and %+v", st, ps, s)
	}
	if n := md.loop.liveTimers(); n != 0 {
		md.failf("%d timers still armed after stop", n)
	}
}

// runModel runs the operation sequence data, reporting failures through t
// with label (the seed) and the step.
func runModel(t *testing.T, label string, data []byte) {
	t.Helper()
	failed := false
	fatal := func(step int, msg string) {
		if !failed {
			failed = true
			t.Errorf("%s step %d: %s", label, step, msg)
		}
	}
	md, ops := newModel(data, fatal)
	if md == nil {
		return
	}
	for i := 0; i+1 < len(ops) && !failed; i += 2 {
		md.step++
		md.apply(ops[i]%numOps, ops[i+1])
		md.check()
		if failed {
			t.Logf("%s: the failing operation was %q with argument %d", label, opNames[ops[i]%numOps], ops[i+1])
		}
	}
	if !failed {
		md.settle()
	}
	if failed {
		t.FailNow()
	}
}

// TestRandomizedOperations runs hundreds of seeded random sequences. A
// failure names the seed and step; rerun one with -run and -seed.
func TestRandomizedOperations(t *testing.T) {
	const sequences, steps = 600, 300
	for seed := uint64(1); seed <= sequences; seed++ {
		runModel(t, fmt.Sprintf("seed %d", seed), randomOps(seed, steps))
		if t.Failed() {
			return
		}
	}
}

// randomOps returns the bytes of a random sequence of n operations.
func randomOps(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	data := make([]byte, 4+2*n)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	// Fewer closes: a close ends the interesting part of a sequence.
	for i := 4; i+1 < len(data); i += 2 {
		if data[i]%numOps == opCloseOrReap && rng.IntN(8) != 0 {
			data[i+1] |= 8
		}
	}
	return data
}

// FuzzPoolOps runs the model over fuzzed operation sequences. Plain go test
// runs the seed corpus only.
func FuzzPoolOps(f *testing.F) {
	for seed := uint64(1); seed <= 16; seed++ {
		f.Add(randomOps(seed, 64))
	}
	f.Add([]byte{3, 0, 0, 0, opGet, 0, opGet, 0, opGet, 0, opGet, 0, opPut, 0, opAdvance, 255})
	f.Add([]byte{0, 1, 8, 2, opModes, 0x12, opGet, 0, opGet, 0, opAdvance, 60, opCloseOrReap, 0, opDrain, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		runModel(t, "fuzz", data)
	})
}
