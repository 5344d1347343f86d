package tlsconn

import (
	"os"
	goruntime "runtime"
	"slices"
	"sync"
	"time"
)

// PoolConfig bounds a Pool. Its zero value works; zero means the default
// for every field, and negative means none where the field says so
// (MaxQueued, Timeout).
type PoolConfig struct {
	// MaxHandshakes is how many handshakes run at once, each on a
	// goroutine of its own (a handshake waits for the peer between its
	// flights, so this bounds memory more than CPU: the Go scheduler
	// shares GOMAXPROCS between the running ones). Zero means
	// DefaultMaxHandshakes.
	MaxHandshakes int

	// MaxCPU is how many of the running handshakes may compute at once:
	// a handshake holds one of these places while crypto/tls works and
	// gives it back while it waits for the peer. Each computing one holds
	// a P of the Go scheduler, which the loops also need (a loop woken by
	// the kernel waits for a P when goroutines hold them all, up to the
	// scheduler's 10 ms preemption), so this keeps handshakes from taking
	// every P: with GOMAXPROCS above the number of loops by MaxCPU, no loop
	// waits for one (the runtime raises GOMAXPROCS so, up to a CPU quota's
	// Ps). A tls.Config callback that blocks (a GetCertificate that
	// fetches) holds its place while it blocks. Above MaxHandshakes it is
	// MaxHandshakes in effect. Zero or negative means GOMAXPROCS/2 when
	// NewPool runs, at least 1 (the runtime gives GOMAXPROCS/2 as it was
	// before its raise: runtime.Config.TLSPool).
	MaxCPU int

	// Sched is how the kernel schedules a handshake's thread while it
	// computes (see Sched): zero means SchedNice (nice 19), so that a
	// loop sharing a CPU with a handshake gets the CPU as soon as the
	// kernel wakes the loop. Where the process cannot put a lowered
	// thread back (EffectiveSched), the pool uses SchedNormal, with CPUs
	// still applied; Stats says which is in effect.
	Sched Sched

	// CPUs are the CPUs a handshake's thread computes on (its affinity
	// while it computes, put back after); nil or empty means wherever the
	// thread may run. Negative entries are ignored, and a set the kernel
	// refuses (none of them in the process's cpuset) leaves the thread's
	// CPUs as they are. The runtime replaces nil with the CPUs that no
	// loop uses, when there are any; an empty, non-nil slice keeps the
	// threads wherever they may run (runtime.Config.TLSPool).
	CPUs []int

	// MaxQueued is how many more handshakes wait for a place, first come
	// first served; a session past it fails with ErrPoolFull. Zero means
	// DefaultMaxQueued; negative means no queue.
	MaxQueued int

	// Timeout is how long a handshake may take from the session's
	// creation (queueing included); past it the session fails with
	// os.ErrDeadlineExceeded. Zero means DefaultTimeout; negative means
	// none.
	Timeout time.Duration
}

// The defaults of PoolConfig.
const (
	DefaultMaxHandshakes = 256
	DefaultMaxQueued     = 4096
	DefaultTimeout       = 10 * time.Second
)

// PoolStats counts a pool's handshakes, and says how their threads are
// scheduled. A handshake that ended is counted before the session's
// Notify tells the loop so.
type PoolStats struct {
	// Sched is how a computing handshake's thread is scheduled:
	// PoolConfig.Sched (SchedDefault read as SchedNice), or SchedNormal
	// where the process cannot put a lowered thread back (EffectiveSched:
	// an unprivileged process whose RLIMIT_NICE does not allow it).
	Sched Sched

	Running   int    // handshakes on a goroutine now
	Queued    int    // waiting for a place now
	Started   uint64 // handed to a goroutine
	Succeeded uint64
	Failed    uint64 // ended with an error other than a timeout
	TimedOut  uint64 // reached Timeout (running, queued or not yet begun)
	Rejected  uint64 // refused: the pool was full or closed
}

// Pool runs handshakes off the loops, on at most MaxHandshakes goroutines
// at once, so that a handshake's CPU (about a millisecond for a full one)
// never runs on a loop. The goroutines exist only while there is work: one
// that finishes takes the next queued session, or exits. One pool may serve
// every loop of a process.
//
// A Pool is safe for concurrent use.
type Pool struct {
	cfg PoolConfig

	cpu    chan struct{} // a token per computing handshake (MaxCPU)
	thread threadPlan    // what a computing handshake's thread gets (Sched, CPUs)

	mu      sync.Mutex
	queue   list // queued sessions, oldest first
	running list
	stats   PoolStats
	closed  bool
	wg      sync.WaitGroup
}

type poolState uint8

const (
	psIdle poolState = iota
	psQueued
	psRunning
	psDone
)

// NewPool returns a pool with cfg's bounds.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = DefaultMaxHandshakes
	}
	switch {
	case cfg.MaxQueued == 0:
		cfg.MaxQueued = DefaultMaxQueued
	case cfg.MaxQueued < 0:
		cfg.MaxQueued = 0
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxCPU <= 0 {
		cfg.MaxCPU = max(1, goruntime.GOMAXPROCS(0)/2)
	}
	cfg.CPUs = slices.Clone(cfg.CPUs)
	return &Pool{cfg: cfg, cpu: make(chan struct{}, cfg.MaxCPU), thread: newThreadPlan(cfg)}
}

// acquire takes a CPU place for a handshake about to compute on w's
// goroutine, and applies the thread plan.
func (p *Pool) acquire(w *worker) {
	p.cpu <- struct{}{}
	w.enter(&p.thread)
}

// release gives the place back and the thread as it was, and then calls
// s's Notify if the stretch of work that ends asked for it.
func (p *Pool) release(s *Session, w *worker) {
	p.leave(w)
	notifyDue(s, w)
}

// leave gives the thread back as it was and the CPU place.
func (p *Pool) leave(w *worker) {
	w.leave()
	<-p.cpu
}

// notifyDue calls s's Notify if the stretch of work that ended on w asked
// for it. It runs after w.leave, on a thread back at its own scheduling:
// Notify wakes the loop, which preempts a lowered thread at once, and one
// preempted inside the loop's post would hold the lock the loop takes
// next (docs/decisions/0064-tls-storm-scheduling.md). Where the kernel did
// not let the thread back (the goroutine keeps it, locked), Notify runs on
// a goroutine of its own, which Go never runs on that locked thread.
func notifyDue(s *Session, w *worker) {
	if !w.notify {
		return
	}
	w.notify = false
	if w.onOwnThread() {
		go s.notify()
		return
	}
	s.notify()
}

// Config returns the pool's bounds, defaults filled in.
func (p *Pool) Config() PoolConfig { return p.cfg }

// Stats returns the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Running, st.Queued = p.running.n, p.queue.n
	st.Sched = p.thread.effective()
	return st
}

// submit runs s's handshake now, queues it, or refuses it.
func (p *Pool) submit(s *Session) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case s.pstate != psIdle:
		return nil // timed out before it began: already finished
	case p.closed:
		p.stats.Rejected++
		s.pstate = psDone
		return ErrPoolClosed
	case p.running.n < p.cfg.MaxHandshakes:
		p.runLocked(s)
		p.wg.Add(1)
		go p.run(s)
		return nil
	case p.queue.n < p.cfg.MaxQueued:
		s.pstate = psQueued
		p.queue.push(s)
		return nil
	}
	p.stats.Rejected++
	s.pstate = psDone
	return ErrPoolFull
}

func (p *Pool) runLocked(s *Session) {
	s.pstate = psRunning
	p.running.push(s)
	p.stats.Started++
}

// run is a pool goroutine: it runs handshakes until the queue is empty.
func (p *Pool) run(s *Session) {
	defer p.wg.Done()
	var w worker
	for s != nil {
		s.w = &w
		p.acquire(&w)
		err := s.handshake()
		p.leave(&w)
		// Counted before the session says it ended: a loop that has
		// seen the end finds it in Stats.
		p.mu.Lock()
		p.running.remove(s)
		s.pstate = psDone
		p.countLocked(err)
		s.ended(err)
		next := p.queue.pop()
		if next != nil {
			p.runLocked(next)
		}
		p.mu.Unlock()
		notifyDue(s, &w)
		s = next
	}
}

func (p *Pool) countLocked(err error) {
	switch {
	case err == nil:
		p.stats.Succeeded++
	case err == os.ErrDeadlineExceeded: // the timeout (Session.handshake)
		p.stats.TimedOut++
	default:
		p.stats.Failed++
	}
}

// expire takes a session that reached its timeout out of the queue and
// reports whether a goroutine is running its handshake (which then ends it).
func (p *Pool) expire(s *Session) (running bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch s.pstate {
	case psRunning:
		return true
	case psQueued:
		p.queue.remove(s)
		fallthrough
	case psIdle:
		s.pstate = psDone
		p.stats.TimedOut++
	}
	return false
}

// cancel takes a closed session out of the queue.
func (p *Pool) cancel(s *Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.pstate == psQueued {
		p.queue.remove(s)
		s.pstate = psDone
	} else if s.pstate == psIdle {
		s.pstate = psDone
	}
}

// Close fails every queued handshake with ErrPoolClosed, ends the running
// ones, refuses new ones, and waits for the pool's goroutines to return.
// It is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	var queued, running []*Session
	for s := p.queue.pop(); s != nil; s = p.queue.pop() {
		s.pstate = psDone
		p.stats.Failed++
		queued = append(queued, s)
	}
	for s := p.running.head; s != nil; s = s.next {
		running = append(running, s)
	}
	p.mu.Unlock()
	for _, s := range queued {
		s.finish(ErrPoolClosed, true)
	}
	for _, s := range running {
		s.mu.Lock()
		s.t.closed = true
		s.t.wakeLocked()
		s.mu.Unlock()
	}
	p.wg.Wait()
	return nil
}

// list is an intrusive doubly linked list of sessions, under Pool.mu.
type list struct {
	head, tail *Session
	n          int
}

func (l *list) push(s *Session) {
	s.prev, s.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = s
	} else {
		l.head = s
	}
	l.tail = s
	l.n++
}

func (l *list) pop() *Session {
	s := l.head
	if s != nil {
		l.remove(s)
	}
	return s
}

func (l *list) remove(s *Session) {
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		l.tail = s.prev
	}
	s.prev, s.next = nil, nil
	l.n--
}
