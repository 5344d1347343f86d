package main

// The one definition of percore's counters. Each value is written here
// once: its Go field and doc, how it behaves (Kind) and in what unit, and
// the Prometheus metric it becomes. `go generate ./...` turns the tables
// into the Stats struct, its index constants, its merge and its loading
// from the published values (runtime/stats_gen.go), the pool's State and
// Statistics the same way (runtime/pool/stats_gen.go), and the Prometheus
// tables of both (runtime/metrics/stats_gen.go). TestGeneratedFilesAreCurrent
// fails when a generated file is not what this table makes.
//
// To add a counter: add a Field below (at the end of its group; the order
// is the struct's, the index's and the scrape's), run go generate ./...,
// and count it on the loop with l.cnt[sName]++ (the pool: a field of
// Local.st or a term of Local.State).

// loopTable is runtime.Stats: a loop's counters, published once per turn.
var loopTable = Table{
	Target:     "runtime",
	Package:    "runtime",
	ImportPath: "github.com/percore/percore/runtime",
	Linux:      true,
	Index:      "stat",
	IndexDoc: "stat indexes a loop's counters (Loop.cnt, what it counts in) and their " +
		"publication (published.vals).",
	MetricVar:      "statMetrics",
	MetricType:     "statMetric",
	NotExportedVar: "statsNotExported",
	Structs: []Struct{{
		Name:   "Stats",
		Var:    "s",
		GoType: "uint64",
		Doc: "Stats are a loop's counters, or their sum over a runtime. The loop counts in " +
			"plain fields and publishes them once per turn as one consistent snapshot; " +
			"reading them is safe from any goroutine, and the figures of one Stats belong " +
			"to the same moment (Accepts + Adopted + Dials - Closes is the open connections that are " +
			"not dials in progress). Add sums them, except the signals over a window, " +
			"which take the maximum.\n\n" +
			"The fields and their metrics are defined once, in internal/gen/stats/table.go " +
			"(this struct is generated from it); the doc of each field names its metric " +
			"in package runtime/metrics.",
	}},
	Fields: []Field{
		{Name: "Loops", Kind: Gauge, GoType: "int", Unpublished: true,
			Doc:      "Loops is the number of loops summed (1 for one loop).",
			NoMetric: "always 1 for one loop's Stats; count(percore_loop_info) counts the loops"},

		{Name: "Accepts", Kind: Counter, Metric: "accepts_total",
			Doc:  "Accepts counts the connections the loop accepted.",
			Help: "Connections the loop accepted."},
		{Name: "Dials", Kind: Counter, Metric: "dials_total",
			Doc:  "Dials counts the connections the loop dialed (a dial that fails is not counted).",
			Help: "Connections the loop dialed (a dial that failed is not counted)."},
		{Name: "Closes", Kind: Counter, Metric: "closes_total",
			Doc:  "Closes counts the connections closed, accepted and dialed, for any reason.",
			Help: "Connections the loop closed, accepted and dialed, for any reason."},
		{Name: "Open", Kind: Gauge, Metric: "connections_open",
			Doc:  "Open is how many connections are open now, dials in progress included.",
			Help: "Connections open on the loop now, dials in progress included."},
		{Name: "AcceptErrors", Kind: Counter, Metric: "accept_errors_total",
			Doc: "AcceptErrors counts the accepts that failed and were retried after a back-off: " +
				"for lack of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM) while a connection was " +
				"waiting, or with any other error that is not one connection's own. A loop at " +
				"its descriptor limit with nobody waiting counts nothing.",
			Help: "Accepts that failed and were retried after a back-off (descriptor or memory " +
				"shortage while a connection waited, or an error that is not one connection's own)."},
		{Name: "BytesIn", Kind: Counter, Unit: Bytes, Metric: "received_bytes_total",
			Doc:  "BytesIn counts the payload bytes received, on connections and in datagrams.",
			Help: "Payload bytes the loop received."},
		{Name: "BytesOut", Kind: Counter, Unit: Bytes, Metric: "sent_bytes_total",
			Doc:  "BytesOut counts the payload bytes sent, on connections and in datagrams.",
			Help: "Payload bytes the loop sent."},
		{Name: "Turns", Kind: Counter, Metric: "loop_turns_total",
			Doc:  "Turns counts the loop's iterations.",
			Help: "Loop iterations: one kernel wait and the batch of events it returned."},
		{Name: "Completions", Kind: Counter, Metric: "loop_completions_total",
			Doc: "Completions counts the kernel events handled (io_uring completions, epoll " +
				"events); Completions/Turns is the events per turn.",
			Help: "Kernel events the loop handled (io_uring completions, epoll events)."},
		{Name: "Syscalls", Kind: Counter, Metric: "loop_syscalls_total",
			Doc: "Syscalls counts the system calls the loop's thread made (on io_uring nearly " +
				"all are io_uring_enter; on epoll every read, write, accept and epoll_wait).",
			Help: "System calls the loop's thread made (on io_uring nearly all io_uring_enter; " +
				"on epoll every read, write, accept and epoll_wait)."},
		{Name: "Waits", Kind: Counter, Metric: "loop_waits_total",
			Doc: "Waits counts those of the Syscalls that waited for the kernel (io_uring_enter " +
				"with a wait, epoll_wait).",
			Help: "System calls of the loop that waited for the kernel (io_uring_enter with a " +
				"wait, epoll_wait)."},
		{Name: "Posted", Kind: Counter, Metric: "loop_posted_total",
			Doc:  "Posted counts the functions run from Loop.Post.",
			Help: "Functions run on the loop from Loop.Post."},
		{Name: "Timers", Kind: Counter, Metric: "loop_timers_total",
			Doc:  "Timers counts the timer functions run.",
			Help: "Timer functions run on the loop."},

		// Limits, each counted when it fires.
		{Name: "CapHolds", Kind: Counter, Metric: "accept_cap_holds_total",
			Doc:  "CapHolds counts the times accepting was held at MaxConns.",
			Help: "Times the loop held accepting because it had MaxConns connections."},
		{Name: "IdleTimeouts", Kind: Counter, Metric: "idle_timeouts_total",
			Doc:  "IdleTimeouts counts the connections closed for idling past IdleTimeout.",
			Help: "Connections closed for being idle longer than IdleTimeout."},
		{Name: "LifetimeCloses", Kind: Counter, Metric: "lifetime_closes_total",
			Doc:  "LifetimeCloses counts the connections closed at MaxLifetime.",
			Help: "Connections closed for reaching MaxLifetime."},
		{Name: "SlowConsumers", Kind: Counter, Metric: "slow_consumers_total",
			Doc: "SlowConsumers counts the connections closed as slow consumers: their peer " +
				"did not read and the outbound cap was reached.",
			Help: "Connections closed because their peer did not read their replies (the " +
				"outbound cap was reached)."},
		{Name: "WritesRefused", Kind: Counter, Metric: "writes_refused_total",
			Doc: "WritesRefused counts the writes refused at the outbound cap (Conn.TryWrite, " +
				"and every write under the DropWrites policy): nothing of them was queued.",
			Help: "Writes refused because the connection's outbound queue was at its cap " +
				"(the message was dropped for that connection)."},
		{Name: "Pauses", Kind: Counter, Metric: "read_pauses_total",
			Doc:  "Pauses counts the times a connection's reads were paused for backpressure.",
			Help: "Times a connection's reads were paused for outbound backpressure."},
		{Name: "Deferrals", Kind: Counter, Metric: "receive_deferrals_total",
			Doc:  "Deferrals counts the receives deferred to a later turn by the turn budget.",
			Help: "Receives deferred to a later turn by the per-turn fairness budget."},
		{Name: "Panics", Kind: Counter, Metric: "handler_panics_total",
			Doc:  "Panics counts the handler panics recovered (the connection was closed).",
			Help: "Handler panics the loop recovered from (the connection was closed)."},
		{Name: "WriteTimeouts", Kind: Counter, Metric: "write_timeouts_total",
			Doc: "WriteTimeouts counts the connections closed because their queued bytes made " +
				"no progress for WriteTimeout.",
			Help: "Connections closed because their queued bytes made no progress for WriteTimeout."},
		{Name: "LingerTimeouts", Kind: Counter, Metric: "linger_timeouts_total",
			Doc:  "LingerTimeouts counts the closing connections aborted after Linger.",
			Help: "Closing connections aborted after Linger with bytes still unsent."},
		{Name: "LingerDiscarded", Kind: Counter, Unit: Bytes, Metric: "linger_discarded_bytes_total",
			Doc:  "LingerDiscarded counts the bytes lingering closes (Conn.CloseLinger) read and dropped.",
			Help: "Bytes lingering closes (Conn.CloseLinger) read and dropped."},
		{Name: "Paused", Kind: Gauge, Metric: "connections_paused",
			Doc:  "Paused is how many connections are paused for backpressure now.",
			Help: "Connections whose reads are paused for backpressure now."},

		// Written by other goroutines, and read beside the snapshot
		// (Loop.Stats): their published values stay zero.
		{Name: "PostRejects", Kind: Counter, Metric: "post_rejects_total",
			Doc: "PostRejects counts the Posts refused at MaxPosted. It and GoRejects, GoDropped " +
				"and GoRunning are written by other goroutines and read beside the snapshot.",
			Help: "Loop.Post calls refused because MaxPosted functions were queued."},
		{Name: "GoRejects", Kind: Counter, Metric: "go_rejects_total",
			Doc:  "GoRejects counts the Go calls refused at MaxGo.",
			Help: "Loop.Go calls refused because MaxGo goroutines were running."},
		{Name: "GoDropped", Kind: Counter, Metric: "go_dropped_total",
			Doc: "GoDropped counts the continuations of Go that could not run because the loop " +
				"had stopped.",
			Help: "Continuations of Loop.Go that could not run because the loop had stopped."},
		{Name: "GoRunning", Kind: Gauge, Metric: "go_running",
			Doc:  "GoRunning is how many Go goroutines run now.",
			Help: "Loop.Go goroutines running now."},

		{Name: "PooledBytes", Kind: Gauge, Unit: Bytes, Metric: "outbound_pooled_bytes",
			Doc: "PooledBytes is the size of the outbound buffers kept for reuse now; it returns " +
				"towards zero within seconds of a burst.",
			Help: "Size of the outbound buffers the loop keeps for reuse now."},
		{Name: "MappedBytes", Kind: Gauge, Unit: Bytes, Metric: "outbound_mapped_bytes",
			Doc: "MappedBytes is the size of the outbound buffers held as anonymous mappings now " +
				"(buffers of 16 KiB and more, in use or pooled); it returns towards zero within " +
				"seconds of a burst.",
			Help: "Size of the outbound buffers held as anonymous mappings now (16 KiB and " +
				"larger, in use or pooled)."},
		{Name: "CQOverflows", Kind: Counter, Metric: "cq_overflows_total",
			Doc: "CQOverflows counts the loop turns that found the io_uring completion queue " +
				"overflowed (nothing is lost: the kernel keeps the completions and the next " +
				"enter delivers them); a steady count says RingEntries is too small for the load.",
			Help: "Loop turns that found the io_uring completion queue overflowed (nothing is " +
				"lost; a steady rate says RingEntries is too small)."},
		{Name: "ZeroCopySends", Kind: Counter, Metric: "zero_copy_sends_total",
			Doc: "ZeroCopySends counts the sends an io_uring loop made with zero copy " +
				"(UringZeroCopySend, at least Config.ZeroCopySendMin bytes).",
			Help: "Sends made with zero copy (io_uring SEND_ZC)."},
		{Name: "ZeroCopyCopied", Kind: Counter, Metric: "zero_copy_copied_total",
			Doc: "ZeroCopyCopied counts the zero-copy sends whose notification said the kernel " +
				"copied the data after all (loopback always does, as does a device without " +
				"scatter-gather): close to ZeroCopySends, the feature does not pay on this path.",
			Help: "Zero-copy sends the kernel copied after all (loopback, no scatter-gather)."},
		{Name: "ZeroCopyFallbacks", Kind: Counter, Metric: "zero_copy_fallbacks_total",
			Doc: "ZeroCopyFallbacks counts the connections whose socket refused a zero-copy send " +
				"(-EOPNOTSUPP: a Unix socket); the bytes went as a plain send, and so do the " +
				"connection's later sends.",
			Help: "Connections whose socket refused a zero-copy send (sent plainly instead)."},
		{Name: "Bundles", Kind: Counter, Metric: "recv_bundles_total",
			Doc: "Bundles counts the receive completions that filled more than one provided " +
				"buffer (UringBundles); BundleBuffers/Bundles is the buffers such a completion " +
				"filled on average.",
			Help: "Receive completions that filled more than one provided buffer (io_uring bundles)."},
		{Name: "BundleBuffers", Kind: Counter, Metric: "recv_bundle_buffers_total",
			Doc:  "BundleBuffers counts the provided buffers that the completions counted in Bundles filled.",
			Help: "Provided buffers filled by receive completions of more than one buffer (io_uring bundles)."},

		// Cross-loop calls (call.go).
		{Name: "CallsMade", Kind: Counter, Metric: "loop_calls_made_total",
			Doc:  "CallsMade counts the cross-loop calls this loop made (Loop.Call).",
			Help: "Cross-loop calls this loop made (Loop.Call)."},
		{Name: "CallsRun", Kind: Counter, Metric: "loop_calls_run_total",
			Doc:  "CallsRun counts the calls other loops made that this loop ran.",
			Help: "Cross-loop calls other loops made that this loop ran."},
		{Name: "CallBatches", Kind: Counter, Metric: "loop_call_batches_total",
			Doc: "CallBatches counts the batches the CallsRun came in (one per caller per turn, " +
				"each with one wake-up).",
			Help: "Batches the cross-loop calls this loop ran came in: one per caller per turn, " +
				"each with one wake-up."},
		{Name: "CallRejects", Kind: Counter, Metric: "loop_call_rejects_total",
			Doc: "CallRejects counts the calls this loop refused because it held " +
				"Config.MaxHeldCalls for a target that was behind (their done functions got " +
				"ErrLoopBusy).",
			Help: "Cross-loop calls this loop refused with ErrLoopBusy: it held MaxHeldCalls " +
				"for a target that was behind."},

		// Files (file.go, sendfile.go).
		{Name: "FileOps", Kind: Counter, Metric: "file_ops_total",
			Doc: "FileOps counts the file operations handed to the kernel or the file workers (a " +
				"read or write that goes on after a short result counts again).",
			Help: "File operations handed to the kernel or the file workers."},
		{Name: "FilesOpen", Kind: Gauge, Metric: "files_open",
			Doc:  "FilesOpen is how many files are open now.",
			Help: "Files open on the loop now."},
		{Name: "FileBytesRead", Kind: Counter, Unit: Bytes, Metric: "file_read_bytes_total",
			Doc:  "FileBytesRead counts the bytes read from files.",
			Help: "Bytes read from files."},
		{Name: "FileBytesWritten", Kind: Counter, Unit: Bytes, Metric: "file_written_bytes_total",
			Doc:  "FileBytesWritten counts the bytes written to files.",
			Help: "Bytes written to files."},
		{Name: "FileSyncs", Kind: Counter, Metric: "file_syncs_total",
			Doc: "FileSyncs counts the fsyncs and fdatasyncs that completed (also those linked " +
				"to a write).",
			Help: "fsyncs and fdatasyncs completed (with those linked to a write)."},
		{Name: "FileOffloaded", Kind: Counter, Metric: "file_offloaded_total",
			Doc: "FileOffloaded counts the file operations run on the loop's file workers instead " +
				"of the ring (epoll, or io_uring without the opcodes).",
			Help: "File operations run on the loop's file worker threads (epoll, or io_uring " +
				"without the opcodes)."},
		{Name: "FileSendBytes", Kind: Counter, Unit: Bytes, Metric: "file_send_bytes_total",
			Doc: "FileSendBytes counts the bytes Conn.SendFile sent (splice, sendfile or the " +
				"read-and-send fallback).",
			Help: "Bytes Conn.SendFile sent."},
		{Name: "FileSendFallbacks", Kind: Counter, Metric: "file_send_fallbacks_total",
			Doc:  "FileSendFallbacks counts the file sends that used the read-and-send fallback.",
			Help: "File sends that read and sent instead of splice or sendfile."},

		// Datagrams (packet.go); their bytes are in BytesIn and BytesOut.
		{Name: "PacketsIn", Kind: Counter, Metric: "loop_packets_received_total",
			Doc:  "PacketsIn counts the datagrams received.",
			Help: "Datagrams received on the loop's UDP sockets."},
		{Name: "PacketsOut", Kind: Counter, Metric: "loop_packets_sent_total",
			Doc:  "PacketsOut counts the datagrams sent.",
			Help: "Datagrams the kernel took from the loop's UDP sockets."},
		{Name: "PacketsTruncated", Kind: Counter, Metric: "loop_packets_truncated_total",
			Doc:  "PacketsTruncated counts the datagrams larger than Config.PacketBufferSize.",
			Help: "Datagrams larger than the packet buffer size, truncated by the kernel."},
		{Name: "PacketDrops", Kind: Counter, Metric: "loop_packet_send_drops_total",
			Doc: "PacketDrops counts the datagrams WriteTo dropped with the send queue full " +
				"(Config.MaxPacketQueue).",
			Help: "Datagrams dropped because the send queue (MaxPacketQueue) was full."},
		{Name: "PacketErrors", Kind: Counter, Metric: "loop_packet_errors_total",
			Doc: "PacketErrors counts the sends and receives the kernel failed (an ICMP error, " +
				"an unreachable destination) without stopping the socket.",
			Help: "Datagram sends and receives the kernel failed (ICMP errors, unreachable " +
				"destinations); the socket goes on."},
		{Name: "PacketsLost", Kind: Counter, Metric: "loop_packets_lost_total",
			Doc: "PacketsLost counts the datagrams the kernel dropped for want of room in a " +
				"socket's receive buffer (SO_RXQ_OVFL), as the next datagram reports it.",
			Help: "Datagrams the kernel dropped for want of room in a socket's receive buffer " +
				"(SO_RXQ_OVFL)."},
		{Name: "PacketsCoalesced", Kind: Counter, Metric: "loop_packets_coalesced_total",
			Doc: "PacketsCoalesced counts the receives that carried several datagrams of one " +
				"sender at once (Config.UDPGRO); each of their datagrams is in PacketsIn.",
			Help: "Receives that carried several datagrams of one sender at once (UDP_GRO)."},
		{Name: "PacketsSegmented", Kind: Counter, Metric: "loop_packets_segmented_total",
			Doc: "PacketsSegmented counts the sends that carried several datagrams at once " +
				"(Config.UDPGSO); each of their datagrams is in PacketsOut.",
			Help: "Sends that carried several datagrams to one destination at once (UDP_SEGMENT)."},
		{Name: "HandedOver", Kind: Counter, Metric: "loop_connections_handed_over_total",
			Doc: "HandedOver counts the connections of shared listeners (Unix, inherited) this " +
				"loop accepted and handed to another loop, to spread a burst (the other loop " +
				"counts them in Accepts).",
			Help: "Connections of shared listeners (Unix, inherited) this loop accepted and " +
				"handed to another loop."},
		{Name: "TLSHandshakes", Kind: Counter, Metric: "tls_handshakes_total",
			Doc: "TLSHandshakes counts the TLS handshakes that succeeded, of accepted connections " +
				"(tls:// listeners) and dials (Loop.DialTLS).",
			Help: "TLS handshakes that succeeded, accepted and dialed."},
		{Name: "TLSHandshakeErrors", Kind: Counter, Metric: "tls_handshake_errors_total",
			Doc: "TLSHandshakeErrors counts the TLS handshakes that failed, other than by their " +
				"timeout: an alert sent or received (garbage instead of a ClientHello, a bad " +
				"certificate), the peer gone, the handshake pool full.",
			Help: "TLS handshakes that failed, other than by their timeout."},
		{Name: "TLSHandshakeTimeouts", Kind: Counter, Metric: "tls_handshake_timeouts_total",
			Doc: "TLSHandshakeTimeouts counts the TLS handshakes closed at the handshake timeout " +
				"(Config.TLSPool.Timeout).",
			Help: "TLS handshakes closed at the handshake timeout."},
		{Name: "TLSHandshaking", Kind: Gauge, Metric: "tls_handshakes_in_flight",
			Doc: "TLSHandshaking is how many of the loop's connections are in their TLS handshake " +
				"now (running on the handshake pool or waiting for it).",
			Help: "Connections of the loop in their TLS handshake now."},

		// The restart's hand-over of connections to a new process
		// (Runtime.HandOver, Runtime.Adopt; docs/decisions/0054).
		{Name: "HandedOff", Kind: Counter, Metric: "handoff_connections_total",
			Doc: "HandedOff counts the connections this loop handed to a new process " +
				"(Runtime.HandOver) and that process took.",
			Help: "Connections handed to a new process at a restart, and taken by it."},
		{Name: "HandoffDeclined", Kind: Counter, Metric: "handoff_declined_total",
			Doc: "HandoffDeclined counts the connections a hand-over closed the protocol's " +
				"way instead (OnShutdown, then a close once idle): declined by the handler " +
				"or the connection (Conn.DeclineHandover), or with a handler that has no " +
				"OnHandover.",
			Help: "Connections a restart's hand-over closed the protocol's way instead of handing them over."},
		{Name: "HandoffFailed", Kind: Counter, Metric: "handoff_failed_total",
			Doc: "HandoffFailed counts the connections of hand-over batches that failed (the " +
				"new process gone or out of descriptors): this loop kept them and closed " +
				"them the protocol's way.",
			Help: "Connections of restart hand-over batches that failed, closed the protocol's way."},
		{Name: "Adopted", Kind: Counter, Metric: "adopted_connections_total",
			Doc: "Adopted counts the connections this loop took over from the process it " +
				"replaced (Runtime.Adopt).",
			Help: "Connections taken over from the process this one replaced."},

		// Early-warning signals over the last window of about a second.
		{Name: "LagP50", Kind: Max, Unit: Seconds, Metric: "loop_lag_p50_seconds",
			Doc: "LagP50 is the median loop lag over the last window of about a second: from " +
				"the kernel returning a batch of events to the last of them handled.",
			Help: "Median loop lag over the last window of about a second: from the kernel " +
				"returning a batch of events to the last of them handled."},
		{Name: "LagP99", Kind: Max, Unit: Seconds, Metric: "loop_lag_p99_seconds",
			Doc:  "LagP99 is the 99th percentile of the loop lag over the last window.",
			Help: "99th percentile of the loop lag over the last window of about a second."},
		{Name: "LagMax", Kind: Max, Unit: Seconds, Metric: "loop_lag_max_seconds",
			Doc:  "LagMax is the largest loop lag over the last window.",
			Help: "Largest loop lag over the last window of about a second."},
		{Name: "PostedBatchMax", Kind: Max, Metric: "loop_posted_batch_max",
			Doc:  "PostedBatchMax is the largest batch of posted functions drained at once over the last window.",
			Help: "Largest batch of posted functions the loop drained at once over the last window of about a second."},
	},
}

// poolTable is pool.State and pool.Statistics: a Local's numbers, published
// at the end of each turn of its loop.
var poolTable = Table{
	Target:         "pool",
	Package:        "pool",
	ImportPath:     "github.com/percore/percore/runtime/pool",
	Index:          "stat",
	IndexDoc:       "stat indexes a Local's published numbers (published.vals): State's and Statistics' fields.",
	MetricVar:      "poolMetrics",
	MetricType:     "poolMetric",
	NotExportedVar: "poolNotExported",
	LabelsVar:      "poolLabelNames",
	Structs: []Struct{
		{
			Name:   "State",
			Var:    "st",
			GoType: "int",
			Doc:    "State is what a pool holds right now, on one loop or summed over loops.",
		},
		{
			Name:   "Statistics",
			Var:    "s",
			GoType: "uint64",
			Doc: "Statistics are a pool's counters since it started, on one loop or summed over " +
				"loops. Every counter only grows, and every get ends in exactly one of " +
				"GetsDirect, GetsWaited, GetsTimedOut and GetsFailed. The conservation law " +
				"Created == Closed() + State.Connections holds whenever the loop is between " +
				"callbacks, and so in every snapshot Pool.Snapshot returns.",
		},
	},
	Families: map[string]Family{
		"pool_gets_total": {Label: "result",
			Help: "Gets that ended, by result: direct (an idle connection), waited (a new or " +
				"returned connection after a wait), timed_out, failed (a connect error or a " +
				"closed pool)."},
		"pool_connections_closed_total": {Label: "cause",
			Help: "Connections the pool closed, by cause: broken, invalid (failed validation), " +
				"idle_timeout, max_lifetime, cleared, pool_closed (the pool closed or its loop " +
				"stopped)."},
	},
	Fields: []Field{
		{Struct: "Statistics", Name: "GetsDirect", Kind: Counter, Metric: "pool_gets_total", Label: "direct",
			Doc: "GetsDirect counts the gets served by an idle connection (validated first when " +
				"test on checkout is on)."},
		{Struct: "Statistics", Name: "GetsWaited", Kind: Counter, Metric: "pool_gets_total", Label: "waited",
			Doc: "GetsWaited counts the gets served by a new connection or by one handed over on " +
				"return, after waiting for it."},
		{Struct: "Statistics", Name: "GetsTimedOut", Kind: Counter, Metric: "pool_gets_total", Label: "timed_out",
			Doc: "GetsTimedOut counts the gets that ended with ErrTimeout."},
		{Struct: "Statistics", Name: "GetsFailed", Kind: Counter, Metric: "pool_gets_total", Label: "failed",
			Doc: "GetsFailed counts the gets that ended with a connect error or ErrClosed."},
		{Struct: "Statistics", Name: "WaitTime", Kind: Counter, Unit: Seconds, Metric: "pool_get_wait_seconds_total",
			Doc:  "WaitTime is the total time the GetsWaited gets waited.",
			Help: "Total time the gets that waited spent waiting."},
		{Struct: "Statistics", Name: "Created", Kind: Counter, Metric: "pool_connections_created_total",
			Doc:  "Created counts the connections opened.",
			Help: "Connections the pool opened."},
		{Struct: "Statistics", Name: "ConnectErrors", Kind: Counter, Metric: "pool_connect_errors_total",
			Doc: "ConnectErrors counts the connects that failed (also those that no get was " +
				"waiting for any more).",
			Help: "Connects that failed."},
		{Struct: "Statistics", Name: "ClosedBroken", Kind: Counter, Metric: "pool_connections_closed_total", Label: "broken",
			Doc: "ClosedBroken counts the connections closed because the Manager said they were " +
				"broken, on return or on checkout."},
		{Struct: "Statistics", Name: "ClosedInvalid", Kind: Counter, Metric: "pool_connections_closed_total", Label: "invalid",
			Doc: "ClosedInvalid counts the connections that failed validation on checkout."},
		{Struct: "Statistics", Name: "ClosedIdleTimeout", Kind: Counter, Metric: "pool_connections_closed_total", Label: "idle_timeout",
			Doc: "ClosedIdleTimeout counts the connections that expired idle (Config.IdleTimeout)."},
		{Struct: "Statistics", Name: "ClosedMaxLifetime", Kind: Counter, Metric: "pool_connections_closed_total", Label: "max_lifetime",
			Doc: "ClosedMaxLifetime counts the connections that expired at Config.MaxLifetime."},
		{Struct: "Statistics", Name: "ClosedCleared", Kind: Counter, Metric: "pool_connections_closed_total", Label: "cleared",
			Doc: "ClosedCleared counts the connections closed by Clear (idle ones at once, the " +
				"others as they come back)."},
		{Struct: "Statistics", Name: "ClosedOnClose", Kind: Counter, Metric: "pool_connections_closed_total", Label: "pool_closed",
			Doc: "ClosedOnClose counts the connections closed because the pool was closed or the " +
				"loop stopped."},

		{Struct: "State", Name: "Loops", Kind: Gauge, Metric: "pool_loops",
			Doc:  "Loops is the number of per-loop pools summed (1 for a Local).",
			Help: "Loops that have a pool of their own now."},
		{Struct: "State", Name: "Connections", Kind: Gauge, Metric: "pool_connections",
			Doc: "Connections counts the open connections: idle, lent out and being validated. " +
				"Each holds one of the loop's MaxSize slots.",
			Help: "Connections open now (idle, lent and being validated): created minus closed."},
		{Struct: "State", Name: "Connecting", Kind: Gauge, Metric: "pool_connecting",
			Doc:  "Connecting counts the connects in progress. Each holds one of the loop's MaxSize slots.",
			Help: "Connects in progress now."},
		{Struct: "State", Name: "Idle", Kind: Gauge, Metric: "pool_idle_connections",
			Doc:  "Idle counts the connections ready to lend.",
			Help: "Connections idle, ready to lend, now."},
		{Struct: "State", Name: "Waiters", Kind: Gauge, Metric: "pool_waiters",
			Doc:  "Waiters counts the gets queued for a connection to come back or a slot to free up.",
			Help: "Gets queued for a connection now."},
	},
}
