// Package ring is percore's io_uring layer and the only package that imports
// giouring. It sets a ring up with the flags the caller asks for, probes the
// kernel's opcodes once per process, prepares submissions, and enters the
// kernel once per loop turn to submit and wait together.
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
package ring
