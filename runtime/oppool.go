//go:build linux

package runtime

// OpPool is one loop's supply of reusable cross-loop calls that carry a
// value of type T: Loop.Call without an allocation per call. Call's f and
// done are usually closures over the call's state, made, and so allocated,
// at every call; an Op binds the pool's run and done functions once, when
// it is first made, and goes back to the pool when its done function has
// returned, for the next Get (which resets V with V's Reset method, which
// may keep the room of its slices, else to V's zero value). Once as many
// Ops as are in flight at once have been made, calls through the pool
// allocate nothing.
//
//	type lookup struct { key, val []byte; cl *client }
//	ops := percore.NewOpPool(l, runLookup, lookupDone) // in Config.LoopSetup, one per loop
//	...
//	o := ops.Get()                        // in a handler on l
//	o.V.key = append(o.V.key[:0], key...) // the data is the handler's: copy it
//	o.V.cl = cl
//	ops.Call(l.Owner(key), o)
//
// run runs on the target loop, as Call's f does, and is given that loop
// (where its data is); done runs back on the pool's loop, as Call's done
// does, with nil once run has run, or the error Call's done would get
// (ErrLoopStopped, ErrLoopBusy), run then not having run. Calls keep
// Call's order: from one loop to another they run, and their done
// functions run back, in the order they were made.
//
// An OpPool and its Ops belong to the pool's loop: Get and Call must be
// called on its thread, and an Op must not be used after the done
// function of its call has returned (it is someone else's by then). Keep
// one pool per loop, in the loop's own state (PerLoop), made in
// Config.LoopSetup. A connection's replies computed this way come back in
// any order across targets; runtime/frame/ordered's Queue puts them back
// in the order of its requests.
type OpPool[T any] struct {
	loop *Loop
	run  func(on *Loop, v *T)
	done func(v *T, err error)
	free []*Op[T]
	made int
}

// Op is one call of an OpPool: V is the caller's state for it, filled
// before Call, read and written by run on the target and by done back on
// the caller.
type Op[T any] struct {
	V T

	pool   *OpPool[T]
	to     *Loop
	busy   bool
	runFn  func()
	doneFn func(error)
}

// NewOpPool returns an empty pool of l's (it makes its Ops as they are
// needed). run and done must not be nil.
func NewOpPool[T any](l *Loop, run func(on *Loop, v *T), done func(v *T, err error)) *OpPool[T] {
	if run == nil || done == nil {
		panic("percore: NewOpPool with a nil run or done function")
	}
	return &OpPool[T]{loop: l, run: run, done: done}
}

// Get returns an Op to fill and Call: a reused one when the pool has one,
// else a new one. Its V is reset as ordered.Queue resets a reply's data:
// with V's Reset method when *T has one (which keeps the room of its
// slices), else to T's zero value.
func (p *OpPool[T]) Get() *Op[T] {
	var o *Op[T]
	if n := len(p.free); n > 0 {
		o = p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		if r, ok := any(&o.V).(interface{ Reset() }); ok {
			r.Reset()
		} else {
			var zero T
			o.V = zero
		}
	} else {
		o = &Op[T]{pool: p}
		o.runFn, o.doneFn = o.runOn, o.finish
		p.made++
	}
	return o
}

// Call sends o to the loop to, from the pool's loop (Loop.Call): the
// pool's run function runs there with o.V, then its done function back
// here, and o returns to the pool once done has returned. A call to the
// pool's own loop runs both at once. o must come from p's Get and not be
// in flight; Call panics otherwise, as both are a program's mistake.
func (p *OpPool[T]) Call(to *Loop, o *Op[T]) {
	if o.pool != p {
		panic("percore: OpPool.Call of an Op of another pool")
	}
	if o.busy {
		panic("percore: OpPool.Call of an Op already in flight")
	}
	o.busy, o.to = true, to
	p.loop.Call(to, o.runFn, o.doneFn)
}

// Made returns how many Ops the pool holds (made and not shed): once
// warm, as many as were out (got and not yet done) at once, and no more
// as calls go on.
func (p *OpPool[T]) Made() int { return p.made }

// Shed lets go of the Ops the pool keeps for the next calls (not those in
// flight, which come back to it as usual): register it with
// Loop.OnShedSpares where the pool is made, so that the return after a
// storm frees what a burst of calls made; the calls after it make Ops
// again as they need them.
func (p *OpPool[T]) Shed() {
	p.made -= len(p.free)
	clear(p.free)
	p.free = nil
}

func (o *Op[T]) runOn() { o.pool.run(o.to, &o.V) }

func (o *Op[T]) finish(err error) {
	p := o.pool
	defer func() {
		// Back in the pool even when done panics (the loop recovers
		// it): the Op is not used again by the call that panicked.
		o.busy, o.to = false, nil
		p.free = append(p.free, o)
	}()
	p.done(&o.V, err)
}
