// Package sys holds the runtime's system calls that are not on an I/O
// path of one backend: creating and inspecting sockets, the one socket
// address converter, the blocking file calls of the file workers and the
// non-blocking ones of the epoll loop, anonymous mappings, pipes and
// splice, and the eventfd wake-up that both backends use (Waker). Package
// runtime calls these and holds no system call code of its own, as Go's
// net calls internal/poll; the epoll loop's socket calls live in package
// poller, the io_uring loop's submissions in package ring.
//
// Every function returns the kernel's error as x/sys/unix does (a
// unix.Errno, never wrapped), so that callers keep wrapping it once with
// their own context.
package sys
