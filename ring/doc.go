// Package ring is percore's io_uring layer, its own binding of the kernel's
// ABI over golang.org/x/sys/unix: it sets a ring up with the flags the
// caller asks for and maps it, probes the kernel's opcodes (caching only a
// conclusive answer), prepares submissions, registers provided-buffer
// rings, and enters the kernel once per loop turn to submit and wait
// together. It needs no linker flags.
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
// timeout, a one-shot poll for input, and read and write at an offset. The
// runtime uses accept and receive from a provided-buffer ring (multishot, or
// single where it limits them), send, connect, close, shutdown, both
// cancels, a poll of the listener while the descriptor table is full, and a
// read of an eventfd for cross-thread wake-ups; receive into a caller's buffer, sendmsg,
// timeout and write are there for other callers and the tests.
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
// writes it asynchronously. User data is an opaque 64-bit value: percore
// puts a slot index and a generation in it, never a Go pointer.
//
// It builds on Linux only (io_uring): elsewhere the package is empty.
package ring
