package runtime

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/percore/percore/ring"
	"golang.org/x/sys/unix"
)

// sendfileRing is the stand-in ring with the file operations a file send
// prepares (splices, a poll for writability), recorded like the others.
type sendfileRing struct{ *fakeRing }

func (r sendfileRing) PrepareOpenat(_ int, _ *byte, _ int, _ uint32, ud uint64) error {
	return r.prep(ud)
}
func (r sendfileRing) PrepareOpenat2(_ int, _ *byte, _ *unix.OpenHow, ud uint64) error {
	return r.prep(ud)
}
func (r sendfileRing) PrepareReadv(_ int, _ []unix.Iovec, _ uint64, ud uint64) error {
	return r.prep(ud)
}
func (r sendfileRing) PrepareWrite(_ int, _ []byte, _ uint64, ud uint64) error { return r.prep(ud) }
func (r sendfileRing) PrepareFsync(_ int, _ uint32, ud uint64) error           { return r.prep(ud) }
func (r sendfileRing) PrepareFallocate(_ int, _ uint32, _, _ uint64, ud uint64) error {
	return r.prep(ud)
}
func (r sendfileRing) PrepareStatx(_ int, _ *byte, _ int, _ uint32, _ *unix.Statx_t, ud uint64) error {
	return r.prep(ud)
}
func (r sendfileRing) PrepareSplice(_ int, _ int64, _ int, _ int64, _ uint32, _ uint32, ud uint64) error {
	return r.prep(ud)
}
func (r sendfileRing) PreparePollOut(_ int, ud uint64) error { return r.prep(ud) }
func (r sendfileRing) Reserve(uint32) error                  { return nil }
func (r sendfileRing) Link()                                 {}

// A file send aborted while its splice is in flight (io_uring) runs done
// at once, but its file stays open until the splice completes: a
// File.Close that done makes (as examples/file_server's does) waits for
// it, instead of closing a descriptor the kernel's splice still resolves
// (or finds given to another file).
func TestFileCloseWaitsForAnAbortedSplice(t *testing.T) {
	l, d, fr, _, c, _ := uringTestLoop(t)
	d.fr, d.splice = sendfileRing{fr}, true
	l.files.workers = newFileWorkers(0, func() {}) // they take nothing: the test looks at their queue
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	f := l.addFile(fd, name, false)
	t.Cleanup(l.files.pipes.closeAll)

	var done []error
	l.safely("test", func() {
		if err := c.SendFile(f, 0, 1000, func(_ int64, err error) {
			done = append(done, err)
			f.Close(nil)
		}); err != nil {
			t.Fatal(err)
		}
	})
	if fr.count(kindSplice) != 1 {
		t.Fatalf("%d splices prepared, want 1", fr.count(kindSplice))
	}
	l.safely("test", c.Abort)
	if len(done) != 1 || done[0] == nil {
		t.Fatalf("done ran %v, want once with an error", done)
	}
	closes := func() int {
		n := 0
		for _, op := range l.files.workers.queue {
			if _, ok := op.work.(*closeOp); ok {
				n++
			}
		}
		return n
	}
	if closes() != 0 {
		t.Fatal("the file's close started while its splice was in flight")
	}
	// The splice completes (cancelled): now the close goes.
	e := ring.Completion{UserData: userData(kindSplice, c.slot, c.gen), Res: -int32(unix.ECANCELED)}
	d.complete(&e)
	if closes() != 1 {
		t.Fatalf("%d closes after the splice completed, want 1", closes())
	}
}
