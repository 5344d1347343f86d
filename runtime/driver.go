//go:build linux

package runtime

import (
	"log/slog"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// The contract between a Loop and its backend (its driver), in both
// directions. A loop runs one driver: uringDriver (uring.go) or epollDriver
// (epoll.go). Every call either way happens on the loop's locked thread,
// except driver.wake.
//
// Ownership. The loop owns every Conn: its slot, its lifecycle state
// (Conn.state), its outbound queue (Conn.out) and its timers. A driver owns
// the kernel objects (the ring or the epoll instance, the wake-up
// descriptor) and its own per-connection state (Conn.ur or Conn.ep), and
// moves bytes: it reads into its own buffers, and sends the bytes of
// Conn.out that the loop has queued, from Conn.out.pending() on. The bytes
// of a send in flight stay in Conn.out (the loop never moves or frees them
// before the driver reports the send's result), and a buffer handed to the
// kernel stays referenced by the driver until its completion arrives, also
// after a cancel.
//
// Slots. A connection's slot (and with it its queue and a dial's socket
// address) is freed by Loop.freeSlot, which the driver calls once the kernel
// holds nothing of the connection any more: at once on epoll, when its last
// operation completes on io_uring.
//
// The boundary is two types. A driver holds a loopSide (the loop's side
// of the contract: the only loop methods it may call, below) and a
// driverEnv (what it may read: the configuration, the counters, the
// logger), never *Loop, so that the compiler holds this contract and a
// stand-in loop can drive a driver in tests (driver_test.go). The loop
// holds a driver (the interface after loopSide).
//
// The turn's phases are the loop's (Loop.turn), and it calls the driver
// for each: prepare (cross-loop calls, the GSO batches, then
// driver.prepare), enter (driver.enter: the kernel's wait), the clock,
// dispatch (driver.dispatch: what the kernel reported, to the loop), and
// after (the clock again, the timers). A driver runs no phase of its own:
// the GSO batches, for one, are flushed in prepare only, on both backends.
//
// None of the loop's methods run a handler's OnClose or OnDrain inside a
// handler's own callback: the loop queues them as notes that run when the
// callback returns (Loop.notify), on both backends.

// loopSide is what a driver may call on its loop; *Loop implements it.
// Each method is documented where the loop defines it.
type loopSide interface {
	// The turn.
	runPosted() // the wake-up fired: run what other goroutines posted
	// beginPass and endPass bracket a driver pass (epoll's flush,
	// io_uring's accounting of skipped sends before a dispatch): the
	// callbacks its reports cause run at its end, once its state is in
	// order.
	beginPass()
	endPass()
	AfterFunc(d time.Duration, f func()) *Timer // a driver's own timer (accept back-off)

	// Accepting.
	accepting() bool             // the loop takes connections now (cap, back-off, stop)
	ownPlainListener(i int) bool // stream listener i is the loop's own socket (not shared) and not TLS
	acceptResult(fd int, errno unix.Errno, ln int) acceptOutcome
	stopForced() bool // stopping by Close or a deadline: accept nothing more

	// Connections.
	conn(slot, gen uint32) *Conn                         // the connection in slot, if gen matches
	readResult(c *Conn, data []byte, n int, call string) // bytes, the end of the stream (0) or -errno
	queue(c *Conn, p []byte)                             // append p to c.out
	sendResult(c *Conn, n int, err error) (more bool)    // the kernel took n bytes of c.out.pending()
	sendAwaited(c *Conn) bool                            // something waits for c's send in flight to end
	wroteDirect(n int)                                   // n bytes went out without the queue (epoll)
	connected(c *Conn, err error)                        // a connect finished
	fail(c *Conn, op string, err error)                  // a driver operation on c failed: close it
	freeSlot(c *Conn)                                    // the kernel holds nothing of c any more
	slotsInUse() bool                                    // a connection's slot is taken (open, or still in the kernel)
	getBuf(n int) []byte                                 // a pooled buffer (copies of waiting receives)
	putBuf(b []byte)

	// Datagrams (packet.go).
	packetIn(p *PacketConn, data []byte, size int, truncated bool, from netip.AddrPort, control []byte)
	packetRecvFailed()
	packetSent(n, count int, err error)
	gsoRefused(p *PacketConn, errno unix.Errno) // a UDP_SEGMENT send refused (GSO off for p if the socket's fault)
	gsoPending() int                            // datagrams in this turn's GSO batches (they count against MaxPacketQueue)
	listenersClosed() bool

	// Files (file.go, sendfile.go).
	fileOpAt(slot, gen uint32) *fileOp
	fileResult(op *fileOp, res int32, sync bool) // an operation, or the sync linked to it, completed
	offload(op *fileOp)                          // run op on the file workers instead
	inlineDone(op *fileOp)                       // op completed on the loop's thread: report it next turn
	filesBusy() bool                             // file operations are in flight
	fileSent(c *Conn, n int, err error) (more bool)
	deadFileSendDone(c *Conn) // the last kernel operation of an aborted file send completed
	pipes() *pipePool

	// Other loops.
	rewake(id uint32) // a wake-up of loop id sent through this loop's ring failed: wake it through its eventfd
}

// driverEnv is what a driver may read of its loop: set once, before the
// loop's first turn.
type driverEnv struct {
	cfg *Config
	cnt *[numStats]uint64 // the loop's counters (sTurns is the turn number)
	log *slog.Logger
	id  int // the loop's index, for logs
}

// The loop's side that has no other home: small views of its state.

var _ loopSide = (*Loop)(nil)

// env is what l's driver may read.
func (l *Loop) env() driverEnv { return driverEnv{cfg: &l.cfg, cnt: &l.cnt, log: l.log, id: l.id} }

// stopForced reports a stop by Close or a deadline: nothing more is served.
func (l *Loop) stopForced() bool { return l.forced }

// queue appends p to c's outbound queue.
func (l *Loop) queue(c *Conn, p []byte) { c.outw().add(l, p) }

// slotsInUse reports whether any connection slot is taken: a connection is
// open, or a closed one's operations are still in the kernel.
func (l *Loop) slotsInUse() bool { return len(l.free) != len(l.conns) }

// sendAwaited reports whether anything beyond more bytes to send waits for
// the end of c's send in flight: a close, shutdown or lingering close after
// the queue, a paused read or OnDrain (the outbound cap), a file send, the
// loop's stop. A driver that learns of a send's end only at its next
// dispatch (io_uring's skipped sends) must not sleep first when it does.
func (l *Loop) sendAwaited(c *Conn) bool {
	return c.fileSend() != nil || l.stopping ||
		c.state&(stClosing|stClosed|stCloseWriteAsked|stLinger|stOverCap) != 0
}

// ownPlainListener reports whether stream listener i is this loop's own
// socket, which no other loop accepts from, and plain TCP: its connections
// never go to another loop and need no descriptor for a TLS handshake.
func (l *Loop) ownPlainListener(i int) bool {
	if i < 0 || i >= len(l.lns) {
		return false
	}
	info := l.lns[i].info
	return !info.Shared && !info.TLS && !info.Datagram()
}

// gsoPending is how many datagrams this turn's GSO batches hold.
func (l *Loop) gsoPending() int { return l.pk.gsoPending }

// listenersClosed reports that closeListener stopped every listener.
func (l *Loop) listenersClosed() bool { return l.lnClosed }

// filesBusy reports file operations in flight.
func (l *Loop) filesBusy() bool { return l.files.busy > 0 }

// pipes are the loop's pipes for file sends (sendfile.go).
func (l *Loop) pipes() *pipePool { return &l.files.pipes }

// rewake wakes loop id through its eventfd, its wake-up flag cleared
// first: a MSG_RING this loop sent to wake it failed, and the flag, set
// for that wake-up, would otherwise swallow every later one.
func (l *Loop) rewake(id uint32) {
	if rt := l.rt; rt != nil && int(id) < len(rt.peers) {
		rt.peers[id].wakeAfterExit()
	}
}

// Loop to driver (the methods below):
//
//	listen, stopListening      start accepting on one of the loop's stream listeners; stop
//	                           accepting and receiving on all of them (before the loop closes them)
//	listenPacket               start receiving datagrams on one of the loop's UDP sockets
//	writeTo, packetRoom        a packet handler sent a datagram: send or queue it; how many more
//	                           may queue (packet.go)
//	pauseAccept, resumeAccept  called when the reasons to hold accepting become non-empty, and empty again
//	start                      a connection opened (accepted, or dialed and connected): receive
//	pauseRead, resumeRead      reading just became paused (Conn.readPaused: the outbound cap's
//	                           stPaused, the handler's stPauseRead, a hand-over's stHandoff),
//	                           and no longer is
//	inputHeld                  whether a paused connection's input is still partly the driver's
//	write, writev              a handler wrote: send (epoll, at once) or queue in Conn.out
//	committed                  a handler built bytes in place in Conn.out (Reserve, Commit)
//	shutdownWrite              shut the write side (the queue is empty)
//	connect                    start a non-blocking connect of Conn.fd
//	descriptor                 a real descriptor of a connection (Conn.Fd, SendFile, a hand-over)
//	release                    the connection is closed: cancel, close the descriptor, then freeSlot
//	fileStart                  hand a file operation to the kernel (or the file workers)
//	sendFile                   move the next part of a connection's file send (Conn.sf)
//	prepare, enter, dispatch   the turn's phases that are the driver's: hand over; wait; report
//	submit                     hand over without waiting (prepare, and io_uring's enter)
//	discardBuffers, idle       memory and exit checks
//	wake, wakeAnyway, wakeFrom from any goroutine, or from another loop: interrupt enter
//	syscalls, waits            counters of the driver's system calls
//	close                      the loop is exiting
type driver interface {
	// listen starts accepting on the listening socket fd, the loop's
	// listener i (Loop.lns[i]); acceptResult reports i back.
	listen(i int, fd int) error
	// listenPacket starts receiving datagrams on p's socket (its options
	// set with setPacketOptions); each receive goes to Loop.packetIn with
	// its control messages.
	listenPacket(p *PacketConn) error
	// writeTo sends the datagram b to sa (salen bytes of it) on p's
	// socket, or queues it while the socket's send buffer is full; b may
	// be reused once writeTo returns. It returns errPacketQueueFull when
	// Config.MaxPacketQueue datagrams wait already (the send-buffer-full
	// policy: the new datagram is dropped). With seg > 0, b is count
	// datagrams of seg bytes each (the last may be shorter), sent as one
	// buffer with a UDP_SEGMENT control message (Config.UDPGSO); they
	// count as count datagrams in the queue. If the kernel refuses such
	// a send with a GSO error, the driver sends them again one by one
	// and reports it with Loop.gsoRefused.
	writeTo(p *PacketConn, b []byte, sa *unix.RawSockaddrInet6, salen uint32, seg, count int) error
	// packetRoom is how many more datagrams p may queue (Config.
	// MaxPacketQueue less those queued or in flight and those pending in
	// GSO batches that count against the same bound).
	packetRoom(p *PacketConn) int
	// stopListening stops accepting and receiving on every listener for
	// good; the loop closes the sockets after it. Datagrams queued for
	// sending are dropped.
	stopListening()
	// pauseAccept stops taking connections from the listener's backlog;
	// resumeAccept takes them again. The loop calls them only when the
	// set of reasons to hold accepting (cap, back-off) becomes non-empty
	// and empty again.
	pauseAccept()
	resumeAccept()
	// start begins receiving on a connection that just opened.
	start(c *Conn) error
	// pauseRead stops receiving on c (the outbound cap, or PauseRead): after it
	// the loop delivers nothing more until resumeRead.
	pauseRead(c *Conn)
	resumeRead(c *Conn)
	// inputHeld reports, for c with reading paused, whether a receive of
	// it may still complete (armed: the kernel is not done with it yet)
	// and whether input that reached user space waits in the driver
	// (waiting: delivered once reading resumes). A connection with
	// neither holds all its input in the kernel's socket buffer, and
	// may be handed to another process (handoff.go).
	inputHeld(c *Conn) (armed, waiting bool)
	// write sends p, which the handler may reuse once write returns.
	// epoll writes at once when nothing is queued and queues the rest in
	// c.out; io_uring queues all of it in c.out and lists c for the sends
	// prepared before this turn's enter. writev is write for several
	// buffers.
	write(c *Conn, p []byte)
	writev(c *Conn, bufs [][]byte)
	// committed sends bytes the handler added to c.out in place
	// (Conn.Reserve, Commit): both backends list c, epoll for the end of
	// the turn's writes, io_uring for this turn's sends.
	committed(c *Conn)
	// shutdownWrite shuts the write side down; the loop calls it once the
	// queue is empty.
	shutdownWrite(c *Conn)
	// connect starts a non-blocking connect of c.fd to the address in d,
	// which stays referenced by c until the slot is freed.
	connect(c *Conn, d *dialState) error
	// descriptor returns a descriptor of c's socket in the process's
	// table, for what needs one (Conn.Fd and the addresses, SendFile, a
	// hand-over to a new process): Conn.fd, which io_uring's direct
	// descriptors (uring_fixed.go) make once, the first time it is
	// asked. It fails once c is released (net.ErrClosed).
	descriptor(c *Conn) (int, error)
	// release gives c's descriptor back to the kernel, after cancelling
	// what is in flight, and calls loop.freeSlot(c) once the kernel holds
	// nothing of c.
	release(c *Conn)
	// fileStart hands a file operation (file.go) to the kernel, to be
	// submitted with the turn's enter: the ring's own opcode, reported
	// through loop.fileResult; or to the loop's file workers
	// (loop.offload: epoll always, io_uring where the kernel lacks the
	// opcodes), which report through the loop's wake-up. op's memory
	// stays referenced by op until its result is in.
	fileStart(op *fileOp) error
	// sendFile moves the next part of c's file send (Conn.fileSend, sendfile.go),
	// reporting progress through loop.fileSent and going on while it
	// reports more; release cancels what is in flight of it.
	sendFile(c *Conn)
	// prepare is the turn's first phase: it hands the kernel what the
	// turn's callbacks made (epoll writes the gathered writes and the
	// queued datagrams; io_uring prepares the sends). It may run
	// callbacks (a failed write closes its connection; a drained queue
	// runs OnDrain), which may schedule timers and write again.
	prepare()
	// enter waits up to timeout (negative: no limit) for events. The
	// loop computes timeout after prepare, so nothing of the handlers'
	// runs between that and the wait; when prepare's callbacks listed
	// more work (writes, sends), it only looks, and the next prepare
	// hands that work over. An error is the backend's (the loop stops).
	enter(timeout time.Duration) error
	// dispatch hands the loop what the last enter found (and, on
	// io_uring, the receives earlier turns deferred), through loopSide.
	// The loop reads its clock between the two.
	dispatch()
	// submit hands everything prepared to the kernel without waiting.
	submit()
	// discardBuffers gives back the pages of the receive buffers if no
	// connection can be receiving into them (the loop has none open),
	// and reports false when that cannot be known yet (a released
	// connection's operations are still in flight).
	discardBuffers() bool
	// idle reports whether the kernel holds nothing of this loop any more
	// (after stopListening and every release), so the loop may exit.
	idle() bool
	// wake interrupts enter from another goroutine. Safe for concurrent use.
	wake()
	// wakeAnyway is wake through the eventfd even when the wake-up flag
	// says a wake-up is on its way: one that was claimed for a MSG_RING
	// may never come (its sender exited, or the message failed). Called
	// under the loop's wakeMu (Loop.wakeAfterExit).
	wakeAnyway()
	// wakeFrom interrupts enter on behalf of another loop, on that loop's
	// thread (src is its driver), when it can do so without the eventfd:
	// io_uring loops message each other's rings. It reports false when
	// the caller must wake the loop through its eventfd instead
	// (Loop.wakeIfOpen, under the loop's wakeMu).
	wakeFrom(src driver) bool
	// syscalls returns the system calls the loop's thread made through
	// the driver; waits returns those that waited for the kernel
	// (io_uring_enter, epoll_wait).
	syscalls() uint64
	waits() uint64
	// close releases the driver's own resources.
	close() error
}

// Event tags. An io_uring completion carries user data (uring.go: kind |
// generation | slot, never a Go pointer); an epoll event carries the 64-bit
// data its descriptor was registered with. The epoll tags must not collide:
// a connection's is generation<<32 | slot, with a 24-bit generation, so its
// top byte is always zero, while the wake-up's is all ones.
//
// A listener's tag is epollListenerTag | i, a datagram socket's
// epollPacketTag | i (i its index in Loop.lns, below 2^32): top bytes 0xfd
// and 0xfc, which no connection or wake-up tag has.
const (
	epollListenerTag = 0xfd << 56
	epollPacketTag   = 0xfc << 56
	epollTagKind     = 0xff << 56
	// epollWakeTag is poller.WakeData, the wake-up eventfd's events
	// (checked in epoll.go).
	epollWakeTag = ^uint64(0)
)
