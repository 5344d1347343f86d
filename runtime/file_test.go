package runtime_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"golang.org/x/sys/unix"
)

// await runs start on l's thread, which begins an operation that reports
// through the function it is given, and waits for that report.
func await[T any](t testing.TB, l *percore.Loop, start func(done func(T))) T {
	t.Helper()
	ch := make(chan T, 1)
	pctest.OnLoop(t, l, func() { start(func(v T) { ch <- v }) })
	return pctest.Recv(t, ch, "file operation result")
}

type nres struct {
	n   int
	err error
}

type dres struct {
	data []byte
	err  error
}

func fileLoop(t *testing.T, b percore.Backend) *percore.Loop {
	t.Helper()
	return start(t, percore.Config{Backend: b}, nil).Loops()[0]
}

func openFile(t *testing.T, l *percore.Loop, name string, flag int) *percore.File {
	t.Helper()
	type ores struct {
		f   *percore.File
		err error
	}
	r := await(t, l, func(done func(ores)) {
		l.OpenFile(name, flag, 0o644, func(f *percore.File, err error) { done(ores{f, err}) })
	})
	if r.err != nil {
		t.Fatalf("open %s: %v", name, r.err)
	}
	t.Cleanup(func() {
		_ = await(t, l, func(done func(error)) { r.f.Close(done) })
	})
	return r.f
}

func writeAt(t *testing.T, l *percore.Loop, f *percore.File, p []byte, off int64) nres {
	t.Helper()
	return await(t, l, func(done func(nres)) {
		f.WriteAt(p, off, func(n int, err error) { done(nres{n, err}) })
	})
}

// readAt reads and copies the data out of the callback (it is valid only
// there).
func readAt(t *testing.T, l *percore.Loop, f *percore.File, off int64, n int) dres {
	t.Helper()
	return await(t, l, func(done func(dres)) {
		f.ReadAt(off, n, func(data []byte, err error) { done(dres{bytes.Clone(data), err}) })
	})
}

func TestFileReadWriteAtOffsets(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		l := fileLoop(t, b)
		name := filepath.Join(t.TempDir(), "f")
		f := openFile(t, l, name, os.O_RDWR|os.O_CREATE)
		if r := writeAt(t, l, f, []byte("hello"), 0); r.n != 5 || r.err != nil {
			t.Fatalf("WriteAt = %d, %v", r.n, r.err)
		}
		if r := writeAt(t, l, f, []byte("world"), 10); r.n != 5 || r.err != nil {
			t.Fatalf("WriteAt at 10 = %d, %v", r.n, r.err)
		}
		r := await(t, l, func(done func(nres)) {
			f.WritevAt([][]byte{[]byte("ab"), nil, []byte("cd")}, 5, func(n int, err error) { done(nres{n, err}) })
		})
		if r.n != 4 || r.err != nil {
			t.Fatalf("WritevAt = %d, %v", r.n, r.err)
		}
		want := "helloabcd\x00world"
		if got, err := os.ReadFile(name); err != nil || string(got) != want {
			t.Fatalf("file holds %q (%v), want %q", got, err, want)
		}
		tests := []struct {
			name    string
			off     int64
			n       int
			want    string
			wantEOF bool
		}{
			{"inside", 3, 4, "loab", false},
			{"to the end exactly", 10, 5, "world", false},
			{"short at the end", 12, 10, "rld", true},
			{"at the end", 15, 4, "", true},
			{"past the end", 100, 4, "", true},
		}
		for _, tc := range tests {
			got := readAt(t, l, f, tc.off, tc.n)
			if string(got.data) != tc.want || (got.err == io.EOF) != tc.wantEOF || (got.err != nil && got.err != io.EOF) {
				t.Errorf("%s: ReadAt(%d, %d) = %q, %v; want %q, EOF %v", tc.name, tc.off, tc.n, got.data, got.err, tc.want, tc.wantEOF)
			}
		}
		bufs := [][]byte{make([]byte, 3), make([]byte, 20)}
		rv := await(t, l, func(done func(nres)) {
			f.ReadvAt(2, bufs, func(n int, err error) { done(nres{n, err}) })
		})
		if rv.n != 13 || rv.err != io.EOF || string(bufs[0]) != "llo" || string(bufs[1][:10]) != "abcd\x00world" {
			t.Errorf("ReadvAt = %d, %v, %q %q", rv.n, rv.err, bufs[0], bufs[1][:10])
		}
		type sres struct {
			fi  fs.FileInfo
			err error
		}
		st := await(t, l, func(done func(sres)) { f.Stat(func(fi fs.FileInfo, err error) { done(sres{fi, err}) }) })
		if st.err != nil || st.fi.Size() != 15 || st.fi.Name() != "f" || !st.fi.Mode().IsRegular() || st.fi.Mode().Perm() != 0o644 {
			t.Errorf("Stat = %v, %v", st.fi, st.err)
		}
		if err := await(t, l, func(done func(error)) { f.DataSync(done) }); err != nil {
			t.Errorf("DataSync: %v", err)
		}
		if err := await(t, l, func(done func(error)) { f.Sync(done) }); err != nil {
			t.Errorf("Sync: %v", err)
		}
		if err := await(t, l, func(done func(error)) { f.Allocate(0, 0, 1<<20, done) }); err != nil {
			t.Errorf("Allocate: %v", err)
		}
		if fi, err := os.Stat(name); err != nil || fi.Size() != 1<<20 {
			t.Errorf("after Allocate(0, 0, 1 MiB): %v, %v", fi, err)
		}
		ws := await(t, l, func(done func(nres)) {
			f.WriteAtSync([]byte("durable"), 1<<20, func(n int, err error) { done(nres{n, err}) })
		})
		if ws.n != 7 || ws.err != nil {
			t.Errorf("WriteAtSync = %d, %v", ws.n, ws.err)
		}
		// The loop publishes its counters once per turn: wait for the
		// turn after the last callback.
		pctest.WaitFor(t, "the file counters", func() bool {
			s := l.Stats()
			return s.FileSyncs == 3 && s.FileBytesWritten == 21 && s.FileBytesRead > 0 && s.FilesOpen == 1
		})
		s := l.Stats()
		if offloaded := s.FileOffloaded > 0; offloaded != (b == percore.Epoll) {
			t.Errorf("%d operations offloaded to file workers on %v", s.FileOffloaded, b)
		}
	})
}

func TestFileAppend(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		l := fileLoop(t, b)
		name := filepath.Join(t.TempDir(), "log")
		if err := os.WriteFile(name, []byte("0"), 0o644); err != nil {
			t.Fatal(err)
		}
		f := openFile(t, l, name, os.O_WRONLY|os.O_APPEND)
		for _, s := range []string{"1", "22", "333"} {
			r := await(t, l, func(done func(nres)) { f.Append([]byte(s), func(n int, err error) { done(nres{n, err}) }) })
			if r.err != nil || r.n != len(s) {
				t.Fatalf("Append(%q) = %d, %v", s, r.n, r.err)
			}
		}
		if got, _ := os.ReadFile(name); string(got) != "0122333" {
			t.Errorf("file holds %q, want %q", got, "0122333")
		}
	})
}

// TestFileLarge reads and writes a file larger than every buffer class of
// the loop (and than the epoll read buffer) in one operation each.
func TestFileLarge(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		l := fileLoop(t, b)
		const size = 24 << 20
		p := make([]byte, size)
		for i := range p {
			p[i] = byte(i * 7 >> 3)
		}
		name := filepath.Join(t.TempDir(), "big")
		f := openFile(t, l, name, os.O_RDWR|os.O_CREATE)
		if r := writeAt(t, l, f, p, 0); r.n != size || r.err != nil {
			t.Fatalf("WriteAt(24 MiB) = %d, %v", r.n, r.err)
		}
		r := readAt(t, l, f, 0, size+1)
		if r.err != io.EOF || !bytes.Equal(r.data, p) {
			t.Fatalf("ReadAt(24 MiB + 1) = %d bytes, %v; want all 24 MiB and io.EOF", len(r.data), r.err)
		}
	})
}

// TestFileConcurrent runs many reads and writes on one file from one loop
// at once.
func TestFileConcurrent(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		l := fileLoop(t, b)
		f := openFile(t, l, filepath.Join(t.TempDir(), "c"), os.O_RDWR|os.O_CREATE)
		const ops, block = 64, 4096
		block1 := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, block) }
		errs := await(t, l, func(done func([]error)) {
			var got []error
			for i := range ops {
				f.WriteAt(block1(i), int64(i*block), func(n int, err error) {
					if err == nil && n != block {
						err = io.ErrShortWrite
					}
					got = append(got, err)
					if len(got) == ops {
						done(got)
					}
				})
			}
		})
		for i, err := range errs {
			if err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		bad := await(t, l, func(done func(int)) {
			seen, bad := 0, 0
			for i := range ops {
				f.ReadAt(int64(i*block), block, func(data []byte, err error) {
					if err != nil || !bytes.Equal(data, block1(i)) {
						bad++
					}
					if seen++; seen == ops {
						done(bad)
					}
				})
			}
		})
		if bad != 0 {
			t.Fatalf("%d of %d concurrent reads returned the wrong bytes", bad, ops)
		}
	})
}

// TestFileCloseInFlight closes a file with reads in flight: they complete
// with their data, the close after them, and later operations fail with
// os.ErrClosed.
func TestFileCloseInFlight(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		l := fileLoop(t, b)
		name := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(name, bytes.Repeat([]byte("x"), 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		type ores struct {
			f   *percore.File
			err error
		}
		o := await(t, l, func(done func(ores)) {
			l.OpenFile(name, os.O_RDONLY, 0, func(f *percore.File, err error) { done(ores{f, err}) })
		})
		if o.err != nil {
			t.Fatal(o.err)
		}
		f := o.f
		type result struct {
			reads    int
			order    []string
			closeErr error
			after    error
			again    error
		}
		r := await(t, l, func(done func(result)) {
			var res result
			for range 32 {
				f.ReadAt(0, 1<<20, func(data []byte, err error) {
					if err == nil && len(data) == 1<<20 {
						res.reads++
					}
					res.order = append(res.order, "read")
				})
			}
			f.Close(func(err error) {
				res.closeErr = err
				res.order = append(res.order, "close")
				f.ReadAt(0, 1, func(_ []byte, err error) {
					res.after = err
					f.Close(func(err error) { res.again = err; done(res) })
				})
			})
			f.ReadAt(0, 1, func(_ []byte, err error) {
				if !errors.Is(err, os.ErrClosed) {
					res.reads = -1000
				}
			})
		})
		if r.reads != 32 || r.closeErr != nil || r.order[len(r.order)-1] != "close" || len(r.order) != 33 {
			t.Errorf("%d of 32 reads whole, close %v, order %v", r.reads, r.closeErr, r.order)
		}
		var pe *fs.PathError
		if !errors.As(r.after, &pe) || !errors.Is(r.after, os.ErrClosed) || pe.Path != name {
			t.Errorf("read after close: %v, want a *fs.PathError for %s matching os.ErrClosed", r.after, name)
		}
		if !errors.Is(r.again, os.ErrClosed) {
			t.Errorf("second Close: %v, want os.ErrClosed", r.again)
		}
		if s := l.Stats(); s.FilesOpen != 0 {
			t.Errorf("%d files open after the close", s.FilesOpen)
		}
	})
}

func TestFileErrors(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		l := fileLoop(t, b)
		dir := t.TempDir()
		type ores struct {
			f   *percore.File
			err error
		}
		open := func(name string, flag int) error {
			r := await(t, l, func(done func(ores)) {
				l.OpenFile(name, flag, 0o644, func(f *percore.File, err error) { done(ores{f, err}) })
			})
			if r.f != nil {
				_ = await(t, l, func(done func(error)) { r.f.Close(done) })
			}
			return r.err
		}
		tests := []struct {
			name string
			path string
			flag int
			want error
		}{
			{"missing", filepath.Join(dir, "nope"), os.O_RDONLY, fs.ErrNotExist},
			{"a directory for writing", dir, os.O_RDWR, syscall.EISDIR},
			{"exclusive create of an existing file", dir, os.O_RDWR | os.O_CREATE | os.O_EXCL, fs.ErrExist},
			{"a NUL byte in the name", filepath.Join(dir, "a\x00b"), os.O_RDONLY, syscall.EINVAL},
		}
		for _, tc := range tests {
			err := open(tc.path, tc.flag)
			var pe *fs.PathError
			if !errors.As(err, &pe) || !errors.Is(err, tc.want) || pe.Op != "open" || pe.Path != tc.path {
				t.Errorf("%s: %v, want a *fs.PathError for open %s matching %v", tc.name, err, tc.path, tc.want)
			}
		}
		name := filepath.Join(dir, "ro")
		if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		f := openFile(t, l, name, os.O_RDONLY)
		r := writeAt(t, l, f, []byte("y"), 0)
		if !errors.Is(r.err, syscall.EBADF) || r.n != 0 {
			t.Errorf("write to a read-only file: %d, %v; want EBADF", r.n, r.err)
		}
	})
}

// TestFileBeneath opens names inside a directory and refuses those that
// would leave it.
func TestFileBeneath(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		l := fileLoop(t, b)
		root := t.TempDir()
		outside := t.TempDir()
		must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
		must(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
		must(t, os.WriteFile(filepath.Join(root, "sub", "in"), []byte("i"), 0o644))
		must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "out")))
		must(t, os.Symlink("sub/in", filepath.Join(root, "rel")))
		dir := openFile(t, l, root, os.O_RDONLY|syscall.O_DIRECTORY)
		tests := []struct {
			name string
			ok   bool
		}{
			{"sub/in", true},
			{"rel", true},
			{"sub/../sub/in", true},
			{"../" + filepath.Base(outside) + "/secret", false},
			{"out", false},
			{filepath.Join(outside, "secret"), false},
		}
		type ores struct {
			f   *percore.File
			err error
		}
		for _, tc := range tests {
			r := await(t, l, func(done func(ores)) {
				l.OpenFileBeneath(dir, tc.name, os.O_RDONLY, 0, func(f *percore.File, err error) { done(ores{f, err}) })
			})
			if r.f != nil {
				_ = await(t, l, func(done func(error)) { r.f.Close(done) })
			}
			if (r.err == nil) != tc.ok || (!tc.ok && !errors.Is(r.err, syscall.EXDEV)) {
				t.Errorf("OpenFileBeneath(%q) = %v, want ok %v (else EXDEV)", tc.name, r.err, tc.ok)
			}
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestFileSizeLimit fills a file to the process's file size limit
// (RLIMIT_FSIZE, the stand-in for a full disk): the write reports what it
// wrote and EFBIG, and the file keeps every byte written before.
func TestFileSizeLimit(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		l := fileLoop(t, b)
		f := openFile(t, l, filepath.Join(t.TempDir(), "full"), os.O_RDWR|os.O_CREATE)
		var old unix.Rlimit
		must(t, unix.Getrlimit(unix.RLIMIT_FSIZE, &old))
		const limit = 64 << 10
		lim := unix.Rlimit{Cur: limit, Max: old.Max}
		must(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &lim))
		r := writeAt(t, l, f, make([]byte, 100<<10), 0)
		rs := await(t, l, func(done func(nres)) {
			f.WriteAtSync(make([]byte, 10), limit, func(n int, err error) { done(nres{n, err}) })
		})
		must(t, unix.Setrlimit(unix.RLIMIT_FSIZE, &old))
		var pe *fs.PathError
		if r.n != limit || !errors.As(r.err, &pe) || pe.Op != "write" || !errors.Is(r.err, syscall.EFBIG) {
			t.Errorf("write past the limit: %d, %v; want %d and a write *fs.PathError matching EFBIG", r.n, r.err, limit)
		}
		if rs.n != 0 || !errors.Is(rs.err, syscall.EFBIG) {
			t.Errorf("synced write past the limit: %d, %v; want 0 and EFBIG", rs.n, rs.err)
		}
		if d := readAt(t, l, f, 0, 2*limit); len(d.data) != limit || d.err != io.EOF {
			t.Errorf("read back %d bytes, %v; want %d and io.EOF", len(d.data), d.err, limit)
		}
	})
}

// TestOpenAtKeepsItsDirectoryOpen: a directory closed while an open
// relative to it is in flight stays open until that open is done, which
// succeeds; then it closes. (The open used to be left out of the
// directory's operations in flight: the close went first, and the open
// found its directory's descriptor gone, or another file's.)
func TestOpenAtKeepsItsDirectoryOpen(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		l := fileLoop(t, b)
		root := t.TempDir()
		type result struct {
			order   []string
			openErr error
			f       *percore.File
		}
		for _, beneath := range []bool{false, true} {
			type ores struct {
				f   *percore.File
				err error
			}
			d := await(t, l, func(done func(ores)) {
				l.OpenFile(root, os.O_RDONLY|syscall.O_DIRECTORY, 0, func(f *percore.File, err error) { done(ores{f, err}) })
			})
			if d.err != nil {
				t.Fatal(d.err)
			}
			dir := d.f
			name := fmt.Sprintf("new-%v", beneath)
			r := await(t, l, func(done func(result)) {
				var res result
				open := l.OpenFileAt
				if beneath {
					open = l.OpenFileBeneath
				}
				// O_CREAT: io_uring runs the open on a worker, after the
				// close that the same enter submits.
				open(dir, name, os.O_CREATE|os.O_WRONLY, 0o644, func(f *percore.File, err error) {
					res.order = append(res.order, "open")
					res.openErr, res.f = err, f
				})
				dir.Close(func(err error) {
					if err != nil {
						t.Errorf("close of the directory: %v", err)
					}
					res.order = append(res.order, "close")
					done(res)
				})
			})
			if r.openErr != nil || !slices.Equal(r.order, []string{"open", "close"}) {
				t.Fatalf("beneath %v: open %v, callbacks %v; want the open to succeed, then the close", beneath, r.openErr, r.order)
			}
			_ = await(t, l, func(done func(error)) { r.f.Close(done) })
			if _, err := os.Stat(filepath.Join(root, name)); err != nil {
				t.Errorf("beneath %v: %v", beneath, err)
			}
		}
	})
}
