//go:build linux

package runtime

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"net"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/ring"
)

// Runtime is a set of loops, one per configured CPU. Its methods are safe
// for concurrent use.
type Runtime struct {
	cfg    Config
	loops  []*Loop
	addr   net.Addr
	report Report
	// specs are the listeners; lns their descriptions, by index.
	specs []*listenSpec
	lns   []*Listener
	// sockets are every loop's own listening sockets, for ListenerFiles.
	sockMu    sync.Mutex
	sockets   []socketRef
	sharedErr error // closing the shared sockets (under sockMu)
	// started is set once every loop runs: loops hand connections of
	// shared listeners to each other only then.
	started atomic.Bool

	closeOnce sync.Once
	closeErr  error

	// peers are every loop of the runtime, started or not, by id; loops
	// are those that started. seed hashes keys to their owner loop.
	peers []*Loop
	seed  maphash.Seed
	// serve is closed once every loop is set up (or one failed: then
	// aborted is set first), and the loops start serving; each reports
	// how that went on serving.
	serve   chan struct{}
	serving chan error
	aborted atomic.Bool

	tls runtimeTLS // the handshake pool (tls.go)
	// handoff is the hand-over of connections to a new process
	// (HandOver, handoff.go); adopt receives them from an old one
	// (Adopt, adopt.go).
	handoff atomic.Pointer[handoffOut]
	adopt   atomic.Pointer[adoptIn]
}

// New starts one loop per CPU (Config.Cores, else the affinity mask, at most
// GOMAXPROCS of it). Each loop's goroutine locks its OS thread, pins it to
// its CPU, and only then creates its io_uring or epoll instance and its
// SO_REUSEPORT listener (when Config.Addr is set), so that everything a
// loop owns is created on the thread that uses it. Loops are set up one
// after the other (backend, Config.LoopSetup, listening sockets), and only
// once every loop is does any of them accept or run a handler: a handler
// may call any loop from its first request. If one cannot start, New
// stops the others and returns the error. h handles accepted connections; it may be nil for a
// runtime without a stream listener. Datagrams go to Config.PacketHandler.
//
// The listeners are Config.Addr, Config.Listen and Config.Inherited (see
// Listener): each loop binds its own SO_REUSEPORT socket for every TCP and
// UDP address, and serves a duplicate of each Unix socket (bound once,
// here) and each inherited socket.
func New(cfg Config, h Handler) (*Runtime, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cores, err := loopCores(cfg)
	if err != nil {
		return nil, err
	}
	specs, err := listenSpecs(cfg)
	if err != nil {
		return nil, err
	}
	if err := checkTLSListeners(cfg, specs); err != nil {
		closeSpecs(specs)
		return nil, err
	}
	for _, s := range specs {
		if s.info.Datagram() && cfg.PacketHandler == nil {
			closeSpecs(specs)
			return nil, fmt.Errorf("percore: listener %s receives datagrams: Config.PacketHandler is nil", s.info)
		}
		if !s.info.Datagram() && h == nil {
			closeSpecs(specs)
			return nil, fmt.Errorf("percore: a runtime with a stream listener (%s) needs a handler", s.info)
		}
	}
	rt := &Runtime{cfg: cfg, specs: specs}
	for _, s := range specs {
		rt.lns = append(rt.lns, s.info)
	}
	rt.report.CPUs = append([]int(nil), cores...)
	rt.report.Kernel = kernelRelease()
	rt.report.KernelTLS = probeKernelTLS(cfg)
	rt.setupTLSPool() // before any loop starts: a loop's first handshake makes the pool
	backend := cfg.Backend
	// Every loop exists before any starts, so that each can reach the
	// others (cross-loop calls) from its first turn.
	rt.seed = maphash.MakeSeed()
	for i, core := range cores {
		l := newLoop(cfg, i, core, h, time.Now)
		l.rt = rt
		rt.peers = append(rt.peers, l)
	}
	for _, l := range rt.peers {
		l.initCalls(len(rt.peers), batchQueueSize)
	}
	// Two phases. First each loop, one after the other, sets up its
	// backend, runs Config.LoopSetup and binds its listeners; then, once
	// every loop has, they all start accepting and serving. So no
	// handler runs before every loop can take a cross-loop call (a
	// handler may call any loop from its first request), and LoopSetup
	// has run on every loop before the first client is served.
	rt.serve, rt.serving = make(chan struct{}), make(chan error, len(rt.peers))
	for i, l := range rt.peers {
		core := l.cpu
		chosen, err := rt.start(l, backend)
		if err != nil {
			rt.abortStart()
			return nil, fmt.Errorf("percore: start loop %d on cpu %d: %w", i, core, err)
		}
		if i == 0 {
			// Later loops use what the first one resolved: the backend
			// Auto chose, and the port when Addr asked for port 0.
			backend = chosen
			if len(specs) > 0 {
				rt.addr = specs[0].info.Addr
			}
		}
		rt.loops = append(rt.loops, l)
	}
	close(rt.serve)
	var serveErr error
	for range rt.loops {
		if err := <-rt.serving; err != nil && serveErr == nil {
			serveErr = err
		}
	}
	if serveErr != nil {
		rt.Close()
		return nil, serveErr
	}
	rt.report.Backend = backend
	rt.started.Store(true)
	if cfg.ReturnAfterStorm > 0 {
		procReturn.add(rt) // runtime/heapreturn.go
	}
	cfg.Logger.Info("percore: started", "loops", len(rt.loops), "backend", backend.String(),
		"cpus", cpu.FormatList(cores), "listeners", listenerList(rt.lns))
	return rt, nil
}

// loopCores returns the CPUs to start loops on: Config.Cores, else the
// affinity mask, but no more loops than GOMAXPROCS. A loop runs Go code
// (handlers, timers) holding a P, and gets one back after every wait in the
// kernel; with fewer Ps than loops, loops wait for each other's. Since Go
// 1.25 GOMAXPROCS also follows a cgroup CPU quota, which the affinity mask
// does not show: a container limited to 2 CPUs on a 64-CPU host gets 2
// loops, not 64. Explicit Cores are kept, with a warning. GOMAXPROCS is
// taken as it was before the TLS pools' raises (baseProcs): a runtime
// started while another's raise is live (an in-process hand-over) is not
// sized by that raise.
func loopCores(cfg Config) ([]int, error) {
	procs := baseProcs()
	if len(cfg.Cores) > 0 {
		if len(cfg.Cores) > procs {
			cfg.Logger.Warn("percore: more loops than GOMAXPROCS: loops will wait for each other's Ps",
				"loops", len(cfg.Cores), "gomaxprocs", procs)
		}
		return cfg.Cores, nil
	}
	cores, err := cpu.Cores()
	if err != nil {
		return nil, fmt.Errorf("percore: %w", err)
	}
	if len(cores) > procs {
		cfg.Logger.Info("percore: GOMAXPROCS is below the CPUs in the affinity mask (a CPU quota?): one loop per P",
			"gomaxprocs", procs, "affinity", cpu.FormatList(cores), "cpus", cpu.FormatList(cores[:procs]))
		cores = cores[:procs]
	}
	return cores, nil
}

// abortStart stops the loops set up so far, when a later one could not
// be: they have not served anyone, and each stops as Close stops a loop.
func (rt *Runtime) abortStart() {
	rt.aborted.Store(true)
	close(rt.serve)
	rt.Close()
}

// start runs a loop's goroutine and waits until it is set up or has
// failed. It returns the backend the loop chose. The loop then waits for
// rt.serve to start its listeners, reports on l.serving, and runs.
func (rt *Runtime) start(l *Loop, backend Backend) (Backend, error) {
	type result struct {
		backend Backend
		err     error
	}
	ready := make(chan result, 1)
	go func() {
		// Lock first, pin, and only then create the ring: with
		// SINGLE_ISSUER a ring belongs to the thread that made it. The
		// goroutine never unlocks, so the thread exits with it.
		goruntime.LockOSThread()
		// Profiles tell the loops apart: every sample taken on this
		// goroutine carries its loop and CPU.
		pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(),
			pprof.Labels("percore_loop", strconv.Itoa(l.id), "percore_cpu", strconv.Itoa(l.cpu))))
		if err := cpu.Pin(l.cpu); err != nil {
			close(l.done)
			ready <- result{err: err}
			return
		}
		chosen, err := rt.setup(l, backend)
		if err != nil {
			close(l.done)
			ready <- result{err: err}
			return
		}
		ready <- result{backend: chosen}
		<-rt.serve
		if !rt.aborted.Load() {
			err = l.startServing()
			if err != nil {
				err = fmt.Errorf("percore: start loop %d on cpu %d: %w", l.id, l.cpu, err)
			}
			rt.serving <- err
			if err != nil {
				// Stop as Close would (New closes the runtime): the
				// loop's exit path releases what it set up.
				l.forceStop(err)
			}
		}
		l.run()
	}()
	r := <-ready
	return r.backend, r.err
}

// setup creates the loop's backend and listener on the loop's thread.
func (rt *Runtime) setup(l *Loop, backend Backend) (Backend, error) {
	cfg := rt.cfg
	switch backend {
	case IOURing, Auto:
		d, err := newUringDriver(l, cfg)
		if err == nil {
			l.d, l.backend = d, IOURing
			if l.id == 0 {
				rt.report.Reason = "io_uring set up and every needed opcode supported"
				rt.report.RingFlags = *cfg.RingFlags
				rt.report.UringFeatures = d.feats
				if s, perr := ring.Probe(); perr == nil {
					for _, op := range s.Supported() {
						rt.report.Ops = append(rt.report.Ops, op.String())
					}
				}
			}
			break
		}
		if backend == IOURing || !errors.Is(err, ring.ErrUnavailable) {
			return 0, err
		}
		cfg.Logger.Warn("percore: io_uring unavailable, using epoll", "reason", err)
		rt.report.Reason = "fell back to epoll: " + err.Error()
		fallthrough
	case Epoll:
		d, err := newEpollDriver(l, cfg)
		if err != nil {
			return 0, err
		}
		l.d, l.backend = d, Epoll
		if l.id == 0 && rt.report.Reason == "" {
			rt.report.Reason = "epoll requested"
		}
	}
	l.now = time.Now()
	if cfg.LoopSetup != nil {
		if err := loopSetup(cfg.LoopSetup, l); err != nil {
			l.d.close()
			return 0, fmt.Errorf("loop setup: %w", err)
		}
	}
	if len(rt.specs) > 0 {
		if err := l.openListeners(rt.specs); err != nil {
			l.closeListeners()
			l.d.close()
			return 0, err
		}
	}
	return l.backend, nil
}

// startServing starts accepting and receiving on the loop's listeners,
// once every loop of the runtime is set up; on the loop's thread.
func (l *Loop) startServing() error {
	if len(l.lns) == 0 {
		return nil
	}
	if err := l.startListeners(); err != nil {
		return err
	}
	rt := l.rt
	rt.sockMu.Lock()
	for _, ll := range l.lns {
		if ll.ln != nil {
			rt.sockets = append(rt.sockets, socketRef{info: ll.info, ln: ll.ln})
		}
	}
	rt.sockMu.Unlock()
	return nil
}

// Loops returns every loop of the runtime, by ID (Config.Cores order). It
// is safe for concurrent use, and complete from the first Config.LoopSetup
// on (the runtime makes every loop before it starts any), so a handler
// reaches the other loops from its first callback through
// c.Loop().Runtime().Loops(). The caller must not modify the slice.
func (rt *Runtime) Loops() []*Loop { return rt.peers }

// Addr returns the address of the first listener (Config.Addr's, when it
// is set), with the port resolved, or nil without a listener.
func (rt *Runtime) Addr() net.Addr { return rt.addr }

// Listeners returns the runtime's listeners, by index (see Listener).
func (rt *Runtime) Listeners() []*Listener { return rt.lns }

// Report returns what the runtime found at start: backend, reason, ring
// flags and opcodes, kernel, CPUs.
func (rt *Runtime) Report() Report { return rt.report }

// Stats returns the sum of every loop's counters.
func (rt *Runtime) Stats() Stats {
	var s Stats
	for _, l := range rt.loops {
		s = s.Add(l.Stats())
	}
	return s
}

// Shutdown stops the runtime gracefully. Every loop closes its listener at
// once, so new clients are refused (what a load balancer's health check
// needs); handlers that implement ShutdownHandler are told, so a protocol
// can say goodbye; connections that are idle (no request in flight, as
// Conn.BeginRequest and EndRequest count them, and nothing queued) are
// closed, and the others as soon as they become idle. When ctx is done
// first, whatever is left is closed with ErrShutdown and Shutdown returns
// ctx's error. It returns once every loop's thread has exited. While it
// waits it logs, every stopWarnEvery, each loop still running with its
// open connections.
func (rt *Runtime) Shutdown(ctx context.Context) error { return rt.shutdown(ctx, nil) }

// shutdown is Shutdown, with first run on each loop before its shutdown
// begins (HandOver's hook).
func (rt *Runtime) shutdown(ctx context.Context, first func(l *Loop)) error {
	for _, l := range rt.loops {
		_ = l.post(func() {
			if first != nil {
				first(l)
			}
			l.beginShutdown()
		}, true)
	}
	rt.closeShared()
	var err error
	if !rt.awaitLoops(ctx.Done(), func(l *Loop, waited time.Duration) {
		st := l.Stats()
		rt.cfg.Logger.Warn("percore: shutdown still waiting for loop (connections in flight, or a handler holding its thread)",
			"loop", l.id, "cpu", l.cpu, "waited", waited, "open", st.Open, "turns", st.Turns)
	}) {
		err = ctx.Err()
	}
	rt.Close()
	return err
}

// Close closes every connection and listener at once and waits for the
// loops' threads to exit. It returns what failed while the loops stopped
// (closing a listener, an io_uring or epoll instance), joined, or nil; a
// second Close returns the same. A loop whose thread is held by a handler
// or posted function that never returns cannot stop: Close then logs a
// warning naming each such loop every stopWarnEvery while it waits. Close
// must not be called on a loop's own thread: it would wait for itself.
func (rt *Runtime) Close() error {
	rt.closeOnce.Do(func() {
		rt.stopAdopt()
		for _, l := range rt.loops {
			_ = l.post(func() { l.forceStop(ErrShutdown) }, true)
		}
		rt.closeShared()
		rt.awaitLoops(nil, func(l *Loop, waited time.Duration) {
			rt.cfg.Logger.Warn("percore: loop has not stopped; a handler or posted function may be blocking its thread",
				"loop", l.id, "cpu", l.cpu, "waited", waited, "turns", l.Stats().Turns)
		})
		rt.tls.close()
		procReturn.remove(rt) // its loops' counts are final now
		for _, l := range rt.loops {
			rt.closeErr = errors.Join(rt.closeErr, l.stopErr)
		}
		rt.sockMu.Lock()
		rt.closeErr = errors.Join(rt.closeErr, rt.sharedErr)
		rt.sockMu.Unlock()
		if len(rt.loops) > 0 { // not after a start that failed at the first loop
			rt.cfg.Logger.Info("percore: stopped", "loops", len(rt.loops))
		}
	})
	return rt.closeErr
}

// stopWarnEvery is how often Shutdown and Close report the loops they are
// still waiting for.
var stopWarnEvery = 10 * time.Second

// awaitLoops waits until every loop's thread has exited, and reports true,
// or until stop is closed, and reports false. Every stopWarnEvery it calls
// warn for each loop still running.
func (rt *Runtime) awaitLoops(stop <-chan struct{}, warn func(l *Loop, waited time.Duration)) bool {
	t := time.NewTicker(stopWarnEvery)
	defer t.Stop()
	began := time.Now()
	for _, l := range rt.loops {
		for running := true; running; {
			select {
			case <-l.done:
				running = false
			case <-stop:
				return false
			case <-t.C:
				waited := time.Since(began).Round(time.Millisecond)
				for _, m := range rt.loops {
					select {
					case <-m.done:
					default:
						warn(m, waited)
					}
				}
			}
		}
	}
	return true
}

// loopSetup runs Config.LoopSetup for l, turning a panic into an error.
func loopSetup(f func(*Loop) error, l *Loop) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f(l)
}
