//go:build linux

package ring

import (
	"unsafe"

	"github.com/pawelgaczynski/giouring"
	"golang.org/x/sys/unix"
)

// fileOracleCases are the oracle cases of the file operations
// (prep_file.go); oracleCases appends them.
func fileOracleCases() []oracleCase {
	const (
		fd = 17
		ud = uint64(0xfeedface_00000002)
	)
	path := []byte("dir/name\x00")
	pathp := uintptr(unsafe.Pointer(&path[0]))
	iov := make([]unix.Iovec, 3)
	iovp := uintptr(unsafe.Pointer(&iov[0]))
	st := new(unix.Statx_t)
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH}
	flags := unix.O_RDWR | unix.O_CREAT | unix.O_CLOEXEC
	return []oracleCase{
		{"openat", "PrepareOpenat", []any{unix.AT_FDCWD, &path[0], flags, uint32(0o644), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareOpenat(unix.AT_FDCWD, path, flags, 0o644)
			// giouring stores the address of the slice header; the
			// kernel (and liburing) want the name's.
			e.Addr = uint64(pathp)
		}},
		{"openat2 beneath", "PrepareOpenat2", []any{fd, &path[0], how, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareOpenat2(fd, path, how)
			// giouring prepares OPENAT for openat2, and stores the
			// slice header's address: liburing uses OPENAT2 and the
			// name's address.
			e.OpCode = uint8(OpOpenat2)
			e.Addr = uint64(pathp)
		}},
		{"readv at offset", "PrepareReadv", []any{fd, iov, uint64(1 << 33), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareReadv(fd, iovp, 3, 1<<33)
		}},
		{"writev at offset", "PrepareWritev", []any{fd, iov, uint64(512), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareWritev(fd, iovp, 3, 512)
		}},
		{"fsync", "PrepareFsync", []any{fd, uint32(0), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareFsync(fd, 0)
		}},
		{"fdatasync", "PrepareFsync", []any{fd, uint32(FsyncDataSync), ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PrepareFsync(fd, giouring.FsyncDatasync)
		}},
		{"fallocate keep size", "PrepareFallocate", []any{fd, uint32(unix.FALLOC_FL_KEEP_SIZE), uint64(4096), uint64(1 << 20), ud},
			func(e *giouring.SubmissionQueueEntry) {
				e.PrepareFallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 4096, 1<<20)
			}},
		{"statx of a descriptor", "PrepareStatx", []any{fd, &path[len(path)-1], unix.AT_EMPTY_PATH, uint32(unix.STATX_BASIC_STATS), st, ud},
			func(e *giouring.SubmissionQueueEntry) {
				e.PrepareStatx(fd, path[len(path)-1:], unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, st)
				e.Addr = uint64(pathp) + uint64(len(path)-1)
			}},
		{"splice file to pipe", "PrepareSplice", []any{fd, int64(1 << 30), fd + 1, int64(-1), uint32(65536), uint32(0), ud},
			func(e *giouring.SubmissionQueueEntry) {
				e.PrepareSplice(fd, 1<<30, fd+1, -1, 65536, 0)
			}},
		{"splice pipe to socket", "PrepareSplice", []any{fd, int64(-1), fd + 2, int64(-1), uint32(4096), uint32(unix.SPLICE_F_MOVE), ud},
			func(e *giouring.SubmissionQueueEntry) {
				e.PrepareSplice(fd, -1, fd+2, -1, 4096, unix.SPLICE_F_MOVE)
			}},
		{"poll out", "PreparePollOut", []any{fd, ud}, func(e *giouring.SubmissionQueueEntry) {
			e.PreparePollAdd(fd, unix.POLLOUT)
			if bigEndian() {
				e.OpcodeFlags = e.OpcodeFlags<<16 | e.OpcodeFlags>>16
			}
		}},
	}
}
