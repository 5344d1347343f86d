//go:build linux

package runtime

import (
	"io"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The file operations, one type each. A fileOp is the slab entry every
// operation in flight has (its slot and generation make the io_uring user
// data; the files it keeps open; the results the kernel or a worker
// reported); its work is the typed operation, which owns its arguments,
// the memory the kernel reads or fills (referenced there until the
// completion) and its callback. A driver handles each type in its own
// file: uringDriver.fileStart (uring_file.go), epollDriver.inline
// (epoll_file.go), runFileOp (file_workers.go); the loop accounts each
// completion (progress) and runs the callback (finish) here.

// fileOp is one file operation in flight.
type fileOp struct {
	f    *File // nil for an open
	dir  *File // an open's directory (OpenFileAt, OpenFileBeneath), or nil
	fd   int   // f's descriptor, copied when the operation starts
	slot uint32
	gen  uint32
	// results of the kernel's (or worker's) last run: res for the
	// operation, syncRes for the fdatasync linked to a write; pending
	// counts the completions still due.
	res, syncRes int32
	pending      int
	work         fileWork
}

// fileWork is one typed file operation.
type fileWork interface {
	// opName is the operation's name in its errors ("open", "read", ...).
	opName() string
	// completions is how many completions one run reports: 2 for a write
	// linked to its fdatasync.
	completions() int
	// progress accounts a run's result (bytes moved, counters) and
	// reports whether the operation starts again for the rest.
	progress(l *Loop, op *fileOp) (again bool)
	// finish runs the callback with the result; err is the run's error
	// (nil for a non-negative res).
	finish(l *Loop, op *fileOp, err error)
	// release gives back what the operation holds (a loop buffer) and
	// the operation itself to its pool.
	release(l *Loop)
}

// opPool is the free list of one type of operation.
type opPool[T any] struct{ spare []*T }

func (p *opPool[T]) get() *T {
	if n := len(p.spare); n > 0 {
		w := p.spare[n-1]
		p.spare = p.spare[:n-1]
		return w
	}
	return new(T)
}

func (p *opPool[T]) put(w *T) {
	var zero T
	*w = zero
	if len(p.spare) < 64 {
		p.spare = append(p.spare, w)
	}
}

// filePools are a loop's free lists of operations, one per type.
type filePools struct {
	open  opPool[openOp]
	read  opPool[readOp]
	readv opPool[readvOp]
	write opPool[writeOp]
	sync  opPool[syncOp]
	alloc opPool[allocOp]
	stat  opPool[statOp]
	close opPool[closeOp]
}

// openOp opens a file (OpenFile, OpenFileAt, OpenFileBeneath).
type openOp struct {
	dirfd   int
	path    []byte // NUL-terminated
	name    string // joined to the directory's, for errors and the File
	flag    int
	perm    uint32
	beneath bool // openat2 with how (RESOLVE_BENEATH)
	how     unix.OpenHow
	done    func(*File, error)
}

func (*openOp) opName() string               { return "open" }
func (*openOp) completions() int             { return 1 }
func (*openOp) progress(*Loop, *fileOp) bool { return false }
func (w *openOp) release(l *Loop)            { l.files.pools.open.put(w) }

func (w *openOp) finish(l *Loop, op *fileOp, err error) {
	var f *File
	if err == nil {
		f = l.addFile(int(op.res), w.name, w.flag&unix.O_DIRECT != 0)
	}
	cb := w.done
	l.freeOp(op)
	l.safely("file open callback", func() { cb(f, err) })
}

// readOp reads into a loop buffer (ReadAt), going on after a short read
// until the end of the file.
type readOp struct {
	buf   []byte // the loop's buffer
	off   int64
	want  int // bytes asked
	moved int // bytes read so far
	done  func([]byte, error)
}

func (*readOp) opName() string   { return "read" }
func (*readOp) completions() int { return 1 }

func (w *readOp) progress(l *Loop, op *fileOp) bool {
	if op.res <= 0 {
		return false
	}
	w.moved += int(op.res)
	l.cnt[sFileBytesRead] += uint64(op.res)
	return w.moved < w.want // the rest, from where it stopped
}

func (w *readOp) finish(l *Loop, op *fileOp, err error) {
	if err == nil && w.moved < w.want {
		err = io.EOF
	}
	cb, data := w.done, w.buf[:w.moved]
	l.safely("file read callback", func() { cb(data, err) })
	l.freeOp(op)
}

func (w *readOp) release(l *Loop) {
	l.putBuf(w.buf)
	l.files.pools.read.put(w)
}

// readvOp reads into the caller's buffers (ReadvAt), which it owns until
// its callback runs.
type readvOp struct {
	bufs  [][]byte
	iov   []unix.Iovec
	off   int64
	want  int
	moved int
	done  func(int, error)
}

func (*readvOp) opName() string   { return "read" }
func (*readvOp) completions() int { return 1 }

func (w *readvOp) progress(l *Loop, op *fileOp) bool {
	if op.res > 0 {
		w.moved += int(op.res)
		l.cnt[sFileBytesRead] += uint64(op.res)
	}
	return false
}

func (w *readvOp) finish(l *Loop, op *fileOp, err error) {
	n := w.moved
	if err == nil && n < w.want {
		err = io.EOF
	}
	cb := w.done
	l.freeOp(op)
	l.safely("file read callback", func() { cb(n, err) })
}

func (w *readvOp) release(l *Loop) { l.files.pools.readv.put(w) }

// writeOp writes a copy of the caller's bytes (WriteAt, WritevAt, Append,
// and WriteAtSync with sync: the write linked to an fdatasync), going on
// after a short write.
type writeOp struct {
	buf   []byte // the copy, in a loop buffer
	off   int64  // -1 appends
	want  int
	moved int
	sync  bool
	done  func(int, error)
}

func (*writeOp) opName() string { return "write" }

func (w *writeOp) completions() int {
	if w.sync {
		return 2
	}
	return 1
}

func (w *writeOp) progress(l *Loop, op *fileOp) bool {
	if op.res > 0 {
		w.moved += int(op.res)
		l.cnt[sFileBytesWritten] += uint64(op.res)
		if w.moved < w.want {
			return true
		}
	}
	if w.sync && op.res >= 0 && op.syncRes >= 0 {
		l.cnt[sFileSyncs]++
	}
	return false
}

func (w *writeOp) finish(l *Loop, op *fileOp, err error) {
	if err == nil && w.sync && op.syncRes < 0 {
		err = &fs.PathError{Op: "sync", Path: op.f.name, Err: unix.Errno(-op.syncRes)}
	}
	if err == nil && w.moved < w.want {
		err = &fs.PathError{Op: "write", Path: op.f.name, Err: io.ErrShortWrite}
	}
	n, cb := w.moved, w.done
	l.freeOp(op)
	l.safely("file write callback", func() { cb(n, err) })
}

func (w *writeOp) release(l *Loop) {
	l.putBuf(w.buf)
	l.files.pools.write.put(w)
}

// offset is where the write goes next: the file's end for an append (the
// ring's -1, the current position, which O_APPEND puts at the end).
func (w *writeOp) offset() uint64 {
	if w.off < 0 {
		return ^uint64(0)
	}
	return uint64(w.off) + uint64(w.moved)
}

// syncOp is Sync (fsync) or, with data, DataSync (fdatasync).
type syncOp struct {
	data bool
	done func(error)
}

func (*syncOp) opName() string   { return "sync" }
func (*syncOp) completions() int { return 1 }

func (*syncOp) progress(l *Loop, op *fileOp) bool {
	if op.res >= 0 {
		l.cnt[sFileSyncs]++
	}
	return false
}

func (w *syncOp) finish(l *Loop, op *fileOp, err error) { finishErr(l, op, w.done, err) }
func (w *syncOp) release(l *Loop)                       { l.files.pools.sync.put(w) }

// allocOp is Allocate (fallocate).
type allocOp struct {
	mode      uint32
	off, size int64
	done      func(error)
}

func (*allocOp) opName() string               { return "fallocate" }
func (*allocOp) completions() int             { return 1 }
func (*allocOp) progress(*Loop, *fileOp) bool { return false }
func (w *allocOp) finish(l *Loop, op *fileOp, err error) {
	finishErr(l, op, w.done, err)
}
func (w *allocOp) release(l *Loop) { l.files.pools.alloc.put(w) }

// statOp is Stat (statx of the descriptor), which the kernel fills in st.
type statOp struct {
	path []byte // "" NUL-terminated: AT_EMPTY_PATH
	st   unix.Statx_t
	done func(fs.FileInfo, error)
}

func (*statOp) opName() string               { return "stat" }
func (*statOp) completions() int             { return 1 }
func (*statOp) progress(*Loop, *fileOp) bool { return false }

func (w *statOp) finish(l *Loop, op *fileOp, err error) {
	var fi fs.FileInfo
	if err == nil {
		fi = newFileStat(filepath.Base(op.f.name), &w.st)
	}
	cb := w.done
	l.freeOp(op)
	l.safely("file stat callback", func() { cb(fi, err) })
}

func (w *statOp) release(l *Loop) { l.files.pools.stat.put(w) }

// closeOp closes the descriptor, once nothing else of the file is in
// flight.
type closeOp struct {
	done func(error) // may be nil
}

func (*closeOp) opName() string   { return "close" }
func (*closeOp) completions() int { return 1 }

func (*closeOp) progress(l *Loop, op *fileOp) bool {
	// The descriptor is gone whatever the result (close(2) frees it also
	// when it reports an error).
	op.f.fd = -1
	l.dropFile(op.f)
	return false
}

func (w *closeOp) finish(l *Loop, op *fileOp, err error) { finishErr(l, op, w.done, err) }
func (w *closeOp) release(l *Loop)                       { l.files.pools.close.put(w) }

// finishErr runs the callback of an operation that reports only an
// error.
func finishErr(l *Loop, op *fileOp, cb func(error), err error) {
	l.freeOp(op)
	if cb != nil {
		l.safely("file callback", func() { cb(err) })
	}
}
