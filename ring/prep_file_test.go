//go:build linux

package ring

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFileChain runs a write linked to an fdatasync on a real file, with
// the chain prepared at the end of an almost full queue: Reserve must hand
// the queue over first, so that the two entries go in one submission and
// the sync starts only after the write.
func TestFileChain(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	name := filepath.Join(t.TempDir(), "chain")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range uint64(3) {
		if err := r.PrepareCancel(1<<40+i, 100+i); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Reserve(2); err != nil {
		t.Fatal(err)
	}
	if p := r.Pending(); p != 0 {
		t.Fatalf("%d entries pending after Reserve(2) with 3 of 4 used: want them submitted", p)
	}
	data := []byte("hello, durable world")
	if err := r.PrepareWrite(int(f.Fd()), data, 0, 1); err != nil {
		t.Fatal(err)
	}
	r.Link()
	if err := r.PrepareFsync(int(f.Fd()), FsyncDataSync, 2); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]int32{}
	cqes := make([]Completion, 8)
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 5 && time.Now().Before(deadline) {
		if err := r.SubmitAndWait(time.Second); err != nil && err != ErrBusy {
			t.Fatal(err)
		}
		n := r.Reap(cqes)
		for _, c := range cqes[:n] {
			got[c.UserData] = c.Res
		}
	}
	if got[1] != int32(len(data)) || got[2] != 0 {
		t.Fatalf("write then sync: results %v, want write %d and sync 0", got, len(data))
	}
	b, err := os.ReadFile(name)
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("file holds %q (%v), want %q", b, err, data)
	}
	if err := r.Reserve(5); err == nil {
		t.Error("Reserve(5) of a 4-entry queue succeeded")
	}
}

// TestSpliceFileToPipe moves a file's bytes into a pipe with
// PrepareSplice, as the file sends of the runtime do.
func TestSpliceFileToPipe(t *testing.T) {
	r := mustOpen(t, Config{Entries: 4})
	name := filepath.Join(t.TempDir(), "splice")
	if err := os.WriteFile(name, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	if err := r.PrepareSplice(int(f.Fd()), 3, p[1], -1, 5, 0, 7); err != nil {
		t.Fatal(err)
	}
	if err := r.SubmitAndWait(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	cqes := make([]Completion, 1)
	if n := r.Reap(cqes); n != 1 || cqes[0].Res != 5 {
		t.Fatalf("splice: %d completions, %+v; want 5 bytes moved", n, cqes[0])
	}
	buf := make([]byte, 16)
	n, err := unix.Read(p[0], buf)
	if err != nil || string(buf[:n]) != "34567" {
		t.Fatalf("pipe holds %q (%v), want %q", buf[:n], err, "34567")
	}
}
