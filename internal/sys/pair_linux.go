//go:build linux

package sys

import (
	"os"

	"golang.org/x/sys/unix"
)

// SeqpacketPair returns a connected pair of Unix SOCK_SEQPACKET sockets,
// close-on-exec: the channel a restart hands connections over on
// (runtime's HandOver and Adopt), one end for each process.
func SeqpacketPair() (a, b int, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, os.NewSyscallError("socketpair", err)
	}
	return fds[0], fds[1], nil
}
