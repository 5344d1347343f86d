// Package ring is percore's io_uring layer and the only package that imports
// giouring. It sets a ring up with the flags the caller asks for, probes the
// kernel's opcodes once per process, prepares the submissions the runtime
// uses (multishot accept, multishot receive from a provided-buffer ring,
// send, sendmsg, connect, close, shutdown, cancel, timeout, read and write at
// an offset, and a read of an eventfd for cross-thread wake-ups), and enters
// the kernel once per loop turn to submit and wait together.
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
