// Package ring is percore's io_uring layer, its own binding of the kernel's
// ABI over golang.org/x/sys/unix: it sets a ring up with the flags the
// caller asks for and maps it, probes the kernel's opcodes and features
// (caching only a conclusive answer), prepares submissions, registers
// provided-buffer rings, and enters the kernel once per loop turn to submit
// and wait together. It needs no linker flags.
//
// Its tests use giouring as an oracle: every submission a Prepare method
// builds is compared byte for byte with giouring's, and ring setup with
// giouring's for the same parameters (oracle_test.go). giouring links only
// with -ldflags=-checklinkname=0, so the ring test binary, and only it,
// needs that flag: make test passes it; by hand,
//
//	go test -race -ldflags=-checklinkname=0 ./ring/
//
// See docs/decisions/0014-own-io_uring-binding.md.
//
// It prepares accept (single or multishot), receive (into a caller's buffer,
// or selecting from a provided-buffer ring, single or multishot), send,
// sendmsg, connect, close, shutdown, cancel (by user data or by descriptor),
// timeout, a one-shot poll for input, read and write at an offset, a NOP,
// the file operations (prep_file.go) and the features' operations below. The
// runtime uses accept and receive from a provided-buffer ring (multishot, or
// single where it limits them), send, connect, close, shutdown, both
// cancels, a poll of the listener while the descriptor table is full, and a
// read of an eventfd for cross-thread wake-ups; receive into a caller's buffer, sendmsg,
// timeout and write are there for other callers and the tests.
//
// # Ring features
//
// Beyond what the loop needs, ring binds the io_uring features a plain
// liburing program does not use, each behind the probe: Probe's Support
// answers HasFeature and FeatureError for every Feature, found by trying
// it on the probe ring (a registration, a setup feature bit, an opcode),
// so that an older kernel reads as "missing" and keeps working without it
// (docs/decisions/0041 to 0044):
//
//   - RegisteredRing (5.18): Config.RegisterRing or Ring.RegisterRing
//     registers the ring's descriptor in the thread's ring table, and every
//     enter passes its index (IORING_ENTER_REGISTERED_RING), skipping the
//     descriptor lookup. The table is the thread's: only for an owner
//     locked to its thread; where refused, the ring enters as before
//     (RingRegistered says why).
//   - DirectDescriptors (5.19) and FixedFdInstall (6.8): RegisterFiles
//     makes a sparse fixed file table; PrepareAcceptMultishotDirect and
//     PrepareAcceptDirect accept into slots the kernel picks; FixedFile
//     marks a receive, send or shutdown as on a slot; PrepareCancelFixed,
//     PrepareCloseDirect and PrepareFixedFdInstall (a real descriptor for a
//     slot) finish the life of a connection; PrepareFilesUpdateAlloc puts
//     existing descriptors into slots, and PrepareMsgRingFd sends a slot to
//     another ring. A full table closes the connection being accepted
//     (-ENFILE).
//   - CQESkip (5.17): SkipSuccess marks a submission so that it posts
//     nothing when it succeeds; a failure still completes. With
//     PrepareSendNoWait, which sends all inline or fails, a skipped send
//     that posted nothing by the end of its enter has released its buffer.
//   - Bundles (6.10): PrepareRecvBundle, PrepareRecvMultishotBundle and
//     PrepareSendBundle (from a NewSendBufRing that the caller fills with
//     Provide) move several provided buffers per completion;
//     BufRing.Bundle names them from the ring's own record of which id sits
//     in which slot.
//   - IncrementalBuffers (6.12): NewIncrementalBufRing's buffers are
//     consumed in part by successive receives; BufRing.Received returns a
//     completion's bytes where they lie and whether the buffer is done
//     (Completion.BufMore).
//   - SendZC (6.0-6.2): PrepareSendZC and PrepareSendmsgZC complete twice,
//     with the result and then a notification (Completion.Notif,
//     Completion.ZCCopied); only the notification releases the buffer.
//   - NAPI (6.9): RegisterNAPI and UnregisterNAPI turn busy polling of the
//     NIC's receive queues on and off for the ring's waits.
//
// The runtime's io_uring loop uses some of them, each behind a bit of
// runtime.UringFeatures (docs/decisions/0051, 0066, 0069).
//
// # Ownership
//
// A Ring belongs to the goroutine (and, with SingleIssuer, the OS thread)
// that opened it: none of its methods are safe for concurrent use. Other
// threads wake the ring's owner through an eventfd the owner reads; they
// never touch the ring itself.
//
// # Caveats
//
// Every buffer, sockaddr, msghdr or timespec handed to a Prepare method must
// stay referenced and unmoved (heap or mmap memory, never the stack) until
// the matching completion arrives, also after a cancel: the kernel reads or
// writes it asynchronously. The Prepare methods do not make their
// arguments escape, so the compiler may put a buffer that does not escape
// otherwise on the goroutine's stack (since Go 1.25 also a small make of
// a size known only at run time), which moves when the stack grows: pass
// memory that is on the heap for a reason of its own (stored in a
// long-lived value, or mmap'd), as the runtime's is. User data is an opaque 64-bit value: percore
// puts a slot index and a generation in it, never a Go pointer.
//
// It builds on Linux only (io_uring): elsewhere the package is empty.
package ring
