// Package poller is percore's epoll backend: an epoll instance with an
// eventfd for cross-thread wake-ups, over golang.org/x/sys/unix.
//
// A Poller is owned by one goroutine; only Wake is safe to call from others.
// Blocking waits go through the ordinary syscall path, so that Go's
// scheduler can hand the thread's P away while it sleeps; a wait with a zero
// timeout goes through a raw syscall, which the kernel never blocks.
//
// It builds on Linux only (epoll): elsewhere the package is empty.
package poller
