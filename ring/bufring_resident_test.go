//go:build linux

package ring

import (
	"os"
	"testing"
)

// Resident counts the pages receives filled: none at first, one for a
// small receive into a buffer of several pages, none after Discard.
func TestBufRingResident(t *testing.T) {
	page := os.Getpagesize()
	r := mustOpen(t, Config{Entries: 8})
	b, err := r.NewBufRing(9, 4, 4*page)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if n, err := b.Resident(); err != nil || n != 0 {
		t.Fatalf("a fresh ring: %d bytes resident, %v", n, err)
	}
	p := socketpair(t)
	if err := r.PrepareRecvSelect(p[0], b, 1); err != nil {
		t.Fatal(err)
	}
	write(t, p[1], []byte("hello"))
	q := newReaper(t, r)
	if c := q.one(); c.Res != 5 {
		t.Fatalf("receive: %s", res(c.Res))
	}
	if n, err := b.Resident(); err != nil || n != page {
		t.Fatalf("after a 5-byte receive: %d bytes resident, %v; want one page (%d)", n, err, page)
	}
	if err := b.Discard(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Resident(); err != nil || n != 0 {
		t.Fatalf("after Discard: %d bytes resident, %v", n, err)
	}
}
