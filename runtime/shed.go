//go:build linux

package runtime

// A loop keeps some of what a burst of connections made, for the next
// burst: spare timers, outbound queues and pooled buffers (buffers.go),
// and whatever code on the loop keeps of its own (a protocol's spare
// connection states and free buffers). When the return after a storm
// (heapreturn.go) is about to collect, it asks every loop to shed all
// of it (Loop.shedSpares), so that the collection frees it and its pages
// go back with the rest; the loop's own spares first, then what was
// registered with OnShedSpares (docs/decisions/0080-shed-hooks.md).

// OnShedSpares registers f to run on the loop's thread each time the loop
// sheds what it keeps for the next burst: when the return after a storm
// (Config.ReturnAfterStorm) asks every loop to, before it collects, and at
// ShedSpares. f lets go of what code on the loop keeps beyond what its
// connections hold (a protocol's spare states, its free buffers), so that
// the collection frees it; what is needed afterwards is made again. It
// runs after the loop has shed its own spares, never inside another
// callback, and as a posted function does: a panic is logged and counted,
// and the other functions still run. It runs inside a loop turn, which
// the return waits for (at most half a second a loop): it should only drop
// references. Once the loop has run its OnStop functions, f no longer
// runs (a shed asked then gives up only the loop's own spares).
//
// Register once per loop and per thing to shed, on the loop's thread (in
// Config.LoopSetup, or where a per-loop value is first made): f is kept
// while the loop runs.
func (l *Loop) OnShedSpares(f func()) { l.onShed = append(l.onShed, f) }

// ShedSpares asks the loop to give up what it keeps for the next burst of
// connections (spare timers, queues, pooled buffers, then what was
// registered with OnShedSpares), as the return after a storm does before
// it collects: nothing to do with shedding load. It runs at the loop's
// next turn, after what was posted before it (it is posted: Post's order
// and errors), and walks every connection of the loop (a few milliseconds
// at a hundred thousand): once after a storm, not on a request's path. It
// is safe for concurrent use; asked from a function OnShedSpares
// registered, it does nothing (the shed is running). An application that
// returns the heap itself (ReturnAfterStorm negative) sheds every loop,
// waits for them (a posted function behind ShedSpares), then collects; a
// test of what a protocol sheds calls it too.
func (l *Loop) ShedSpares() error {
	if l.shedding.Load() {
		return nil
	}
	return l.Post(l.shedSpares)
}
