// Package listener opens the sockets percore's loops accept and receive on:
// TCP and Unix stream listeners ([Listen]), UDP sockets ([ListenPacket]), and
// SO_REUSEPORT groups of either with one socket per loop ([Group]).
//
// Sockets are built directly with socket(2), setsockopt(2), bind(2) and
// listen(2): they are non-blocking and close-on-exec, and TCP and UDP sockets
// have SO_REUSEADDR and SO_REUSEPORT set before bind. A [Listener] hands its
// loop the raw descriptor ([Listener.Fd]); code that wants Go's standard
// types gets a net.Listener or net.PacketConn over a duplicate
// ([Listener.NetListener], [Listener.PacketConn]).
//
// # Options
//
// [Config] is passed by value and its zero value works.
//
// Backlog: zero uses the kernel's limit, net.core.somaxconn, read from
// /proc/sys/net/core/somaxconn when the socket is opened, or 4096 (the
// kernel's default since Linux 5.4) when that file cannot be read. A larger
// value is capped by the kernel at somaxconn, so raising the sysctl is how
// to get a deeper accept queue.
//
// IPV6_V6ONLY: every IPv6 socket gets IPV6_V6ONLY set to [Config].V6Only,
// so behaviour does not depend on the net.ipv6.bindv6only sysctl. With the
// default (false) an IPv6 wildcard bind, "[::]:port" or ":port" on "tcp" or
// "udp", is dual-stack and also accepts IPv4 clients, whose addresses appear
// IPv4-mapped (::ffff:a.b.c.d). With V6Only it takes IPv6 only, and an IPv4
// wildcard on the same port can be bound beside it.
//
// SO_INCOMING_CPU: a hint for SO_REUSEPORT groups (Linux 6.2 and later
// prefer the member whose value is the CPU that processed the packet). A
// kernel that refuses it does not fail the listen; [Listener.IncomingCPU]
// reports the refusal.
//
// # Errors
//
// Errors from Listen, ListenPacket and Group are *net.OpError with Op
// "listen", the network and the requested address, wrapping an
// *os.SyscallError when a system call failed, so that
// errors.Is(err, syscall.EADDRINUSE) and the like work. A port held by a
// socket without SO_REUSEPORT (for example one from net.Listen) gives
// EADDRINUSE, as does a port held by another user's sockets.
//
// # Unix sockets
//
// Before binding a path, Listen looks at what is there. A socket file that
// nothing is bound to any more (connect is refused with ECONNREFUSED), left
// behind by a crashed process, is removed. A socket someone listens on, or
// any file that is not a socket (a regular file, a directory, a symbolic
// link), is never removed: bind fails with EADDRINUSE and the error says
// what is there. Close removes the socket file the listener created. Paths
// starting with '@' are in Linux's abstract namespace and have no file.
//
// # Caveats
//
// The stale-socket check connects to the existing socket: a live server
// there sees one connection that is closed at once. The check and the
// removal are not atomic, so two processes starting on one path at the same
// moment can still race; give each server its own path.
//
// SO_REUSEPORT groups are formed by the kernel from sockets of the same
// effective user; a Group binding a port that other sockets of this user
// already hold with SO_REUSEPORT joins them.
//
// It builds on Linux only (SO_REUSEPORT, SO_INCOMING_CPU): elsewhere the package is empty.
package listener
