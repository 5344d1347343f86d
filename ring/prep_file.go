//go:build linux

package ring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The file operations: opening, vectored reads and writes, syncs,
// preallocation, stat, and splice (a file's pages into a pipe, a pipe's
// into a socket). Like the socket operations in prep.go, each fills its
// entry as liburing's io_uring_prep_* helper does, and oracle_test.go
// compares it with giouring's.

// The file opcodes (enum io_uring_op).
const (
	OpReadv     Op = 1
	OpWritev    Op = 2
	OpFsync     Op = 3
	OpFallocate Op = 17
	OpOpenat    Op = 18
	OpStatx     Op = 21
	OpOpenat2   Op = 28
	OpSplice    Op = 30
)

var fileOpNames = map[Op]string{
	OpReadv: "READV", OpWritev: "WRITEV", OpFsync: "FSYNC", OpFallocate: "FALLOCATE",
	OpOpenat: "OPENAT", OpOpenat2: "OPENAT2", OpStatx: "STATX", OpSplice: "SPLICE",
}

// FsyncDataSync is IORING_FSYNC_DATASYNC: PrepareFsync then syncs as
// fdatasync(2) does.
const FsyncDataSync = 1 << 0

// sqeIOLink is IOSQE_IO_LINK, in sqe.flags.
const sqeIOLink = 1 << 2

// PrepareOpenat queues an openat(2) of path (a NUL-terminated name, which
// must stay referenced until the completion) relative to the directory
// dirfd (unix.AT_FDCWD for the working directory). It completes with the
// new descriptor.
func (r *Ring) PrepareOpenat(dirfd int, path *byte, flags int, mode uint32, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpOpenat, dirfd, uintptr(unsafe.Pointer(path)), mode, 0)
	e.opFlags = uint32(flags)
	e.userData = userData
	return nil
}

// PrepareOpenat2 queues an openat2(2) of path relative to dirfd, with how
// (its resolve flags: unix.RESOLVE_BENEATH keeps the name inside dirfd);
// path and how must stay referenced until the completion.
func (r *Ring) PrepareOpenat2(dirfd int, path *byte, how *unix.OpenHow, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpOpenat2, dirfd, uintptr(unsafe.Pointer(path)), unix.SizeofOpenHow, uint64(uintptr(unsafe.Pointer(how))))
	e.userData = userData
	return nil
}

// PrepareReadv queues a preadv(2) of fd at offset off into the buffers iov
// describes (the iovecs and the buffers must stay referenced until the
// completion).
func (r *Ring) PrepareReadv(fd int, iov []unix.Iovec, off uint64, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpReadv, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uint32(len(iov)), off)
	e.userData = userData
	return nil
}

// PrepareWritev queues a pwritev(2) of the buffers iov describes to fd at
// offset off.
func (r *Ring) PrepareWritev(fd int, iov []unix.Iovec, off uint64, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpWritev, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uint32(len(iov)), off)
	e.userData = userData
	return nil
}

// PrepareFsync queues an fsync(2) of fd, or an fdatasync(2) with flags
// FsyncDataSync.
func (r *Ring) PrepareFsync(fd int, flags uint32, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpFsync, fd, 0, 0, 0)
	e.opFlags = flags
	e.userData = userData
	return nil
}

// PrepareFallocate queues a fallocate(2) of n bytes of fd at offset off,
// with mode (0, or unix.FALLOC_FL_KEEP_SIZE and the other FALLOC_FL_ bits).
func (r *Ring) PrepareFallocate(fd int, mode uint32, off, n uint64, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpFallocate, fd, 0, mode, off)
	e.addr = n
	e.userData = userData
	return nil
}

// PrepareStatx queues a statx(2) of path relative to dirfd (with
// unix.AT_EMPTY_PATH and an empty path: of dirfd itself) into st; the
// path and st must stay referenced until the completion.
func (r *Ring) PrepareStatx(dirfd int, path *byte, flags int, mask uint32, st *unix.Statx_t, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpStatx, dirfd, uintptr(unsafe.Pointer(path)), mask, uint64(uintptr(unsafe.Pointer(st))))
	e.opFlags = uint32(flags)
	e.userData = userData
	return nil
}

// PrepareSplice queues a splice(2) of up to n bytes from fdIn to fdOut,
// one of which must be a pipe. An offset of -1 uses the descriptor's
// position (a pipe's must be -1). It completes with the bytes moved, 0 at
// the end of fdIn.
func (r *Ring) PrepareSplice(fdIn int, offIn int64, fdOut int, offOut int64, n uint32, flags uint32, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpSplice, fdOut, 0, n, uint64(offOut))
	e.addr = uint64(offIn)
	e.spliceFdIn = int32(fdIn)
	e.opFlags = flags
	e.userData = userData
	return nil
}

// PreparePollOut queues a one-shot poll of fd for output: it completes with
// the ready event mask once fd is writable (or in error).
func (r *Ring) PreparePollOut(fd int, userData uint64) error {
	e, err := r.sqe()
	if err != nil {
		return err
	}
	e.rw(OpPollAdd, fd, 0, 0, 0)
	e.opFlags = poll32Events(unix.POLLOUT)
	e.userData = userData
	return nil
}

// Link links the last prepared submission to the next one
// (IOSQE_IO_LINK): the next starts only once it has completed, and is
// cancelled (-ECANCELED) if it fails or, for a read, write or splice,
// moves fewer bytes than asked. Call Reserve before preparing a chain.
func (r *Ring) Link() {
	sq := &r.sq
	if sq.sqeTail == sq.sqeHead {
		return
	}
	e := (*sqe)(unsafe.Add(sq.sqes, uintptr((sq.sqeTail-1)&sq.mask)*unsafe.Sizeof(sqe{})))
	e.flags |= sqeIOLink
}
