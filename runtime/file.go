//go:build linux

package runtime

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// Files on the loop. A File belongs to the loop that opened it: its methods
// must be called on that loop's thread, none of them blocks, and each
// reports its result to a callback that runs on the loop's thread in a
// later turn, as a connection's OnData does. On io_uring every operation is
// the ring's own opcode, submitted with the turn's one io_uring_enter; on
// epoll, where regular files cannot be polled, the same operations run as
// plain system calls on a small bounded set of worker threads per loop
// (Config.FileWorkers), which post each result back to the loop
// (Stats.FileOffloaded counts them). See
// docs/decisions/0022-files-on-the-loop.md.
//
// Buffers. A read's data is the loop's buffer, valid only during its
// callback (copy what you keep). A write copies its bytes before it
// returns, so the caller may reuse them at once. ReadvAt, the one
// operation that fills the caller's memory, takes ownership of the
// buffers until its callback runs: do not touch them before. Every buffer
// the kernel may be reading or filling stays referenced by its operation
// until the kernel is done with it, also when the file is closed with
// operations in flight.
//
// Errors are *fs.PathError values whose Err is the errno (errors.Is(err,
// fs.ErrNotExist), fs.ErrPermission, ...), os.ErrClosed once the file is
// closed, and io.EOF (unwrapped) for a read that ends at the end of the
// file.

// File is a file owned by a loop. Its methods must be called on that
// loop's thread.
type File struct {
	l      *Loop
	fd     int
	name   string
	slot   int // in the loop's open files
	direct bool
	// inflight counts its operations the kernel (or a worker) holds;
	// the descriptor is closed only once it is zero.
	inflight int
	closing  bool
	closeCB  func(error)
}

// Name returns the name the file was opened with (joined to its
// directory's for OpenFileAt).
func (f *File) Name() string { return f.name }

// Fd returns the file's descriptor, for system calls the API does not
// have. Do not close it.
func (f *File) Fd() int { return f.fd }

// Loop returns the loop that owns f.
func (f *File) Loop() *Loop { return f.l }

// OpenFile opens the named file with the flags of os.OpenFile (os.O_RDONLY,
// os.O_CREATE|os.O_WRONLY|os.O_APPEND, syscall.O_DIRECT, ...) and perm for
// a file it creates, and calls done with the file or an *fs.PathError. The
// descriptor is close-on-exec. A relative name is relative to the working
// directory. It must be called on the loop's thread.
func (l *Loop) OpenFile(name string, flag int, perm os.FileMode, done func(*File, error)) {
	l.openAt(nil, name, flag, perm, false, done)
}

// NewFile makes the descriptor fd a File of the loop, named name, which
// then owns it (closes it at Close, or when the loop stops): for a
// descriptor opened before the loop ran, such as a server's root
// directory opened at start. It must be called on the loop's thread.
func (l *Loop) NewFile(fd int, name string) *File {
	flags, err := sys.StatusFlags(fd)
	return l.addFile(fd, name, err == nil && flags&unix.O_DIRECT != 0)
}

// OpenFileAt opens name relative to the directory dir (a File opened with
// os.O_RDONLY|syscall.O_DIRECTORY), as openat(2) does; dir nil is the
// working directory.
func (l *Loop) OpenFileAt(dir *File, name string, flag int, perm os.FileMode, done func(*File, error)) {
	l.openAt(dir, name, flag, perm, false, done)
}

// OpenFileBeneath opens name inside the directory dir and refuses any name
// that would leave it: an absolute name, "..", or a symbolic link that
// points outside (openat2(2) with RESOLVE_BENEATH and
// RESOLVE_NO_MAGICLINKS: such a name fails with the kernel's EXDEV,
// errors.Is(err, syscall.EXDEV)). It is what a server that serves a
// directory needs.
func (l *Loop) OpenFileBeneath(dir *File, name string, flag int, perm os.FileMode, done func(*File, error)) {
	l.openAt(dir, name, flag, perm, true, done)
}

func (l *Loop) openAt(dir *File, name string, flag int, perm os.FileMode, beneath bool, done func(*File, error)) {
	w := l.files.pools.open.get()
	w.name, w.flag, w.perm, w.done, w.beneath = name, flag|unix.O_CLOEXEC, uint32(perm.Perm()), done, beneath
	w.dirfd = unix.AT_FDCWD
	op := l.newOp(w, nil)
	if dir != nil {
		w.name = filepath.Join(dir.name, name)
		if dir.fd < 0 || dir.closing {
			l.failOpen(op, os.ErrClosed)
			return
		}
		w.dirfd, op.dir = dir.fd, dir
	}
	if strings.IndexByte(name, 0) >= 0 {
		l.failOpen(op, unix.EINVAL)
		return
	}
	if beneath {
		w.how = unix.OpenHow{Flags: uint64(w.flag), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
		if w.flag&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
			w.how.Mode = uint64(w.perm) // openat2 refuses a mode otherwise
		}
	}
	w.path = append(append(w.path[:0], name...), 0)
	l.startOp(op)
}

// failOpen reports err for the open op, which never reached the kernel,
// from a later turn.
func (l *Loop) failOpen(op *fileOp, err error) {
	l.nextTurn(func() {
		errno, ok := err.(unix.Errno)
		if !ok {
			w := op.work.(*openOp)
			name, cb := w.name, w.done
			l.freeOp(op)
			cb(nil, &fs.PathError{Op: "open", Path: name, Err: err})
			return
		}
		op.res = -int32(errno)
		l.finish(op)
	})
}

// check reports whether an operation may start on f, and if not, calls
// fail from a later turn with the error.
func (f *File) check(op string, fail func(error)) bool {
	if f.fd >= 0 && !f.closing {
		return true
	}
	err := f.closedErr(op)
	f.l.nextTurn(func() { fail(err) })
	return false
}

// ReadAt reads up to n bytes at offset off into a buffer of the loop's and
// calls done with them. data is valid only during done. It has fewer than
// n bytes only at the end of the file, and err is then io.EOF.
func (f *File) ReadAt(off int64, n int, done func(data []byte, err error)) {
	if !f.check("read", func(err error) { done(nil, err) }) {
		return
	}
	w := f.l.files.pools.read.get()
	w.off, w.want, w.done = off, n, done
	w.buf = f.l.fileBuf(n, f.direct)
	f.l.startOp(f.l.newOp(w, f))
}

// fileBuf returns a loop buffer of n bytes for a read; for O_DIRECT files
// it is page-aligned (the loop's mapped buffers are).
func (l *Loop) fileBuf(n int, direct bool) []byte {
	if direct {
		return l.getBuf(max(roundPage(n), mmapMin))[:n]
	}
	return l.getBuf(n)[:n]
}

// ReadvAt reads at offset off into bufs, in order, and calls done with the
// number of bytes read (fewer than asked only at the end of the file,
// with io.EOF). The buffers belong to the loop from the call until done
// runs: the caller must not read or write them in between.
func (f *File) ReadvAt(off int64, bufs [][]byte, done func(n int, err error)) {
	if !f.check("read", func(err error) { done(0, err) }) {
		return
	}
	w := f.l.files.pools.readv.get()
	w.off, w.done, w.bufs = off, done, bufs
	w.iov = w.iov[:0]
	for _, b := range bufs {
		if len(b) > 0 {
			var v unix.Iovec
			v.Base = &b[0]
			v.SetLen(len(b))
			w.iov = append(w.iov, v)
			w.want += len(b)
		}
	}
	f.l.startOp(f.l.newOp(w, f))
}

// WriteAt writes p at offset off and calls done with the number of bytes
// written; off -1 writes at the end of a file opened with os.O_APPEND
// (see Append). It copies p first: the caller may reuse it at once. A
// write that the file system takes only in part (a full disk, a file
// size limit) goes on with the rest, and reports how much was written
// with the error that stopped it.
func (f *File) WriteAt(p []byte, off int64, done func(n int, err error)) {
	f.write(false, off, done, p)
}

// WritevAt writes the buffers at offset off, as one write: it gathers
// them into one buffer of the loop's (one copy, one system call).
func (f *File) WritevAt(bufs [][]byte, off int64, done func(n int, err error)) {
	f.write(false, off, done, bufs...)
}

// Append writes p at the end of a file opened with os.O_APPEND.
func (f *File) Append(p []byte, done func(n int, err error)) { f.write(false, -1, done, p) }

// WriteAtSync writes p at offset off and makes it durable with fdatasync
// before done runs: on io_uring the write and the sync are one linked
// chain (IOSQE_IO_LINK) in one submission, so the sync starts only once
// the write has completed in full; on epoll one worker runs both. A write
// that fails cancels the sync; done's error then names the write.
func (f *File) WriteAtSync(p []byte, off int64, done func(n int, err error)) {
	f.write(true, off, done, p)
}

func (f *File) write(sync bool, off int64, done func(int, error), bufs ...[]byte) {
	if !f.check("write", func(err error) { done(0, err) }) {
		return
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	w := f.l.files.pools.write.get()
	w.off, w.want, w.done, w.sync = off, n, done, sync
	w.buf = f.l.fileBuf(n, f.direct)[:0]
	for _, b := range bufs {
		w.buf = append(w.buf, b...)
	}
	f.l.startOp(f.l.newOp(w, f))
}

// Sync commits the file's data and metadata to stable storage (fsync) and
// then calls done.
func (f *File) Sync(done func(error)) { f.sync(false, done) }

// DataSync commits the file's data, and the metadata needed to read it
// back, to stable storage (fdatasync) and then calls done.
func (f *File) DataSync(done func(error)) { f.sync(true, done) }

func (f *File) sync(data bool, done func(error)) {
	if !f.check("sync", done) {
		return
	}
	w := f.l.files.pools.sync.get()
	w.data, w.done = data, done
	f.l.startOp(f.l.newOp(w, f))
}

// Allocate preallocates n bytes at offset off (fallocate(2) with mode: 0
// extends the file, unix.FALLOC_FL_KEEP_SIZE does not) and calls done.
func (f *File) Allocate(mode uint32, off, n int64, done func(error)) {
	if !f.check("fallocate", done) {
		return
	}
	w := f.l.files.pools.alloc.get()
	w.mode, w.off, w.size, w.done = mode, off, n, done
	f.l.startOp(f.l.newOp(w, f))
}

// Stat calls done with the file's information (statx(2) of the
// descriptor). Its Sys is a *unix.Statx_t.
func (f *File) Stat(done func(fs.FileInfo, error)) {
	if !f.check("stat", func(err error) { done(nil, err) }) {
		return
	}
	w := f.l.files.pools.stat.get()
	w.done = done
	w.path = append(w.path[:0], 0)
	f.l.startOp(f.l.newOp(w, f))
}

// Close closes the file and then calls done (which may be nil). New
// operations fail with os.ErrClosed from now on; those in flight complete
// first, each with its own result, and the descriptor is closed after the
// last of them, so that its number cannot go to another file while the
// kernel still works on this one. A second Close reports os.ErrClosed.
func (f *File) Close(done func(error)) {
	if f.closing || f.fd < 0 {
		if done != nil {
			err := f.closedErr("close")
			f.l.nextTurn(func() { done(err) })
		}
		return
	}
	f.closing, f.closeCB = true, done
	if f.inflight == 0 {
		f.l.closeFile(f)
	}
}

// closeFile hands the close of f's descriptor to the kernel, once nothing
// else of f is in flight.
func (l *Loop) closeFile(f *File) {
	w := l.files.pools.close.get()
	w.done, f.closeCB = f.closeCB, nil
	l.startOp(l.newOp(w, f))
}
