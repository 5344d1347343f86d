//go:build linux

package runtime

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/percore/percore/internal/limit"
	"github.com/percore/percore/runtime/tlsconn"
)

// Config configures a Runtime. The zero value starts one loop per CPU in the
// process's affinity mask (at most GOMAXPROCS of them), with the Auto
// backend and no listener (a client-only runtime that dials out).
//
// Every limit and duration follows one rule (the pool's Config too): zero
// means the default, which the field names (the Default constants; for
// some it is "none"), and a negative value means none: no limit, no
// timeout, off. A size (RingEntries, BufferSize, BufferCount, Backlog) is
// no limit: zero means its default and a negative one is an error.
type Config struct {
	// Cores lists the CPUs to run loops on, one loop per entry, each loop's
	// thread pinned to its CPU. Nil means every CPU in the affinity mask
	// (cpu.Cores: honours taskset and cgroup cpusets), but at most the first
	// GOMAXPROCS of them (which honours a cgroup CPU quota): a loop needs a
	// P to run its handlers. More Cores than GOMAXPROCS start, with a
	// warning. A CPU listed twice is an error (New fails): one loop per
	// CPU, the rule cpu.ParseList applies to a list such as -cores 0,0
	// (docs/decisions/0030-api-from-the-trial.md).
	Cores []int
	// Backend selects io_uring or epoll. The zero value is Auto.
	Backend Backend
	// Addr is the TCP address every loop listens on with its own
	// SO_REUSEPORT socket ("127.0.0.1:7000", "[::]:0"; port 0 picks one
	// port for all loops). Empty means no listener.
	Addr string
	// Listen lists more addresses to serve, each with its network as a
	// scheme: "tcp://127.0.0.1:7000" (also tcp4://, tcp6://; "[::]:port"
	// is dual-stack), "udp://0.0.0.0:5353" (udp4://, udp6://),
	// "unix:///run/app.sock" (a path) or "unix://@app" (an abstract
	// name); see ParseListenAddr. Each loop has its own SO_REUSEPORT
	// socket for every TCP and UDP address; a Unix socket is bound once
	// and every loop accepts from it (docs/decisions/0020). Datagrams go
	// to PacketHandler, connections to New's handler; Conn.Listener says
	// which listener a connection came from. Nil means none beyond Addr.
	Listen []string
	// Inherited are listening sockets opened elsewhere to serve as well
	// (a listening TCP or Unix stream socket, or a bound UDP socket): from
	// systemd's socket activation or a parent process, see ListenFiles
	// (and Runtime.ListenerFiles on the parent's side). New duplicates
	// them, so the caller may close them once New returns; every loop
	// serves each one, and its Listener says Inherited. A TCP socket is
	// TLS (served with TLS) when its file's name says so: the name
	// ListenerFiles gives a tls:// listener's socket ("tls://host:port",
	// or "tls_//host_port" as HandoverEnv passes it), or a systemd
	// FileDescriptorName= of "tls" or "tls-anything". Nil means none.
	// (A File is something else: a regular file opened on a loop.)
	Inherited []*os.File
	// UnixMode, when not zero, is the permission bits of the socket files
	// of Unix listeners (0o660: owner and group may connect), set before
	// the socket listens. Zero leaves what the umask gave.
	UnixMode os.FileMode
	// PacketHandler receives the datagrams of the UDP listeners. It must
	// be set when any listener is UDP.
	PacketHandler PacketHandler
	// PacketBufferSize is the largest datagram a UDP socket receives
	// whole; a larger one is truncated and counted
	// (Stats.PacketsTruncated, TruncatedHandler). Zero means
	// DefaultPacketBufferSize, which takes any UDP datagram.
	PacketBufferSize int
	// PacketBufferCount is how many datagram receive buffers each
	// io_uring loop with UDP sockets provides to the kernel (a power of
	// two), shared by its UDP sockets; pages that no datagram reached
	// cost nothing. Zero means DefaultPacketBufferCount.
	PacketBufferCount int
	// MaxPacketQueue bounds the datagrams that wait for room in a
	// socket's send buffer (on io_uring: the loop's sends the kernel
	// holds; on epoll: each socket's queue). Past it WriteTo drops the
	// datagram, counts it (Stats.PacketDrops) and returns
	// ErrPacketQueueFull. Zero means DefaultMaxPacketQueue; negative
	// means none.
	MaxPacketQueue int
	// UDPGRO sets UDP_GRO on the loops' UDP sockets: the kernel may then
	// hand over several datagrams of one sender in one receive (those a
	// sender sent with UDP_SEGMENT, or that the NIC coalesced), and the
	// loop splits them, so PacketHandler still sees one call per
	// datagram, in order (Stats.PacketsCoalesced counts such receives).
	// It saves receive calls only when senders send that way; measure
	// before turning it on (docs/performance.md). It needs
	// PacketBufferSize of at least DefaultPacketBufferSize, the most the
	// kernel coalesces. False (the zero value) leaves it off.
	UDPGRO bool
	// UDPGSO coalesces the datagrams a handler sends in one turn on one
	// PacketConn to the same destination with the same length (the last
	// may be shorter) into one send with UDP_SEGMENT, at most 64
	// datagrams and 65,000 bytes each; the kernel splits them again, so
	// the receiver sees the same datagrams (Stats.PacketsSegmented counts
	// such sends). If the kernel refuses a segmented send (EIO, EINVAL,
	// EMSGSIZE, ENOPROTOOPT) its datagrams are sent again one by one and
	// the refusal is counted in Stats.PacketErrors; GSO is turned off for
	// that socket when the error is the socket's (EIO, ENOPROTOOPT), not
	// when it is one destination's (EINVAL, EMSGSIZE: its path's MTU).
	// False (the zero value) leaves it off.
	UDPGSO bool
	// Backlog is each listener's accept queue length. Zero means the
	// kernel's net.core.somaxconn.
	Backlog int
	// IncomingCPU sets SO_INCOMING_CPU on each loop's listener to the
	// loop's CPU, so that the kernel prefers the listener on the CPU that
	// received the connection's packets (pair it with scripts/tune-nic.sh).
	IncomingCPU bool
	// RingEntries is each io_uring's submission queue size. Zero means
	// DefaultRingEntries; the completion queue is four times as large.
	RingEntries uint32
	// RingFlags points at the io_uring setup flags. Nil means
	// DefaultRingFlags; a pointer to zero means no flags at all.
	RingFlags *RingFlags
	// UringFeatures points at the io_uring features beyond its opcodes
	// that each io_uring loop uses where the kernel has them (each is
	// probed; a kernel without one runs the loop without it). Nil means
	// DefaultUringFeatures; a pointer to zero means none, as on a kernel
	// that has none of them.
	UringFeatures *UringFeatures
	// NAPIBusyPoll is how long an io_uring loop with UringNAPI busy polls
	// its NICs' receive queues each time it waits. Zero means
	// DefaultNAPIBusyPoll; UringNAPI off (the default) ignores it.
	NAPIBusyPoll time.Duration
	// ZeroCopySendMin is the smallest send an io_uring loop with
	// UringZeroCopySend sends with zero copy: a send of fewer of a
	// connection's queued bytes, or a smaller datagram (GSO batch), is
	// copied into the socket as before.
	// Zero means DefaultZeroCopySendMin; UringZeroCopySend off (the
	// default) ignores it.
	ZeroCopySendMin int
	// WaitBatch, when above 1, makes an idle io_uring loop wait for up to
	// this many completions before it wakes, but never longer than
	// WaitMin once one has arrived: fewer kernel enters and wake-ups
	// under load, for at most WaitMin of added latency. Zero (the
	// default) and negative mean off (wake on the first completion).
	// Needs kernel 6.12+ (IORING_FEAT_MIN_TIMEOUT); New fails without
	// it. Measured in docs/performance.md.
	WaitBatch int
	// WaitMin bounds the extra wait of WaitBatch. Zero means
	// DefaultWaitMin; negative means none (which turns batching off).
	WaitMin time.Duration
	// BufferSize is the size of each receive buffer: the io_uring
	// provided-buffer ring's buffers, and the epoll loop's one read
	// buffer. Zero means DefaultBufferSize.
	BufferSize int
	// BufferCount is how many receive buffers each io_uring loop provides
	// to the kernel (a power of two). Zero means DefaultBufferCount. An
	// idle connection holds none of them. With UringIncrementalBuffers
	// the loop provides a quarter of BufferCount×BufferSize instead, in
	// buffers of IncrementalBufferSize that receives share; a handler is
	// still given at most BufferSize at a time.
	BufferCount int
	// MaxConns caps the open connections of each loop. At the cap a loop
	// stops accepting, so that later connections wait in the kernel's
	// listen backlog (no descriptor or buffer of ours), and it resumes as
	// connections close. Zero (the default) and negative mean no cap. To
	// size it from the descriptor limit: (RLIMIT_NOFILE - descriptors the
	// process needs for other things) / loops; each loop also holds 2-3
	// descriptors of its own (ring or epoll, eventfd, listener). With
	// UringDirectDescriptors, MaxConns (else that share of the limit) is
	// also the size of each io_uring loop's table of direct descriptors,
	// which bounds what the loop accepts into it.
	MaxConns int
	// IdleTimeout closes a connection that has received nothing for this
	// long, with ErrIdleTimeout. A connection that keeps sending is never
	// cut off. Zero (the default) and negative mean no idle timeout.
	// Conn.SetIdleTimeout changes it per connection.
	IdleTimeout time.Duration
	// MaxLifetime closes a connection this long after it opened, with
	// ErrMaxLifetime. Zero (the default) and negative mean no limit.
	// Conn.SetMaxLifetime changes it per connection.
	MaxLifetime time.Duration
	// WriteTimeout closes a connection whose queued outbound bytes make
	// no progress (the kernel takes none of them, because the peer does
	// not read) for this long, with ErrWriteTimeout. A peer that reads
	// slowly but steadily is never cut off by it. Zero means
	// DefaultWriteTimeout (nginx's send_timeout); negative means none.
	WriteTimeout time.Duration
	// Linger bounds how long a connection closed with bytes still queued
	// (Conn.Close sends them first) may take to send them; past it the
	// connection is aborted with ErrLingerTimeout, so that a peer that
	// stops reading cannot hold a closing connection's descriptor, slot
	// and queue for good. Zero means DefaultLinger; negative means no
	// bound.
	Linger time.Duration
	// LingerInput bounds how long Conn.CloseLinger, once the answer is
	// sent and the write side shut down, reads and discards what the
	// peer still sends before it closes (nginx's lingering_time, with
	// the default of its lingering_timeout); it closes sooner when the
	// peer ends its stream. Zero means
	// DefaultLingerInput; negative means no bound (until the peer ends
	// its stream, or LingerInputBytes).
	LingerInput time.Duration
	// LingerInputBytes bounds what Conn.CloseLinger discards: past it the
	// connection closes, so that a peer that sends without end costs a
	// bounded amount of reading. Zero means DefaultLingerInputBytes;
	// negative means no bound.
	LingerInputBytes int
	// MaxOutbound caps the bytes a connection may have queued for
	// sending before OutboundPolicy applies. Zero means
	// DefaultMaxOutbound; negative means no cap.
	MaxOutbound int
	// OutboundLowWater is where a paused connection resumes reading (and
	// DrainHandler.OnDrain runs). Zero means a quarter of MaxOutbound;
	// negative means none: it resumes once the queue is empty.
	OutboundLowWater int
	// OutboundPolicy says what happens at MaxOutbound. The zero value,
	// PauseReading, stops reading from the connection until its queue
	// drains below OutboundLowWater (writes are still queued);
	// CloseSlowConsumer closes it with ErrSlowConsumer; DropWrites
	// refuses the writes that do not fit (ErrOutboundFull). Conn.TryWrite
	// refuses under every policy.
	OutboundPolicy OutboundPolicy
	// TurnBudget is how many received bytes one connection may have
	// delivered to its handler per loop turn before the rest waits for the
	// next turn, so that one client that pipelines megabytes cannot make
	// the others wait behind it. Zero means DefaultTurnBudget; negative
	// means no budget. The epoll backend reads at most BufferSize per
	// connection per turn anyway.
	TurnBudget int
	// MaxPosted bounds the functions posted to one loop (Loop.Post) that
	// wait to run; past it Post fails with ErrLoopBusy. Zero means
	// DefaultMaxPosted; negative means no bound.
	MaxPosted int
	// MaxGo bounds the goroutines Loop.Go runs at once for one loop; past
	// it Go fails with ErrLoopBusy. Zero means DefaultMaxGo; negative
	// means no bound.
	MaxGo int
	// MaxHeldCalls bounds the cross-loop calls (Loop.Call) one loop holds
	// for one target whose queue is full (the target is behind): they
	// wait on the caller, in order, and past this many a turn's batch to
	// that target is refused, its done functions getting ErrLoopBusy
	// (Stats.CallRejects counts them). Zero means DefaultMaxHeldCalls;
	// negative means no bound.
	MaxHeldCalls int
	// FileWorkers bounds the worker threads each epoll loop runs its
	// file operations on (regular files cannot be polled, so a File's
	// reads, writes and syncs are blocking system calls there); they
	// start with the first operation. io_uring loops need none. Zero
	// means DefaultFileWorkers.
	FileWorkers int
	// LoopSetup, when set, runs on each loop's thread once its backend is
	// set up, and before any loop accepts or runs a handler, timer or
	// posted function: the place to build the loop's own state
	// (PerLoop.Set). It has run on every loop before the first client is
	// served. An error stops New, which returns it.
	LoopSetup func(l *Loop) error
	// Logger receives lifecycle events only (start, backend fallback,
	// shutdown, accept-error episodes), never per-request logs. Nil means
	// slog.Default().
	Logger *slog.Logger
	// TLS is the server configuration of the TLS listeners: the
	// addresses of Addr and Listen written with a tls:// scheme
	// ("tls://0.0.0.0:8443"; also tls4://, tls6://), next to plain ones.
	// Their connections are TLS: the handler sees plaintext (see
	// Conn.TLS, and runtime/tls.go). Its callbacks (GetCertificate,
	// GetConfigForClient) run on the handshake pool, never on a loop;
	// GetConfigForClient tells listeners apart by
	// ClientHelloInfo.Conn.LocalAddr. Nil with a tls:// listener is an
	// error; a TLS without one is too.
	TLS *tls.Config
	// TLSPool bounds the handshakes, which run off the loops on one pool
	// per runtime (runtime/tlsconn): at once, waiting, computing, and
	// their timeout, and says how their threads are scheduled. Its zero
	// value is tlsconn's defaults, with two of the runtime's own: CPUs
	// nil means the CPUs of the process's affinity that no loop runs on
	// (none: wherever the threads run; an empty, non-nil slice asks for
	// that), and MaxCPU zero means half of GOMAXPROCS as it was before
	// any raise, at least 1. A handshake computes on a thread at nice 19
	// (tlsconn's default Sched), so that a loop on the same CPU gets it as
	// soon as the kernel wakes the loop; a loop that keeps its CPU busy
	// then leaves that CPU's handshakes about 1.4% of it (SchedNormal
	// trades that back). A process that cannot put a lowered thread back
	// (no CAP_SYS_NICE, RLIMIT_NICE below 20) gets SchedNormal instead,
	// logged once at Warn (TLSPoolStats().Sched). With TLS listeners New raises
	// GOMAXPROCS to the loops plus TLSPool.MaxCPU when it is below (a P
	// for each loop and each computing handshake), logs it and reports it
	// (Report.GOMAXPROCS), and Close puts it back once no other runtime's
	// raise is live (one record for the process: runtimes that overlap, as
	// in a hand-over, keep the largest want; Go's default comes back as the
	// default, following a CPU quota again). Under a cgroup CPU quota
	// (cpu.Quota, read up the cgroup hierarchy) it is not raised past the
	// quota's whole CPUs (logged): more running threads than the quota has
	// CPUs would get the loops throttled with the handshakes.
	// docs/decisions/0064-tls-storm-scheduling.md.
	TLSPool tlsconn.PoolConfig
	// MaxHandshakes caps each loop's connections in their TLS handshake:
	// at it the loop stops accepting until one ends (h2o caps accepts per
	// loop for the same reason). Zero means DefaultMaxHandshakes;
	// negative means no cap.
	MaxHandshakes int
	// ReturnAfterStorm is the fewest new connections (accepted, adopted
	// and dialed, on every loop) a storm has before the process, once the
	// storm has settled, collects and returns the heap's free pages to the
	// kernel (debug.FreeOSMemory): a storm of TLS handshakes or upgrades
	// leaves the heap about twice what its connections then hold, and the
	// Go runtime gives that back only slowly. Settled means a second that
	// counted at most a tenth of the storm's busiest second's connections
	// and of its busiest second's bytes (so steady churn, and a server
	// busy after its storm, never trigger it); a return comes at most once
	// a minute. The
	// return is one for the process (it runs while a runtime with it on is
	// open, counts the connections of all of them, and takes the smallest
	// of their ReturnAfterStorm); each return is a forced collection,
	// whose pauses stop every loop briefly (runtime/heapreturn.go,
	// docs/decisions/0076-heap-return-after-storms.md; HeapReturns counts
	// them). Zero means DefaultReturnAfterStorm; negative means never.
	ReturnAfterStorm int
	// NoKernelTLS turns kernel TLS off. percore does not hand keys to
	// the kernel yet (docs/decisions/0048-kernel-tls.md), so today it
	// only changes what the start-up report says.
	NoKernelTLS bool

	// eventfdWake makes io_uring loops wake each other through their
	// eventfds, never MSG_RING: a benchmark's comparison
	// (export_test.go), read once when the driver is set up.
	eventfdWake bool
	// fixedSlots, when above zero, sizes an io_uring loop's fixed file
	// table (UringDirectDescriptors) instead of the admitted connections,
	// and fixedMargin, when set, replaces the backlog as the margin of
	// its multishot accept (-1: none): the tests' table at its limit
	// (uring_fixed_export_test.go).
	fixedSlots  int
	fixedMargin *int
}

// OutboundPolicy is what a loop does with a connection whose queued
// outbound bytes reach Config.MaxOutbound.
type OutboundPolicy int

const (
	// PauseReading stops reading from the connection until its queue
	// drains below the low-water mark (the default).
	PauseReading OutboundPolicy = iota
	// CloseSlowConsumer closes the connection with ErrSlowConsumer,
	// discarding what is queued.
	CloseSlowConsumer
	// DropWrites refuses a write that would take the queue past
	// MaxOutbound (Write, Writev and Commit return ErrOutboundFull and
	// queue nothing of it; Stats.WritesRefused counts it) and keeps
	// reading: the messages a slow peer cannot take are dropped for it,
	// and WriteTimeout closes a peer that takes nothing at all. For
	// servers that write without being asked (pub/sub, fan-out), whose
	// queues PauseReading does not bound.
	DropWrites
)

// The defaults a zero Config field stands for.
const (
	DefaultRingEntries  = 1024
	DefaultBufferSize   = 16 << 10
	DefaultBufferCount  = 512
	DefaultWaitMin      = 20 * time.Microsecond
	DefaultWriteTimeout = 60 * time.Second
	DefaultLinger       = 30 * time.Second
	// A lingering close's bounds (Conn.CloseLinger): nginx's
	// lingering_timeout (its wait for more input) and, for the bytes,
	// four times net/http's maxPostHandlerReadBytes (what it discards of
	// a body left unread before it closes instead); docs/decisions/0028.
	DefaultLingerInput      = 5 * time.Second
	DefaultLingerInputBytes = 1 << 20
	DefaultMaxOutbound      = 4 << 20
	DefaultTurnBudget       = 64 << 10
	DefaultMaxPosted        = 1 << 16
	DefaultMaxGo            = 1024
	DefaultFileWorkers      = 4
	// DefaultPacketBufferSize takes the largest UDP datagram (65,507
	// bytes over IPv4, 65,527 over IPv6).
	DefaultPacketBufferSize  = 64 << 10
	DefaultPacketBufferCount = 256
	DefaultMaxPacketQueue    = 1024
)

const (
	acceptBackoffMin = 10 * time.Millisecond
	acceptBackoffMax = time.Second
	acceptQuiet      = time.Second // without accept failures ends an episode
)

// withDefaults applies the rule: every default filled in, and zero (never
// negative) meaning none from here on. RingFlags and UringFeatures always
// point at their values.
func (c Config) withDefaults() Config {
	if c.RingEntries == 0 {
		c.RingEntries = DefaultRingEntries
	}
	flags := DefaultRingFlags
	if c.RingFlags != nil {
		flags = *c.RingFlags
	}
	c.RingFlags = &flags
	feats := DefaultUringFeatures
	if c.UringFeatures != nil {
		feats = *c.UringFeatures
	}
	c.UringFeatures = &feats
	if c.NAPIBusyPoll <= 0 {
		c.NAPIBusyPoll = DefaultNAPIBusyPoll
	}
	if c.ZeroCopySendMin <= 0 {
		c.ZeroCopySendMin = DefaultZeroCopySendMin
	}
	if c.BufferSize == 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.BufferCount == 0 {
		c.BufferCount = DefaultBufferCount
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.MaxConns = max(c.MaxConns, 0)
	c.IdleTimeout = max(c.IdleTimeout, 0)
	c.MaxLifetime = max(c.MaxLifetime, 0)
	c.WaitBatch = max(c.WaitBatch, 0)
	c.WaitMin = limit.OrDefault(c.WaitMin, DefaultWaitMin)
	c.MaxOutbound = limit.OrDefault(c.MaxOutbound, DefaultMaxOutbound)
	switch {
	case c.OutboundLowWater == 0 || c.OutboundLowWater > c.MaxOutbound:
		c.OutboundLowWater = c.MaxOutbound / 4
	case c.OutboundLowWater < 0:
		c.OutboundLowWater = 0
	}
	c.TurnBudget = limit.OrDefault(c.TurnBudget, DefaultTurnBudget)
	c.MaxPosted = limit.OrDefault(c.MaxPosted, DefaultMaxPosted)
	c.MaxGo = limit.OrDefault(c.MaxGo, DefaultMaxGo)
	c.MaxHeldCalls = limit.OrDefault(c.MaxHeldCalls, DefaultMaxHeldCalls)
	if c.PacketBufferSize == 0 {
		c.PacketBufferSize = DefaultPacketBufferSize
	}
	if c.PacketBufferCount == 0 {
		c.PacketBufferCount = DefaultPacketBufferCount
	}
	c.MaxPacketQueue = limit.OrDefault(c.MaxPacketQueue, DefaultMaxPacketQueue)
	if c.MaxPacketQueue == 0 {
		c.MaxPacketQueue = int(^uint(0) >> 1)
	}
	c.WriteTimeout = limit.OrDefault(c.WriteTimeout, DefaultWriteTimeout)
	c.Linger = limit.OrDefault(c.Linger, DefaultLinger)
	c.LingerInput = limit.OrDefault(c.LingerInput, DefaultLingerInput)
	c.LingerInputBytes = limit.OrDefault(c.LingerInputBytes, DefaultLingerInputBytes)
	c.ReturnAfterStorm = limit.OrDefault(c.ReturnAfterStorm, DefaultReturnAfterStorm)
	if c.FileWorkers <= 0 {
		c.FileWorkers = DefaultFileWorkers
	}
	return c
}

func (c Config) validate() error {
	if c.Backend < Auto || c.Backend > Epoll {
		return fmt.Errorf("config: unknown backend %d", int(c.Backend))
	}
	if c.BufferSize < 0 || c.BufferSize > 1<<24 {
		return fmt.Errorf("config: buffer size %d out of range (0 to 16 MiB)", c.BufferSize)
	}
	if n := c.BufferCount; n < 0 || n > 1<<15 || (n != 0 && n&(n-1) != 0) {
		return fmt.Errorf("config: buffer count %d is not a power of two up to 32768", n)
	}
	if c.OutboundPolicy < PauseReading || c.OutboundPolicy > DropWrites {
		return fmt.Errorf("config: unknown outbound policy %d", int(c.OutboundPolicy))
	}
	if c.PacketBufferSize < 0 || c.PacketBufferSize > 1<<20 {
		return fmt.Errorf("config: packet buffer size %d out of range (0 to 1 MiB)", c.PacketBufferSize)
	}
	if c.UDPGRO && c.PacketBufferSize != 0 && c.PacketBufferSize < DefaultPacketBufferSize {
		return fmt.Errorf("config: UDPGRO needs a packet buffer size of at least %d, not %d", DefaultPacketBufferSize, c.PacketBufferSize)
	}
	if n := c.PacketBufferCount; n < 0 || n > 1<<15 || (n != 0 && n&(n-1) != 0) {
		return fmt.Errorf("config: packet buffer count %d is not a power of two up to 32768", n)
	}
	if c.Backlog < 0 {
		return fmt.Errorf("config: negative backlog %d", c.Backlog)
	}
	for i, core := range c.Cores {
		if j := slices.Index(c.Cores[:i], core); j >= 0 {
			return fmt.Errorf("config: Cores lists cpu %d twice (entries %d and %d): one loop per CPU", core, j, i)
		}
	}
	return nil
}
