package pool

import (
	"context"
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

	// locals is the registry of Locals by loop, copied on write under mu
	// so that Local finds an existing entry without a lock.
	locals atomic.Pointer[map[Loop]*Local[C]]

	mu      sync.Mutex
	closed  bool       // under mu
	retired Statistics // under mu: the counters of Locals whose loop stopped
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
	p.locals.Store(&map[Loop]*Local[C]{})
	return p, nil
}

// Config returns the pool's configuration with every default filled in
// ("never" as -1), except Clock, which stays nil unless New was given one:
// given to New again, it makes a pool that behaves the same.
func (p *Pool[C]) Config() Config { return p.cfg.config() }

// Local returns loop's own pool, creating it on first use: it then warms
// up to MinIdle, starts the maintenance timer and registers with
// loop.OnStop to close and leave the registry when the loop stops. It must
// be called on loop's thread. Looking up an existing Local takes no lock;
// callers on a hot path keep the result anyway (per connection, say).
func (p *Pool[C]) Local(loop Loop) *Local[C] {
	if l := (*p.locals.Load())[loop]; l != nil {
		return l
	}
	p.mu.Lock()
	old := *p.locals.Load()
	if l := old[loop]; l != nil {
		p.mu.Unlock()
		return l
	}
	l := newLocal(p, loop)
	l.closed = p.closed
	next := make(map[Loop]*Local[C], len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[loop] = l
	p.locals.Store(&next)
	p.mu.Unlock()

	loop.OnStop(l.stop)
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
	old := *p.locals.Load()
	next := make(map[Loop]*Local[C], len(old))
	for k, v := range old {
		if v != l {
			next[k] = v
		}
	}
	p.locals.Store(&next)
	p.retired = p.retired.Add(l.st)
	l.retired = true
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
	locals := *p.locals.Load()
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
	for loop, l := range *p.locals.Load() {
		_ = loop.Post(l.Clear)
	}
}

// State returns the sum of every loop's State. It posts to every loop and
// waits for the answers, so it must not be called on a loop thread of this
// pool (use Local.State there); ctx bounds the wait, and when it expires the
// sum of the loops that answered comes with an error.
func (p *Pool[C]) State(ctx context.Context) (State, error) {
	st, _, err := p.snapshot(ctx)
	return st, err
}

// Statistics returns the sum of every loop's Statistics, including those of
// loops that have stopped, so that no counter ever goes down. It waits for
// the loops like State.
func (p *Pool[C]) Statistics(ctx context.Context) (Statistics, error) {
	_, s, err := p.snapshot(ctx)
	return s, err
}

// snapshot asks every loop for its State and Statistics (a function posted
// to each, so that nothing on the hot path is shared) and sums the answers.
func (p *Pool[C]) snapshot(ctx context.Context) (State, Statistics, error) {
	type answer struct {
		l     *Local[C]
		state State
		stats Statistics
	}
	locals := *p.locals.Load()
	answers := make(chan answer, len(locals))
	asked := 0
	for loop, l := range locals {
		err := loop.Post(func() {
			if l.stopped {
				answers <- answer{}
				return
			}
			answers <- answer{l, l.State(), l.Statistics()}
		})
		if err == nil {
			asked++
		}
	}
	var got []answer
	var err error
wait:
	for range asked {
		select {
		case a := <-answers:
			got = append(got, a)
		case <-ctx.Done():
			err = fmt.Errorf("pool: statistics: %w", ctx.Err())
			break wait
		}
	}
	var st State
	p.mu.Lock()
	stats := p.retired
	for _, a := range got {
		// A loop that stopped after it answered is in retired already.
		if a.l != nil && !a.l.retired {
			st = st.Add(a.state)
			stats = stats.Add(a.stats)
		}
	}
	p.mu.Unlock()
	return st, stats, err
}
