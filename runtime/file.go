//go:build linux

package runtime

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

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

// fileTable is a loop's file operations in flight and its open files. Both
// are slabs with free lists, so that no operation costs more with more
// files open.
type fileTable struct {
	ops   []*fileOp
	gens  []uint32
	free  []uint32
	spare []*fileOp // finished operations, for reuse
	busy  int       // operations in flight

	open     []*File
	freeOpen []int

	workers   *fileWorkers // started with the first operation offloaded
	doneBatch []*fileOp    // the workers' results being run
	// Operations completed on the loop's thread (epoll's RWF_NOWAIT
	// reads and writes, RESOLVE_CACHED opens), run next turn.
	inline, inlineRun []*fileOp
	pipes             pipePool // io_uring's, for file sends
	pools             filePools
}

// newOp takes a slot for the operation w on f (nil for an open).
func (l *Loop) newOp(w fileWork, f *File) *fileOp {
	t := &l.files
	var op *fileOp
	if n := len(t.spare); n > 0 {
		op = t.spare[n-1]
		t.spare = t.spare[:n-1]
	} else {
		op = new(fileOp)
	}
	op.work, op.f = w, f
	if n := len(t.free); n > 0 {
		op.slot = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		op.slot = uint32(len(t.ops))
		t.ops = append(t.ops, nil)
		t.gens = append(t.gens, 0)
	}
	op.gen = (t.gens[op.slot] + 1) & genMask
	t.gens[op.slot] = op.gen
	t.ops[op.slot] = op
	return op
}

// fileOpAt returns the operation in flight in slot, if its generation
// matches.
func (l *Loop) fileOpAt(slot, gen uint32) *fileOp {
	t := &l.files
	if int(slot) >= len(t.ops) || t.ops[slot] == nil || t.ops[slot].gen != gen {
		return nil
	}
	return t.ops[slot]
}

// freeOp gives op's slot back, and op and its work for reuse.
func (l *Loop) freeOp(op *fileOp) {
	t := &l.files
	t.ops[op.slot] = nil
	t.free = append(t.free, op.slot)
	op.work.release(l)
	*op = fileOp{}
	if len(t.spare) < 64 {
		t.spare = append(t.spare, op)
	}
}

// startOp hands op to the driver, counting it in flight on its file.
func (l *Loop) startOp(op *fileOp) {
	op.pending = op.work.completions()
	l.files.busy++
	if op.f != nil {
		op.f.inflight++
		op.fd = op.f.fd
	}
	if op.dir != nil {
		// The open reads the directory's descriptor: it is not closed
		// (its number not given to another file) until the open is done.
		op.dir.inflight++
	}
	l.cnt[sFileOps]++
	if err := l.d.fileStart(op); err != nil {
		// The driver could not hand it over (a submission queue the
		// kernel does not drain): report it from a later turn, as any
		// result.
		op.res, op.syncRes, op.pending = -int32(errnoOf(err)), -int32(unix.ECANCELED), 1
		l.AfterFunc(0, func() { l.fileDone(op) })
	}
}

// errnoOf returns the errno err carries, or EBUSY for an error without
// one (a submission queue the kernel did not drain).
func errnoOf(err error) unix.Errno {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return unix.EBUSY
}

// fileResult is a driver's report of one completion of op: the operation
// itself (sync false) or the fdatasync linked to it (sync true).
func (l *Loop) fileResult(op *fileOp, res int32, sync bool) {
	if sync {
		op.syncRes = res
	} else {
		op.res = res
	}
	op.pending--
	if op.pending == 0 {
		l.fileDone(op)
	}
}

// fileDone finishes op once its completions are in: it goes on with a
// read or write that moved fewer bytes than asked, or runs its callback.
func (l *Loop) fileDone(op *fileOp) {
	t := &l.files
	t.busy--
	f, dir := op.f, op.dir
	if f != nil {
		f.inflight--
	}
	if dir != nil {
		dir.inflight--
	}
	if op.work.progress(l, op) {
		l.startOp(op) // the rest, from where it stopped
		return
	}
	l.finish(op)
	for _, g := range [...]*File{f, dir} {
		if g != nil && g.closing && g.inflight == 0 && g.fd >= 0 {
			l.closeFile(g)
		}
	}
}

// pathErr is the error of op for a negative result.
func (op *fileOp) pathErr(res int32) error {
	var name string
	switch w := op.work.(type) {
	case *openOp:
		name = w.name
	default:
		name = op.f.name
	}
	return &fs.PathError{Op: op.work.opName(), Path: name, Err: unix.Errno(-res)}
}

// finish runs op's callback with its result and frees it.
func (l *Loop) finish(op *fileOp) {
	var err error
	if op.res < 0 {
		err = op.pathErr(op.res)
	}
	op.work.finish(l, op, err)
}

// addFile records a newly opened file in the loop's table.
func (l *Loop) addFile(fd int, name string, direct bool) *File {
	t := &l.files
	f := &File{l: l, fd: fd, name: name, direct: direct}
	if n := len(t.freeOpen); n > 0 {
		f.slot = t.freeOpen[n-1]
		t.freeOpen = t.freeOpen[:n-1]
		t.open[f.slot] = f
	} else {
		f.slot = len(t.open)
		t.open = append(t.open, f)
	}
	l.cnt[sFilesOpen]++
	return f
}

// dropFile removes f from the loop's table.
func (l *Loop) dropFile(f *File) {
	t := &l.files
	t.open[f.slot] = nil
	t.freeOpen = append(t.freeOpen, f.slot)
	l.cnt[sFilesOpen]--
}

// closeFiles closes, synchronously, the files still open when the loop
// stops (nothing is in flight on them any more: the loop waits for that
// before it exits), and stops the file workers.
func (l *Loop) closeFiles() {
	t := &l.files
	for _, f := range t.open {
		if f != nil && f.fd >= 0 {
			sys.Close(f.fd)
			f.fd = -1
			l.dropFile(f)
		}
	}
	if t.workers != nil {
		t.workers.stop()
	}
	t.pipes.closeAll()
}

// closedErr is the error of an operation on a closed file.
func (f *File) closedErr(op string) error {
	return &fs.PathError{Op: op, Path: f.name, Err: os.ErrClosed}
}

// later runs f in a later turn: every result arrives that way, also the
// errors found before anything reaches the kernel.
func (l *Loop) nextTurn(f func()) { l.AfterFunc(0, f) }

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

// fileStat is fs.FileInfo from statx.
type fileStat struct {
	name string
	st   unix.Statx_t
}

func newFileStat(name string, st *unix.Statx_t) *fileStat {
	return &fileStat{name: name, st: *st}
}

func (s *fileStat) Name() string { return s.name }
func (s *fileStat) Size() int64  { return int64(s.st.Size) }
func (s *fileStat) ModTime() time.Time {
	return time.Unix(s.st.Mtime.Sec, int64(s.st.Mtime.Nsec))
}
func (s *fileStat) IsDir() bool { return s.Mode().IsDir() }
func (s *fileStat) Sys() any    { return &s.st }

// Mode converts the kernel's mode bits as package os does.
func (s *fileStat) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
