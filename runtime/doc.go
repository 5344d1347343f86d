// Package runtime is percore's thread-per-core network runtime for Linux.
// Import it under the name percore (docs/decisions/0002-layout-and-names.md):
//
//	import percore "github.com/percore/percore/runtime"
//
// New starts one loop per CPU (by default every CPU in the affinity mask,
// at most GOMAXPROCS of them). Each loop is a goroutine locked to an OS
// thread pinned to its CPU; it owns an io_uring (or, where io_uring is
// unavailable, an epoll instance), its own SO_REUSEPORT listener and its own
// connections, and runs the Handler's callbacks inline on its thread. No
// goroutine per connection, no lock or shared atomic on the path of a
// request.
//
//	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:7000"},
//		percore.HandlerFunc(func(c *percore.Conn, data []byte) { c.Write(data) }))
//
// Binaries that import percore build with a plain go build: no linker flags
// (docs/decisions/0014-own-io_uring-binding.md).
//
// # TLS
//
// A listener written tls://host:port is served with Config.TLS, next to
// plain ones, and Loop.DialTLS dials with TLS; crypto/tls does the
// cryptography (runtime/tlsconn), the handshake runs off the loop on a
// bounded pool, and the handler sees plaintext: OnOpen after the
// handshake, OnData with what was decrypted, Write, Writev and
// Reserve/Commit sealed into records, Conn.TLS for the negotiated state,
// close_notify on Close (docs/decisions/0047-tls-under-conn.md).
//
// # Threads
//
// A Loop's methods, a Conn's methods and a Timer's methods must be called on
// the loop's thread: from a handler callback, a timer, or a function passed
// to Loop.Post. Loop.Post, Loop.Go, Loop.Stats and every Runtime method are
// safe for concurrent use.
//
// # Shared nothing
//
// Data belongs to one loop. Loop.Owner(key) names the loop that owns a
// key, and Loop.Runtime().Loops() is every loop, from a loop's first
// callback on; Loop.Call runs a function on another loop and its
// continuation back on the caller's, batched per turn (an OpPool makes
// such calls without allocating, and an ordered.Queue of runtime/frame
// puts their replies back in the order of a connection's requests);
// PerLoop keeps a loop's own state, set up in Config.LoopSetup on each
// loop's thread before it serves. What such state keeps for the next
// burst (spare states, free buffers) it lets go of in a function
// registered with Loop.OnShedSpares, which runs when the loop sheds its own
// spares: before the return of the heap after a storm
// (Config.ReturnAfterStorm), and at Loop.ShedSpares.
//
// # Caveats
//
//   - The data slice OnData receives is valid only during the call: the
//     buffer goes back to the kernel when OnData returns. Copy what you keep
//     (Conn.Write copies for you).
//   - Handlers must not block: a blocked handler stalls every connection of
//     its loop. Run blocking work with Loop.Go and post the result back.
//   - Conn.Write never blocks and always queues; Conn.Buffered says how much
//     is queued. At Config.MaxOutbound (4 MiB by default) the loop stops
//     reading from that connection (or closes it, with CloseSlowConsumer)
//     until the queue drains; a handler that writes without being asked
//     checks Conn.Backpressured and continues in DrainHandler.OnDrain
//     (Conn.ReadPaused says whether reading is paused for either reason:
//     the cap, or the handler's own PauseRead). A producer that would
//     rather drop than queue (a fan-out to subscribers that may not read)
//     writes with Conn.TryWrite or TryReserve, which refuse what does not
//     fit under the cap with ErrOutboundFull, or runs with the DropWrites
//     policy, under which Write refuses too; Config.WriteTimeout closes a
//     peer that takes nothing (docs/decisions/0049-a-write-that-can-refuse.md).
//     Bytes written to many connections (a fan-out's frame, encoded once)
//     go with Conn.WriteShared or TryWriteShared, which queue the caller's
//     slice itself instead of a copy; it must never change afterwards
//     (docs/decisions/0060-fan-out-without-a-copy.md).
//   - A handler whose request outlives OnData (a timer, an upstream call)
//     marks it with Conn.BeginRequest and EndRequest, so that a graceful
//     Shutdown waits for it.
//   - Loop.Dial takes a literal IP address: the loop never resolves names.
//
// It builds on Linux only (io_uring and epoll): elsewhere the package is empty.
package runtime
