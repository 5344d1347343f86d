//go:build linux

package runtime

import (
	"fmt"
	"strings"
	"time"

	"github.com/percore/percore/ring"
)

// UringFeatures are the io_uring features beyond its opcodes that an
// io_uring loop uses where the kernel has them (ring.Probe answers for
// each; a kernel without one runs the loop as before, without it). See
// docs/decisions/0051 and docs/performance.md, "io_uring features, part 2",
// for what each saves and what it was measured to pay.
type UringFeatures uint32

const (
	// UringRegisteredRing registers the ring's descriptor with the kernel
	// (IORING_REGISTER_RING_FDS, 5.18+): every enter names the ring by
	// its index in the loop thread's table and skips the file lookup.
	UringRegisteredRing UringFeatures = 1 << iota
	// UringSkipSends sends without a send completion where the send
	// needs none (IOSQE_CQE_SKIP_SUCCESS, 5.17+, on a send that never
	// waits: ring.PrepareSendNoWait): a send that the socket takes whole
	// within the turn's enter posts nothing, and the loop learns it from
	// the enter having returned; one that finds the socket full posts
	// what it did, and the rest goes as an ordinary send. It saves the
	// one enter per round trip that only reaped a send's completion.
	// Dispatch accounts for these sends before any handler runs, so
	// Conn.Buffered and TryWrite see the queue as the kernel left it
	// (docs/decisions/0057). Not with SQPoll (the kernel's thread submits
	// after the enter). Off by default (DefaultUringFeatures says why).
	UringSkipSends
	// UringNAPI registers NAPI busy polling (IORING_REGISTER_NAPI, 6.9+,
	// and a kernel built with CONFIG_NET_RX_BUSY_POLL): while the loop
	// waits, the kernel polls the receive queues of its sockets' NICs for
	// up to Config.NAPIBusyPoll before it sleeps, which trades a core's
	// busy polling for the interrupt-to-wake-up latency of a quiet
	// connection. It pays only on a real NIC with a queue per loop
	// (scripts/tune-nic.sh); loopback has no NAPI context, and the
	// registration there polls nothing. Off by default. Where the kernel
	// refuses it, the loop runs without it (logged once).
	UringNAPI
	// UringDirectDescriptors accepts the connections of the loop's own
	// plain TCP listeners into the ring's fixed file table (multishot
	// accept with IORING_FILE_INDEX_ALLOC, 5.19+) and names them by their
	// slot (IOSQE_FIXED_FILE) in every receive, send, shutdown and close,
	// so that no operation looks the socket up in the process's
	// descriptor table and no accept or close changes that table. The
	// table holds the loop's admitted connections (Config.MaxConns, else
	// its share of RLIMIT_NOFILE; at most 2^20, 8 bytes of kernel memory
	// a slot), and the loop accepts no more than it holds. A real descriptor is made once, where one is needed
	// (Conn.Fd, LocalAddr and RemoteAddr, SendFile, a hand-over to a new
	// process: IORING_OP_FIXED_FD_INSTALL, 6.8+, which the probe wants).
	// Shared and TLS listeners, dials and adopted connections stay on
	// descriptors (docs/decisions/0066). Off by default: measured in
	// docs/performance.md, "io_uring features, part 4".
	UringDirectDescriptors
	// UringIncrementalBuffers registers the loop's receive buffers as an
	// incremental ring (IOU_PBUF_RING_INC, 6.12+): buffers of
	// IncrementalBufferSize, as many as hold a quarter of
	// BufferCount×BufferSize (32 by default), each consumed in part by
	// the receives of any connections, a receive taking only the bytes
	// that arrived (a handler is never given more than BufferSize at a
	// time); a buffer goes back to the ring once the kernel has filled it
	// and the loop holds no part of it (a receive being delivered, or one
	// held back for a later turn). Under large receives the loop keeps a
	// quarter of the plain ring's memory resident; its CPU per request
	// was the plain ring's within this host's noise. See
	// docs/decisions/0069 and docs/performance.md, "io_uring features,
	// part 6". Off by default.
	UringIncrementalBuffers
	// UringZeroCopySend sends a connection's queued bytes with zero copy
	// (IORING_OP_SEND_ZC, 6.0+, with its usage report, 6.2+) when one
	// send takes at least Config.ZeroCopySendMin of them, and datagrams
	// (or GSO batches) of that size with SENDMSG_ZC: the kernel
	// pins the pages instead of copying them into the socket, and posts
	// a notification once it is done with them, which may come after the
	// connection closed. The buffer stays the send's until then (neither
	// written, reused nor given back), and the loop does not exit before
	// every notification came (docs/decisions/0068), unless the stop is
	// forced (Close, or Shutdown past its context): a peer that keeps a
	// closed socket's bytes unacknowledged holds the notifications, so
	// the loop then exits and keeps those buffers, never reused, logged. A socket that cannot
	// (a Unix socket: -EOPNOTSUPP) sends those bytes and the rest of its
	// sends plainly, counted in Stats.ZeroCopyFallbacks. It pays only where
	// the device sends from the pages (a NIC with scatter-gather): on
	// loopback the kernel copies on delivery, as Stats.ZeroCopyCopied
	// shows. Off by default: measured in docs/performance.md, "io_uring
	// features, part 5".
	UringZeroCopySend
	// UringBundles arms each connection's multishot receive as a bundle
	// (IORING_RECVSEND_BUNDLE, 6.10+): one completion may fill several
	// provided buffers, in ring order, the last perhaps in part, and the
	// loop delivers each buffer as its own OnData in that order, exactly
	// as it delivers a receive of one buffer (the turn budget, a pause, a
	// close in the middle of a bundle hold back or drop the rest). It
	// saves completions where one receive takes more than a buffer: a
	// message larger than BufferSize, or a pipelined batch larger than
	// one buffer. Not with UringIncrementalBuffers (ring.BufRing.Bundle
	// reads a plain ring only: an incremental ring's completions are parts
	// of buffers, read with Received, and its 64 KiB buffers leave a
	// bundle little to merge): incremental buffers win, and the first
	// loop logs that it receives without bundles. Off by default: measured in docs/performance.md,
	// "io_uring features, part 8", and docs/decisions/0071. The loop
	// names a bundle's buffers by the ring's order, which the kernel
	// keeps (tested here on 6.18), but stable kernels 6.13.11 to 6.14.8
	// posted bundles out of order (liburing issues 1409 and 1411, fixed
	// in 6.14.9): there a bundle's bytes would be read from the wrong
	// buffers without an error, so leave it off on those. A completion
	// the loop's record refuses stops the loop (a kernel error).
	UringBundles
)

// DefaultUringFeatures are the features a loop uses unless
// Config.UringFeatures says otherwise: those measured to pay
// (docs/performance.md, "io_uring features, part 2" and "part 3").
// Skipped sends are correct (dispatch accounts for them before any handler
// runs: decision 0057) but not among them: in the A/B of part 3 they
// lowered examples/kv's CPU per request at -P 1 in every pair and raised
// the echo's at 50 connections in two pairs of three, so they stay a
// switch for request-response servers to measure.
const DefaultUringFeatures = UringRegisteredRing

var uringFeatureNames = []struct {
	f    UringFeatures
	name string
}{
	{UringRegisteredRing, "registered_ring"},
	{UringSkipSends, "skip_sends"},
	{UringNAPI, "napi"},
	{UringDirectDescriptors, "direct_descriptors"},
	{UringIncrementalBuffers, "incremental_buffers"},
	{UringZeroCopySend, "zero_copy_send"},
	{UringBundles, "bundles"},
}

// String lists the features by ParseUringFeatures' names, "none" for none.
func (f UringFeatures) String() string {
	if f == 0 {
		return "none"
	}
	var names []string
	for _, n := range uringFeatureNames {
		if f&n.f != 0 {
			names = append(names, n.name)
			f &^= n.f
		}
	}
	if f != 0 {
		names = append(names, fmt.Sprintf("%#x", uint32(f)))
	}
	return strings.Join(names, ",")
}

// ParseUringFeatures parses a comma-separated list of feature names
// (registered_ring, skip_sends, napi, direct_descriptors,
// incremental_buffers, zero_copy_send, bundles), case-insensitive; "none" is no features
// and "" or "default" is DefaultUringFeatures. Config.UringFeatures takes a
// pointer to the result.
func ParseUringFeatures(s string) (UringFeatures, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "default":
		return DefaultUringFeatures, nil
	case "none":
		return 0, nil
	}
	var f UringFeatures
next:
	for name := range strings.SplitSeq(s, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		for _, n := range uringFeatureNames {
			if n.name == name {
				f |= n.f
				continue next
			}
		}
		return 0, fmt.Errorf("unknown io_uring feature %q (want registered_ring, skip_sends, napi, direct_descriptors, incremental_buffers, zero_copy_send, bundles or none)", name)
	}
	return f, nil
}

// uringFeaturesFor returns the features of want that a loop uses with
// setup flags flags on a kernel whose probe answered s: each only where
// the kernel has it.
func uringFeaturesFor(want UringFeatures, flags ring.Flags, s *ring.Support) UringFeatures {
	var got UringFeatures
	if want&UringRegisteredRing != 0 && s.HasFeature(ring.RegisteredRing) {
		got |= UringRegisteredRing
	}
	if want&UringSkipSends != 0 && s.HasFeature(ring.CQESkip) && flags&ring.SQPoll == 0 {
		got |= UringSkipSends
	}
	if want&UringNAPI != 0 && s.HasFeature(ring.NAPI) {
		got |= UringNAPI
	}
	if want&UringDirectDescriptors != 0 && s.HasFeature(ring.DirectDescriptors) && s.HasFeature(ring.FixedFdInstall) {
		got |= UringDirectDescriptors
	}
	if want&UringIncrementalBuffers != 0 && s.HasFeature(ring.IncrementalBuffers) {
		got |= UringIncrementalBuffers
	}
	if want&UringZeroCopySend != 0 && s.HasFeature(ring.SendZC) {
		got |= UringZeroCopySend
	}
	if want&UringBundles != 0 && s.HasFeature(ring.Bundles) {
		got |= UringBundles
	}
	return got
}

// DefaultNAPIBusyPoll is the busy poll of UringNAPI when
// Config.NAPIBusyPoll is zero: the value the kernel's documentation
// suggests for net.core.busy_poll (Documentation/networking/napi.rst).
const DefaultNAPIBusyPoll = 50 * time.Microsecond

// registerNAPI registers NAPI busy polling on r for a loop that asked for
// it (UringNAPI), and reports whether it took; a refusal leaves the loop
// without it, logged by the first loop.
func (d *uringDriver) registerNAPI(r *ring.Ring) bool {
	err := r.RegisterNAPI(d.cfg.NAPIBusyPoll, false)
	if err != nil && d.id == 0 {
		d.log.Warn("percore: NAPI busy polling refused: the loops wait without it", "err", err)
	}
	return err == nil
}
