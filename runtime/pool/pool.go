package pool

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Loop is the event loop a Local belongs to: what the pool needs from it.
// *percore.Loop implements it. Implementations must be comparable (a
// pointer), since a Pool keys its Locals by loop.
type Loop interface {
	// Schedule runs f on the loop's thread once d has passed and returns
	// a function that cancels it. It is called on the loop's thread.
	Schedule(d time.Duration, f func()) (cancel func() bool)
	// Post queues f to run on the loop's thread. It is safe for
	// concurrent use and fails once the loop has stopped.
	Post(f func()) error
	// OnStop registers f to run on the loop's thread when the loop stops.
	// It is called on the loop's thread.
	OnStop(f func())
	// OnPublish registers f to run on the loop's thread whenever the
	// loop publishes its own counters: between callbacks (at the end of
	// each turn, say) and once more after it stops. A Local publishes
	// its State and Statistics from it, for Pool.Snapshot. It is called
	// on the loop's thread.
	OnPublish(f func())
}

// Manager opens, checks and closes a pool's connections. Its methods are
// called on the thread of the loop they are given (or, for Broken and Close,
// the loop that owns the connection), and must not block: Connect and
// Validate answer through done, at once or later, exactly once.
type Manager[C any] interface {
	// Connect opens a connection from loop and calls done with it, or
	// with the error that prevented it.
	Connect(loop Loop, done func(c C, err error))
	// Validate checks that an idle connection still works before it is
	// lent (when test on checkout is on) and calls done with nil or with
	// the reason it does not.
	Validate(loop Loop, c C, done func(err error))
	// Broken reports whether c must not be lent again: it is closed, or
	// its protocol is out of step. It is asked on return and on checkout.
	Broken(c C) bool
	// Close closes c. The pool never uses c again.
	Close(c C)
}

var (
	// ErrClosed is the error of gets on a closed pool. It wraps
	// net.ErrClosed.
	ErrClosed = fmt.Errorf("pool: %w", net.ErrClosed)
	// ErrTimeout is the error of a get that did not get a connection
	// within the connection timeout. It wraps os.ErrDeadlineExceeded.
	ErrTimeout = fmt.Errorf("pool: connection timeout: %w", os.ErrDeadlineExceeded)
)

// Pool is the blueprint of a per-loop connection pool: a Manager and the
// settings every loop's Local uses. It holds no connections. Its methods are
// safe for concurrent use, except Local (see there).
type Pool[C any] struct {
	m   Manager[C]
	cfg settings

	// reg is the registry of Locals, copied on write under mu, so that
	// Local finds an existing entry and Snapshot reads every loop's
	// numbers without a lock.
	reg atomic.Pointer[registry[C]]

	mu     sync.Mutex
	closed bool // under mu
}

// registry is the Locals by loop, and the final Statistics of the Locals
// whose loop stopped: one value, replaced whole, so that a reader sees a
// Local either in locals or in retired, never in both or neither.
type registry[C any] struct {
	locals  map[Loop]*Local[C]
	retired Statistics
}

// New returns a pool of connections made by m. An invalid configuration
// (a negative size or timeout) or a nil manager is an error.
func New[C any](m Manager[C], cfg Config) (*Pool[C], error) {
	if m == nil {
		return nil, errors.New("pool: nil manager")
	}
	s, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	p := &Pool[C]{m: m, cfg: s}
	p.reg.Store(&registry[C]{locals: map[Loop]*Local[C]{}})
	return p, nil
}

// Config returns the pool's configuration with every default filled in
// ("never" as -1), except Clock, which stays nil unless New was given one:
// given to New again, it makes a pool that behaves the same.
func (p *Pool[C]) Config() Config { return p.cfg.config() }

// Local returns loop's own pool, creating it on first use: it then warms
// up to MinIdle, starts the maintenance timer, registers with
// loop.OnPublish to publish its numbers, and with loop.OnStop to close and
// leave the registry when the loop stops. It must be called on loop's
// thread. Looking up an existing Local takes no lock; callers on a hot path
// keep the result anyway (per connection, say).
func (p *Pool[C]) Local(loop Loop) *Local[C] {
	if l := p.reg.Load().locals[loop]; l != nil {
		return l
	}
	p.mu.Lock()
	old := p.reg.Load()
	if l := old.locals[loop]; l != nil {
		p.mu.Unlock()
		return l
	}
	l := newLocal(p, loop)
	l.closed = p.closed
	l.publish() // Loops 1 from the start, before a reader can find it
	next := &registry[C]{locals: make(map[Loop]*Local[C], len(old.locals)+1), retired: old.retired}
	for k, v := range old.locals {
		next.locals[k] = v
	}
	next.locals[loop] = l
	p.reg.Store(next)
	p.mu.Unlock()

	loop.OnStop(l.stop)
	loop.OnPublish(l.publish)
	if !l.closed {
		l.startMaintenance()
		l.Warm()
	}
	return l
}

// retire removes l from the registry and keeps its final counters, so that
// the process-wide Statistics never go down when a loop stops.
func (p *Pool[C]) retire(l *Local[C]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.reg.Load()
	next := &registry[C]{locals: make(map[Loop]*Local[C], len(old.locals)), retired: old.retired.Add(l.st)}
	for k, v := range old.locals {
		if v != l {
			next.locals[k] = v
		}
	}
	p.reg.Store(next)
}

// Close closes the pool on every loop: each loop, promptly (the close is
// posted to it), fails its queued gets with ErrClosed and closes its idle
// connections; from then on gets fail with ErrClosed, returned connections
// are closed and Warm and Maintain do nothing. Gets that a loop serves
// before it runs the posted close (within its current turn) still succeed.
// Close does not wait for the loops and may be called from any goroutine,
// loop threads included. It returns the loops it could not reach (a loop
// whose queue of posted functions is full: its Local then stays open
// until it stops), joined, or nil; a loop that has stopped has closed its
// Local already and is no error. A second Close returns nil.
func (p *Pool[C]) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	locals := p.reg.Load().locals
	p.mu.Unlock()
	var errs []error
	for loop, l := range locals {
		if err := loop.Post(l.close); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("pool: close: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Clear posts Local.Clear to every loop: idle connections are closed at
// once and the others when they come back (after a failover, say). It does
// not wait and may be called from any goroutine.
func (p *Pool[C]) Clear() {
	for loop, l := range p.reg.Load().locals {
		_ = loop.Post(l.Clear)
	}
}

// Snapshot returns the sum of every loop's State and Statistics as each
// loop published them at the end of its last turn, with the Statistics of
// the loops that have stopped (so that no counter ever goes down). It reads
// what the loops published (a few atomic loads per loop) and never waits
// for them; it is safe for concurrent use, on a loop's thread too. Each
// loop's numbers are of one moment between its callbacks, so the
// conservation law holds in every snapshot: s.Created == s.Closed() +
// st.Connections. A loop that is busy in a callback shows the numbers of
// its last turn until the callback returns.
func (p *Pool[C]) Snapshot() (State, Statistics) {
	reg := p.reg.Load()
	st, s := State{}, reg.retired
	for _, l := range reg.locals {
		lst, ls := l.snapshot()
		st, s = st.Add(lst), s.Add(ls)
	}
	return st, s
}
