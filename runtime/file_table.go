//go:build linux

package runtime

import (
	"errors"
	"io/fs"
	"os"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// The loop's file operations in flight and its open files: the slabs, an
// operation's start, result and end.

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
