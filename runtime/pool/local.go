package pool

import (
	"fmt"
	"time"
)

// Local is one loop's pool. Its methods must be called on that loop's
// thread; nothing in it is shared with other loops, and its counters are
// plain fields.
type Local[C any] struct {
	p     *Pool[C]
	m     Manager[C]
	cfg   *settings
	loop  Loop
	clock func() time.Time

	idle       []*entry[C] // ready to lend, the newest last
	open       int         // connections that exist: idle, lent out, validating
	connecting int         // connects in progress
	spare      int         // connects in progress that no get waits for
	gen        uint64      // bumped by Clear; older connections are not lent again

	active   requestList[C] // gets in progress, in arrival order
	waiters  waitQueue[C]   // gets waiting for a connection, in arrival order
	freeReqs []*request[C]
	seq      uint64

	cancelDeadline func() bool // the armed deadline timer, nil when none
	expireFn       func()
	cancelMaintain func() bool
	tickFn         func()

	serving bool // serveWaiters is running (callbacks may re-enter it)
	closed  bool // the pool is closed (or the loop stopped)
	stopped bool // the loop stopped; the Local has left the registry

	st  Statistics
	pub published // State and Statistics for Pool.Snapshot
}

func newLocal[C any](p *Pool[C], loop Loop) *Local[C] {
	l := &Local[C]{p: p, m: p.m, cfg: &p.cfg, loop: loop, clock: p.cfg.clock}
	if l.clock == nil {
		l.clock = time.Now
		if lc, ok := loop.(interface{ Now() time.Time }); ok {
			// The loop's clock, read once per turn: expiry and wait
			// times need no finer grain, and it costs nothing to read.
			l.clock = lc.Now
		}
	}
	l.expireFn = l.expire
	l.tickFn = l.tick
	return l
}

// Lease is one lend of a connection by a Local: Conn is the connection,
// and Put gives it back. It is a small value, copied freely; each lend is a
// new Lease, so one kept after its Put is stale: Put ignores it and Conn
// returns the zero C, also once the connection is lent to another get. A
// Lease belongs to its loop's thread. The zero Lease holds nothing.
type Lease[C any] struct {
	e    *entry[C]
	lend uint64 // e.lends when this lend began
}

// Conn returns the leased connection, or the zero C when ls is no longer
// lent out (it was put back) or is the zero Lease.
func (ls Lease[C]) Conn() C {
	if !ls.Lent() {
		var zero C
		return zero
	}
	return ls.e.conn
}

// Lent reports whether ls is lent out now: taken from a get and not yet
// put back.
func (ls Lease[C]) Lent() bool {
	return ls.e != nil && ls.e.state == leaseOut && ls.e.lends == ls.lend
}

// entry is a connection of a Local and its bookkeeping, one per
// connection for its whole life: each lend of it is a Lease that names its
// lend by number, so that a Lease from an earlier lend cannot return it.
type entry[C any] struct {
	conn      C
	local     *Local[C]
	created   time.Time
	idleSince time.Time
	gen       uint64
	lends     uint64 // lends so far; the current one's number while out
	state     leaseState

	req       *request[C] // the get waiting for this entry's validation
	inCall    bool        // Validate has not returned yet
	answered  bool        // Validate answered before it returned
	answer    error
	validated func(error) // l.onValidated, bound once
}

type leaseState uint8

const (
	leaseIdle leaseState = iota
	leaseOut
	leaseValidating
	leaseClosed
)

// request is a get in progress: waiting in the queue, waiting for a connect
// or waiting for a validation. Requests are recycled.
type request[C any] struct {
	done         func(Lease[C], error)
	start        time.Time
	deadline     time.Time
	seq          uint64
	state        requestState
	attempt      *attempt[C] // requestConnecting
	lease        *entry[C]   // requestValidating
	prev, next   *request[C] // in Local.active
	qprev, qnext *request[C] // in Local.waiters
}

type requestState uint8

const (
	requestNew requestState = iota
	requestWaiting
	requestConnecting
	requestValidating
)

// attempt is one Manager.Connect in progress.
type attempt[C any] struct {
	l    *Local[C]
	req  *request[C] // nil for a warm-up connect, or once its get gave up
	done bool
}

// Loop returns the loop that owns l.
func (l *Local[C]) Loop() Loop { return l.loop }

// Get lends a connection to done, which runs exactly once on the loop's
// thread: with a Lease to Put back later, or with a nil Lease and
// ErrClosed, ErrTimeout or the connect error. It may run before Get returns.
// With an idle connection at hand (and nothing to validate, or a Manager
// that validates at once), Get allocates nothing.
func (l *Local[C]) Get(done func(lease Lease[C], err error)) {
	if l.closed {
		l.st.GetsFailed++
		done(Lease[C]{}, ErrClosed)
		return
	}
	if l.waiters.len > 0 {
		// No barging: the connection that comes back next belongs to the
		// oldest waiter.
		r := l.newRequest(done)
		r.state = requestWaiting
		l.waiters.insert(r)
		return
	}
	l.acquire(nil, done)
}

// acquire serves a get from the idle list, else with a new connection, else
// by queueing it. r is the get's request when it has one (it is retrying
// after a failed validation); otherwise done is its callback and a request
// is made only if the get cannot be served at once.
func (l *Local[C]) acquire(r *request[C], done func(Lease[C], error)) {
	for !l.closed {
		ls := l.popIdle()
		if ls == nil {
			break
		}
		if !l.cfg.testOnCheckout {
			l.lend(r, done, ls)
			return
		}
		ls.state = leaseValidating
		ls.inCall, ls.answered = true, false
		l.m.Validate(l.loop, ls.conn, ls.validated)
		ls.inCall = false
		if !ls.answered {
			if r == nil {
				r = l.newRequest(done)
			}
			r.state = requestValidating
			r.lease = ls
			ls.req = r
			return
		}
		err := ls.answer
		ls.answer = nil
		if err == nil {
			l.lend(r, done, ls)
			return
		}
		l.closeLease(ls, causeInvalid)
	}
	if r == nil {
		r = l.newRequest(done)
	}
	if l.closed {
		l.fail(r, ErrClosed)
		return
	}
	if l.open+l.connecting < l.cfg.maxSize {
		l.connect(r)
		l.serveWaiters() // popIdle may have freed more than one slot
		return
	}
	r.state = requestWaiting
	l.waiters.insert(r)
}

// lend hands an idle connection to a get: to r if it has a request, else
// to done.
func (l *Local[C]) lend(r *request[C], done func(Lease[C], error), ls *entry[C]) {
	if r != nil {
		l.serve(r, ls, false)
		return
	}
	l.st.GetsDirect++
	done(ls.lendOut(), nil)
}

// serve completes request r with ls: a get that waited (for a new
// connection or a returned one), or one served by an idle connection after
// an asynchronous validation.
func (l *Local[C]) serve(r *request[C], ls *entry[C], waited bool) {
	if waited {
		l.st.GetsWaited++
		l.st.WaitTime += l.clock().Sub(r.start)
	} else {
		l.st.GetsDirect++
	}
	done := r.done
	l.active.remove(r)
	l.freeRequest(r)
	done(ls.lendOut(), nil)
}

// lendOut marks e lent out and returns the Lease of this lend.
func (e *entry[C]) lendOut() Lease[C] {
	e.state = leaseOut
	e.lends++
	return Lease[C]{e: e, lend: e.lends}
}

// fail completes request r with err.
func (l *Local[C]) fail(r *request[C], err error) {
	if err == ErrTimeout {
		l.st.GetsTimedOut++
	} else {
		l.st.GetsFailed++
	}
	done := r.done
	l.active.remove(r)
	l.freeRequest(r)
	done(Lease[C]{}, err)
}

// detach takes r out of whatever it waits for, so that it can be failed.
func (l *Local[C]) detach(r *request[C]) {
	switch r.state {
	case requestWaiting:
		l.waiters.remove(r)
	case requestConnecting:
		r.attempt.req = nil
		r.attempt = nil
		l.spare++
	case requestValidating:
		r.lease.req = nil
		r.lease = nil
	}
	r.state = requestNew
}

// popIdle returns the newest idle connection that is neither expired nor
// broken, closing those that are, or nil.
func (l *Local[C]) popIdle() *entry[C] {
	now := l.now()
	for n := len(l.idle); n > 0; n = len(l.idle) {
		ls := l.idle[n-1]
		l.idle[n-1] = nil
		l.idle = l.idle[:n-1]
		if c := l.expired(ls, now); c != causeNone {
			l.closeLease(ls, c)
			continue
		}
		if l.m.Broken(ls.conn) {
			l.closeLease(ls, causeBroken)
			continue
		}
		return ls
	}
	return nil
}

// expired says why an idle connection must not be lent, or causeNone.
func (l *Local[C]) expired(ls *entry[C], now time.Time) cause {
	switch {
	case ls.gen != l.gen:
		return causeCleared
	case l.cfg.maxLifetime > 0 && now.Sub(ls.created) >= l.cfg.maxLifetime:
		return causeMaxLifetime
	case l.cfg.idleTimeout > 0 && now.Sub(ls.idleSince) >= l.cfg.idleTimeout:
		return causeIdleTimeout
	}
	return causeNone
}

// Put gives a lent connection back. A broken, cleared or too old
// connection is closed, as is every connection after Close; otherwise it
// goes to the oldest waiting get, or back on the idle list. A Lease that is
// not lent out by l now is ignored: the zero Lease, one of another Local,
// and one already put back, also when its connection has been lent again
// since (that lend has a Lease of its own).
func (l *Local[C]) Put(lease Lease[C]) {
	if !lease.Lent() || lease.e.local != l {
		return
	}
	ls := lease.e
	now := l.now()
	switch {
	case l.stopped:
		// Counted closed when the loop stopped.
		ls.state = leaseClosed
		l.m.Close(ls.conn)
	case l.closed:
		l.closeLease(ls, causeOnClose)
	case l.m.Broken(ls.conn):
		l.closeLease(ls, causeBroken)
		l.serveWaiters()
	case ls.gen != l.gen:
		l.closeLease(ls, causeCleared)
		l.serveWaiters()
	case l.cfg.maxLifetime > 0 && now.Sub(ls.created) >= l.cfg.maxLifetime:
		l.closeLease(ls, causeMaxLifetime)
		l.serveWaiters()
	default:
		l.recycle(ls, now)
	}
}

// recycle hands a usable connection to the oldest waiter, or idles it. now
// is the time when the pool expires connections (zero otherwise).
func (l *Local[C]) recycle(ls *entry[C], now time.Time) {
	if r := l.waiters.popFront(); r != nil {
		l.serve(r, ls, true)
		return
	}
	ls.state = leaseIdle
	ls.idleSince = now
	l.idle = append(l.idle, ls)
}

// now returns the time when the pool expires connections, else zero.
func (l *Local[C]) now() time.Time {
	if l.cfg.expires {
		return l.clock()
	}
	return time.Time{}
}

// closeLease closes a connection and frees its slot (the caller serves the
// waiters if it should).
func (l *Local[C]) closeLease(ls *entry[C], c cause) {
	ls.state = leaseClosed
	l.open--
	l.st.count(c)
	conn := ls.conn
	var zero C
	ls.conn = zero
	l.m.Close(conn)
}

// onValidated is a lease's Validate callback.
func (ls *entry[C]) onValidated(err error) {
	if ls.state != leaseValidating {
		return // answered twice
	}
	if ls.inCall {
		ls.answered, ls.answer = true, err
		return
	}
	l := ls.local
	r := ls.req
	ls.req = nil
	if r != nil {
		r.lease = nil
	}
	switch {
	case l.stopped:
		ls.state = leaseClosed
		l.m.Close(ls.conn)
	case l.closed:
		l.closeLease(ls, causeOnClose)
	case err != nil || ls.gen != l.gen:
		c := causeInvalid
		if err == nil {
			c = causeCleared
		}
		l.closeLease(ls, c)
		if r != nil {
			r.state = requestNew
			l.acquire(r, nil)
		} else {
			l.serveWaiters()
		}
	case r != nil:
		l.serve(r, ls, false)
	default:
		// Its get gave up while it was validated.
		l.recycle(ls, l.now())
	}
}

// connect starts a connect for r (nil: a warm-up connect).
func (l *Local[C]) connect(r *request[C]) {
	a := &attempt[C]{l: l, req: r}
	if r != nil {
		r.state = requestConnecting
		r.attempt = a
	} else {
		l.spare++
	}
	l.connecting++
	l.m.Connect(l.loop, a.connected)
}

// connected is an attempt's Connect callback.
func (a *attempt[C]) connected(c C, err error) {
	l := a.l
	if a.done {
		// The Manager answered twice; do not leak the connection.
		if err == nil {
			l.m.Close(c)
		}
		return
	}
	a.done = true
	if l.stopped {
		if err == nil {
			l.m.Close(c)
		}
		return
	}
	r := a.req
	a.req = nil
	if r != nil {
		r.attempt = nil
		r.state = requestNew
	} else {
		l.spare--
	}
	l.connecting--
	if err != nil {
		l.st.ConnectErrors++
		l.serveWaiters()
		if r != nil {
			l.fail(r, fmt.Errorf("pool: connect: %w", err))
		}
		return
	}
	l.st.Created++
	l.open++
	now := l.now()
	ls := &entry[C]{conn: c, local: l, gen: l.gen, created: now}
	ls.validated = ls.onValidated
	switch {
	case l.closed:
		l.closeLease(ls, causeOnClose)
	case r != nil:
		l.serve(r, ls, true)
	default:
		l.recycle(ls, now)
	}
}

// serveWaiters starts connects for the oldest waiters while there are free
// slots.
func (l *Local[C]) serveWaiters() {
	if l.serving {
		return // the running loop below sees the freed slot
	}
	l.serving = true
	for !l.closed && l.waiters.len > 0 && l.open+l.connecting < l.cfg.maxSize {
		l.connect(l.waiters.popFront())
	}
	l.serving = false
}
