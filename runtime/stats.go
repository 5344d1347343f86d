//go:build linux

package runtime

import (
	"sync/atomic"
	"time"
)

// Stats are a loop's counters, or their sum over a runtime. The loop counts
// in plain fields and publishes them once per turn as one consistent
// snapshot; reading them is safe from any goroutine, and the figures of one
// Stats belong to the same moment (Accepts + Dials - Closes is the open
// connections that are not dials in progress).
type Stats struct {
	// Loops is the number of loops summed (1 for one loop).
	Loops int
	// Accepts and Dials count connections opened each way; Closes counts
	// those closed (a dial that fails is in neither); Open is how many are
	// open now, dials in progress included.
	Accepts, Dials, Closes, Open uint64
	// AcceptErrors counts accepts that failed and were retried after a
	// back-off: for lack of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM)
	// while a connection was waiting, or with any other error that is not
	// one connection's own. A loop at its descriptor limit with nobody
	// waiting counts nothing.
	AcceptErrors uint64
	// BytesIn and BytesOut count payload bytes received and sent.
	BytesIn, BytesOut uint64
	// Turns counts loop iterations; Completions counts kernel events
	// handled (io_uring completions, epoll events).
	Turns, Completions uint64
	// Syscalls counts the system calls the loop's thread made (on
	// io_uring nearly all are io_uring_enter; on epoll every read, write,
	// accept and epoll_wait); Waits counts those of them that waited for
	// the kernel (io_uring_enter with a wait, epoll_wait).
	Syscalls, Waits uint64
	// Posted and Timers count functions run from Post and timers.
	Posted, Timers uint64

	// Limits, each counted when it fires: accepting held at MaxConns;
	// connections closed for idling, for their lifetime, as slow
	// consumers; reads paused for backpressure; receives deferred to a
	// later turn by the turn budget; handler panics recovered.
	CapHolds, IdleTimeouts, LifetimeCloses, SlowConsumers uint64
	Pauses, Deferrals, Panics                             uint64
	// WriteTimeouts counts connections closed because their queued bytes
	// made no progress for WriteTimeout; LingerTimeouts, closing
	// connections aborted after Linger. LingerDiscarded counts the bytes
	// lingering closes read and dropped (Conn.CloseLinger).
	WriteTimeouts, LingerTimeouts, LingerDiscarded uint64
	// Paused is how many connections are paused for backpressure now.
	Paused uint64
	// PostRejects counts Posts refused at MaxPosted; GoRejects, Go calls
	// refused at MaxGo; GoDropped, continuations of Go that could not run
	// because the loop had stopped; GoRunning is how many Go goroutines
	// run now. (These four are written by other goroutines and read
	// beside the snapshot.)
	PostRejects, GoRejects, GoDropped, GoRunning uint64
	// PooledBytes is the size of the outbound buffers kept for reuse now;
	// MappedBytes, of the outbound buffers held as anonymous mappings now
	// (buffers of 16 KiB and more, in use or pooled). Both return towards
	// zero within seconds of a burst.
	PooledBytes, MappedBytes uint64
	// CQOverflows counts loop turns that found the io_uring completion
	// queue overflowed (nothing is lost: the kernel keeps the completions
	// and the next enter delivers them); a steady count says RingEntries
	// is too small for the load.
	CQOverflows uint64
	// CallsMade counts the cross-loop calls this loop made (Loop.Call);
	// CallsRun, the calls other loops made that it ran, and CallBatches
	// the batches they came in (one per caller per turn, each with one
	// wake-up). CallRejects counts the calls this loop refused because it
	// held Config.MaxHeldCalls for a target that was behind (their done
	// functions got ErrLoopBusy).
	CallsMade, CallsRun, CallBatches, CallRejects uint64
	// FileOps counts file operations handed to the kernel (a read or
	// write that goes on after a short result counts again); FilesOpen is
	// how many files are open now; FileBytesRead and FileBytesWritten
	// count their bytes; FileSyncs counts the fsyncs and fdatasyncs that
	// completed (also those linked to a write). FileOffloaded counts the
	// operations run on the epoll loop's file workers instead of the
	// ring. FileSendBytes counts bytes Conn.SendFile sent (splice,
	// sendfile or the read-and-send fallback), FileSendFallbacks the
	// sends that used the fallback.
	FileOps, FilesOpen, FileBytesRead, FileBytesWritten, FileSyncs uint64
	FileOffloaded, FileSendBytes, FileSendFallbacks                uint64
	// Datagrams: PacketsIn and PacketsOut count those received and sent
	// (their bytes are in BytesIn and BytesOut); PacketsTruncated, those
	// larger than Config.PacketBufferSize; PacketDrops, those WriteTo
	// dropped with the send queue full (Config.MaxPacketQueue);
	// PacketErrors, sends and receives the kernel failed (an ICMP error,
	// an unreachable destination) without stopping the socket;
	// PacketsLost, those the kernel dropped for want of room in a
	// socket's receive buffer (SO_RXQ_OVFL), as the next datagram
	// reports it. PacketsCoalesced counts the receives that carried
	// several datagrams of one sender at once (Config.UDPGRO); each of
	// their datagrams is in PacketsIn. PacketsSegmented counts the sends
	// that carried several datagrams at once (Config.UDPGSO); each of
	// their datagrams is in PacketsOut.
	PacketsIn, PacketsOut, PacketsTruncated, PacketDrops, PacketErrors, PacketsLost uint64
	PacketsCoalesced, PacketsSegmented                                              uint64
	// HandedOver counts connections of shared listeners (Unix, inherited)
	// this loop accepted and handed to another loop, to spread a burst
	// (the other loop counts them in Accepts).
	HandedOver uint64

	// Early-warning signals over the last window of about a second (the
	// maxima when summed over loops): the loop's lag, from the kernel
	// returning a batch of events to the last of them handled (p50, p99,
	// max), and the largest batch of posted functions drained at once.
	// Completions per turn is Completions/Turns.
	LagP50, LagP99, LagMax time.Duration
	PostedBatchMax         uint64
}

// stat indexes the loop's counters. Each one is named once more, in
// statTable: where it goes in Stats and how loops add up.
type stat int

const (
	sAccepts stat = iota
	sDials
	sCloses
	sOpen
	sAcceptErrors
	sBytesIn
	sBytesOut
	sTurns
	sCompletions
	sSyscalls
	sWaits
	sPosted
	sTimers
	sCapHolds
	sIdleTimeouts
	sLifetimeCloses
	sSlowConsumers
	sPauses
	sDeferrals
	sPanics
	sWriteTimeouts
	sLingerTimeouts
	sLingerDiscarded
	sPaused
	sPostRejects
	sGoRejects
	sGoDropped
	sGoRunning
	sPooledBytes
	sMappedBytes
	sCQOverflows
	sCallsMade
	sCallsRun
	sCallBatches
	sCallRejects
	sFileOps
	sFilesOpen
	sFileBytesRead
	sFileBytesWritten
	sFileSyncs
	sFileOffloaded
	sFileSendBytes
	sFileSendFallbacks
	sPacketsIn
	sPacketsOut
	sPacketsTruncated
	sPacketDrops
	sPacketErrors
	sPacketsLost
	sPacketsCoalesced
	sPacketsSegmented
	sHandedOver
	sLagP50
	sLagP99
	sLagMax
	sPostedBatchMax
	numStats
)

// statField says where a counter goes in Stats (a count, or a duration)
// and whether loops add up by sum or by maximum.
type statField struct {
	n   func(*Stats) *uint64
	d   func(*Stats) *time.Duration
	max bool
}

var statTable = [numStats]statField{
	sAccepts:          {n: func(s *Stats) *uint64 { return &s.Accepts }},
	sDials:            {n: func(s *Stats) *uint64 { return &s.Dials }},
	sCloses:           {n: func(s *Stats) *uint64 { return &s.Closes }},
	sOpen:             {n: func(s *Stats) *uint64 { return &s.Open }},
	sAcceptErrors:     {n: func(s *Stats) *uint64 { return &s.AcceptErrors }},
	sBytesIn:          {n: func(s *Stats) *uint64 { return &s.BytesIn }},
	sBytesOut:         {n: func(s *Stats) *uint64 { return &s.BytesOut }},
	sTurns:            {n: func(s *Stats) *uint64 { return &s.Turns }},
	sCompletions:      {n: func(s *Stats) *uint64 { return &s.Completions }},
	sSyscalls:         {n: func(s *Stats) *uint64 { return &s.Syscalls }},
	sWaits:            {n: func(s *Stats) *uint64 { return &s.Waits }},
	sPosted:           {n: func(s *Stats) *uint64 { return &s.Posted }},
	sTimers:           {n: func(s *Stats) *uint64 { return &s.Timers }},
	sCapHolds:         {n: func(s *Stats) *uint64 { return &s.CapHolds }},
	sIdleTimeouts:     {n: func(s *Stats) *uint64 { return &s.IdleTimeouts }},
	sLifetimeCloses:   {n: func(s *Stats) *uint64 { return &s.LifetimeCloses }},
	sSlowConsumers:    {n: func(s *Stats) *uint64 { return &s.SlowConsumers }},
	sPauses:           {n: func(s *Stats) *uint64 { return &s.Pauses }},
	sDeferrals:        {n: func(s *Stats) *uint64 { return &s.Deferrals }},
	sPanics:           {n: func(s *Stats) *uint64 { return &s.Panics }},
	sWriteTimeouts:    {n: func(s *Stats) *uint64 { return &s.WriteTimeouts }},
	sLingerTimeouts:   {n: func(s *Stats) *uint64 { return &s.LingerTimeouts }},
	sLingerDiscarded:  {n: func(s *Stats) *uint64 { return &s.LingerDiscarded }},
	sPaused:           {n: func(s *Stats) *uint64 { return &s.Paused }},
	sPostRejects:      {n: func(s *Stats) *uint64 { return &s.PostRejects }},
	sGoRejects:        {n: func(s *Stats) *uint64 { return &s.GoRejects }},
	sGoDropped:        {n: func(s *Stats) *uint64 { return &s.GoDropped }},
	sGoRunning:        {n: func(s *Stats) *uint64 { return &s.GoRunning }},
	sPooledBytes:      {n: func(s *Stats) *uint64 { return &s.PooledBytes }},
	sMappedBytes:      {n: func(s *Stats) *uint64 { return &s.MappedBytes }},
	sCQOverflows:      {n: func(s *Stats) *uint64 { return &s.CQOverflows }},
	sCallsMade:        {n: func(s *Stats) *uint64 { return &s.CallsMade }},
	sCallsRun:         {n: func(s *Stats) *uint64 { return &s.CallsRun }},
	sCallBatches:      {n: func(s *Stats) *uint64 { return &s.CallBatches }},
	sCallRejects:      {n: func(s *Stats) *uint64 { return &s.CallRejects }},
	sPacketsIn:        {n: func(s *Stats) *uint64 { return &s.PacketsIn }},
	sPacketsOut:       {n: func(s *Stats) *uint64 { return &s.PacketsOut }},
	sPacketsTruncated: {n: func(s *Stats) *uint64 { return &s.PacketsTruncated }},
	sPacketDrops:      {n: func(s *Stats) *uint64 { return &s.PacketDrops }},
	sPacketErrors:     {n: func(s *Stats) *uint64 { return &s.PacketErrors }},
	sPacketsLost:      {n: func(s *Stats) *uint64 { return &s.PacketsLost }},
	sPacketsCoalesced: {n: func(s *Stats) *uint64 { return &s.PacketsCoalesced }},
	sPacketsSegmented: {n: func(s *Stats) *uint64 { return &s.PacketsSegmented }},
	sHandedOver:       {n: func(s *Stats) *uint64 { return &s.HandedOver }},

	// The file counters (file.go).
	sFileOps:           {n: func(s *Stats) *uint64 { return &s.FileOps }},
	sFilesOpen:         {n: func(s *Stats) *uint64 { return &s.FilesOpen }},
	sFileBytesRead:     {n: func(s *Stats) *uint64 { return &s.FileBytesRead }},
	sFileBytesWritten:  {n: func(s *Stats) *uint64 { return &s.FileBytesWritten }},
	sFileSyncs:         {n: func(s *Stats) *uint64 { return &s.FileSyncs }},
	sFileOffloaded:     {n: func(s *Stats) *uint64 { return &s.FileOffloaded }},
	sFileSendBytes:     {n: func(s *Stats) *uint64 { return &s.FileSendBytes }},
	sFileSendFallbacks: {n: func(s *Stats) *uint64 { return &s.FileSendFallbacks }},

	sLagP50:         {d: func(s *Stats) *time.Duration { return &s.LagP50 }, max: true},
	sLagP99:         {d: func(s *Stats) *time.Duration { return &s.LagP99 }, max: true},
	sLagMax:         {d: func(s *Stats) *time.Duration { return &s.LagMax }, max: true},
	sPostedBatchMax: {n: func(s *Stats) *uint64 { return &s.PostedBatchMax }, max: true},
}

// get returns counter i of s.
func (s *Stats) get(i stat) uint64 {
	if f := statTable[i]; f.n != nil {
		return *f.n(s)
	}
	return uint64(*statTable[i].d(s))
}

// set stores v as counter i of s.
func (s *Stats) set(i stat, v uint64) {
	if f := statTable[i]; f.n != nil {
		*f.n(s) = v
		return
	}
	*statTable[i].d(s) = time.Duration(v)
}

// Add returns the sum of s and o (the maximum, for the signals).
func (s Stats) Add(o Stats) Stats {
	s.Loops += o.Loops
	for i := range numStats {
		a, b := s.get(i), o.get(i)
		if statTable[i].max {
			s.set(i, max(a, b))
		} else {
			s.set(i, a+b)
		}
	}
	return s
}

// published is a loop's snapshot, written by the loop once per turn and
// read by Stats from any goroutine. seq is odd while the loop writes it: a
// reader that sees an odd or changed seq reads again (a sequence lock), so
// a snapshot never mixes two turns.
type published struct {
	seq  atomic.Uint64
	vals [numStats]atomic.Uint64
	last [numStats]uint64 // what vals holds, for the loop alone
}

// publish fills in the gauges and publishes the counters.
func (l *Loop) publish() {
	c := &l.cnt
	c[sOpen] = uint64(l.open)
	c[sPaused] = uint64(l.paused)
	c[sSyscalls] = l.d.syscalls()
	c[sWaits] = l.d.waits()
	c[sPooledBytes] = uint64(l.bufs.pooledBytes)
	c[sMappedBytes] = uint64(l.bufs.mappedBytes)
	if l.now.Sub(l.lagWindow) >= signalWindow {
		c[sLagP50] = uint64(l.lag.Quantile(0.5))
		c[sLagP99] = uint64(l.lag.Quantile(0.99))
		c[sLagMax] = uint64(l.lag.Max())
		c[sPostedBatchMax] = uint64(l.postedBatch)
		l.lag.Reset()
		l.postedBatch = 0
		l.lagWindow = l.now
	}
	p := &l.pub
	p.seq.Add(1)
	for i := range c {
		if c[i] != p.last[i] { // a busy turn changes a handful
			p.vals[i].Store(c[i])
			p.last[i] = c[i]
		}
	}
	p.seq.Add(1)
}

// signalWindow is how often the loop publishes its lag percentiles.
const signalWindow = time.Second

// Stats returns the loop's counters as of its last turn. It is safe for
// concurrent use.
func (l *Loop) Stats() Stats {
	s := Stats{Loops: 1}
	p := &l.pub
	for {
		seq := p.seq.Load()
		if seq&1 != 0 {
			continue // the loop is publishing: a few stores
		}
		for i := range numStats {
			s.set(i, p.vals[i].Load())
		}
		if p.seq.Load() == seq {
			break
		}
	}
	s.PostRejects = l.postRejects.Load()
	s.GoRejects = l.goRejects.Load()
	s.GoDropped = l.goDropped.Load()
	s.GoRunning = uint64(max(l.goRunning.Load(), 0))
	return s
}
