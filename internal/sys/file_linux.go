//go:build linux

package sys

import (
	"golang.org/x/sys/unix"
)

// The file calls: blocking ones for the file workers' threads (each
// retried while it fails with EINTR), the non-blocking attempts the epoll
// loop makes on its own thread (RWF_NOWAIT, RESOLVE_CACHED: they fail with
// EAGAIN rather than wait for the disk), and the pipes and splices of file
// sends.

// retry runs a system call again while it fails with EINTR.
func retry(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// Openat opens name relative to the directory dirfd (openat(2)).
func Openat(dirfd int, name string, flag int, perm uint32) (int, error) {
	return retry(func() (int, error) { return unix.Openat(dirfd, name, flag, perm) })
}

// Openat2 opens name relative to dirfd as how says (openat2(2)). It is not
// retried: with RESOLVE_CACHED an EAGAIN is the answer.
func Openat2(dirfd int, name string, how *unix.OpenHow) (int, error) {
	return unix.Openat2(dirfd, name, how)
}

// Openat2Retry is Openat2, retried while it fails with EINTR.
func Openat2Retry(dirfd int, name string, how *unix.OpenHow) (int, error) {
	return retry(func() (int, error) { return unix.Openat2(dirfd, name, how) })
}

// Pread reads into p at off.
func Pread(fd int, p []byte, off int64) (int, error) {
	return retry(func() (int, error) { return unix.Pread(fd, p, off) })
}

// Preadv reads into bufs at off.
func Preadv(fd int, bufs [][]byte, off int64) (int, error) {
	return retry(func() (int, error) { return unix.Preadv(fd, bufs, off) })
}

// Write writes p at the file's offset.
func Write(fd int, p []byte) (int, error) {
	return retry(func() (int, error) { return unix.Write(fd, p) })
}

// Pwrite writes p at off.
func Pwrite(fd int, p []byte, off int64) (int, error) {
	return retry(func() (int, error) { return unix.Pwrite(fd, p, off) })
}

// Fsync flushes the file's data and metadata, or with data only its data
// (fdatasync(2)).
func Fsync(fd int, data bool) error {
	_, err := retry(func() (int, error) {
		if data {
			return 0, unix.Fdatasync(fd)
		}
		return 0, unix.Fsync(fd)
	})
	return err
}

// Fallocate allocates (or, by mode, punches) the range [off, off+size).
func Fallocate(fd int, mode uint32, off, size int64) error {
	_, err := retry(func() (int, error) { return 0, unix.Fallocate(fd, mode, off, size) })
	return err
}

// Statx fills st with the file's basic attributes.
func Statx(fd int, st *unix.Statx_t) error {
	_, err := retry(func() (int, error) {
		return 0, unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, st)
	})
	return err
}

// PreadNowait reads into p at off only from the page cache (preadv2 with
// RWF_NOWAIT): EAGAIN when the data is not cached.
func PreadNowait(fd int, p []byte, off int64) (int, error) {
	return unix.Preadv2(fd, [][]byte{p}, off, unix.RWF_NOWAIT)
}

// PwriteNowait writes p at off (at the file's offset for -1) without
// waiting (pwritev2 with RWF_NOWAIT): EAGAIN when it would block.
func PwriteNowait(fd int, p []byte, off int64) (int, error) {
	return unix.Pwritev2(fd, [][]byte{p}, off, unix.RWF_NOWAIT)
}

// Sendfile moves up to n bytes of in, from *off, to the socket out.
func Sendfile(out, in int, off *int64, n int) (int, error) {
	return unix.Sendfile(out, in, off, n)
}

// Pipe returns a close-on-exec pipe, its buffer asked to be size bytes (a
// refusal leaves the default size).
func Pipe(size int) (r, w int, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return -1, -1, err
	}
	_, _ = unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, size)
	return fds[0], fds[1], nil
}

// SpliceOut moves up to n bytes from the pipe r to the socket fd without
// blocking (SPLICE_F_MOVE | SPLICE_F_NONBLOCK).
func SpliceOut(r, fd, n int) (int64, error) {
	return unix.Splice(r, nil, fd, nil, n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
}
