//go:build linux

package runtime

// A loop keeps some of what a burst of connections made, for the next
// burst: spare timers, outbound queues and pooled buffers (buffers.go),
// and whatever code on the loop keeps of its own (a protocol's spare
// connection states and free buffers). When the return after a storm
// (heapreturn.go) is about to collect, it asks every loop to shed all
// of it (Loop.shedSpares), so that the collection frees it and its pages
// go back with the rest; the loop's own spares first, then what was
// registered with OnShed (docs/decisions/0080-shed-hooks.md).

// OnShed registers f to run on the loop's thread each time the loop sheds
// what it keeps for the next burst: when the return after a storm
// (Config.ReturnAfterStorm) asks every loop to, before it collects, and
// at Shed. f lets go of what code on the loop keeps beyond what its
// connections hold (a protocol's spare states, its free buffers), so that
// the collection frees it; what is needed afterwards is made again. It
// runs after the loop has shed its own spares, never inside another
// callback, and as a posted function does: a panic is logged and
// counted, and the other functions still run. It must not call Shed.
//
// Register once per loop and per thing to shed, on the loop's thread (in
// Config.LoopSetup, or where a per-loop value is first made): f is kept
// while the loop runs.
func (l *Loop) OnShed(f func()) { l.onShed = append(l.onShed, f) }

// Shed asks the loop to shed what it keeps for the next burst, as the
// return after a storm does before it collects: its own spares, then
// what was registered with OnShed. It runs at the loop's next turn,
// after what was posted before it (it is posted: Post's order and
// errors). It is safe for concurrent use. An application that returns
// the heap itself (ReturnAfterStorm negative) sheds every loop, waits
// for them (a posted function behind Shed), then collects; a test of
// what a protocol sheds calls it too.
func (l *Loop) Shed() error { return l.Post(l.shedSpares) }
