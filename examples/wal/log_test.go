//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func writeSegment(t *testing.T, dir string, n uint64, payloads ...string) string {
	t.Helper()
	var b []byte
	for _, p := range payloads {
		b = appendRecord(b, []byte(p))
	}
	name := filepath.Join(dir, segName(n))
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func recovered(t *testing.T, dir string) (recovery, []string, error) {
	t.Helper()
	var got []string
	r, err := recoverLog(dir, func(p []byte) { got = append(got, string(p)) })
	return r, got, err
}

// TestRecoverTornTails cuts each kind of torn tail made by hand, and keeps
// every record before it.
func TestRecoverTornTails(t *testing.T) {
	intact := appendRecord(nil, []byte("one"))
	intact = appendRecord(intact, []byte("two"))
	rec3 := appendRecord(nil, []byte("three"))
	badCRC := append([]byte(nil), rec3...)
	badCRC[len(badCRC)-1] ^= 0x40
	huge := []byte{0x7f, 0, 0, 0, 1, 2, 3, 4}
	tests := []struct {
		name     string
		tail     []byte
		wantTorn bool
	}{
		{"clean end", nil, false},
		{"preallocated zeros", make([]byte, 4096), false},
		{"half a header", rec3[:5], true},
		{"half a record", rec3[:len(rec3)-2], true},
		{"a bad CRC", badCRC, true},
		{"a length past the end of the segment", huge, true},
		{"data after a zero header", append(make([]byte, 8), 1), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, segName(1))
			if err := os.WriteFile(name, append(append([]byte(nil), intact...), tc.tail...), 0o644); err != nil {
				t.Fatal(err)
			}
			r, got, err := recovered(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			if r.records != 2 || len(got) != 2 || got[0] != "one" || got[1] != "two" {
				t.Fatalf("recovered %d records %q, want one and two", r.records, got)
			}
			if (r.torn != "") != tc.wantTorn || (tc.wantTorn && r.truncated != int64(len(tc.tail))) {
				t.Errorf("torn %q, truncated %d; want torn %v and %d bytes cut", r.torn, r.truncated, tc.wantTorn, len(tc.tail))
			}
			if fi, err := os.Stat(name); err != nil || fi.Size() != int64(len(intact)) || r.lastSize != int64(len(intact)) {
				t.Errorf("segment now %v bytes (%v), data end %d; want %d", fi.Size(), err, r.lastSize, len(intact))
			}
			// A second recovery finds the log clean.
			if r2, got2, err := recovered(t, dir); err != nil || r2.torn != "" || len(got2) != 2 {
				t.Errorf("second recovery: %v, %q, %v", r2, got2, err)
			}
		})
	}
}

// TestRecoverSegments reads records across segments in order, and refuses
// a damaged record in a segment that is not the last.
func TestRecoverSegments(t *testing.T) {
	dir := t.TempDir()
	writeSegment(t, dir, 1, "a", "b")
	writeSegment(t, dir, 2, "c")
	writeSegment(t, dir, 10, "d", "e")
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, got, err := recovered(t, dir)
	if err != nil || fmt.Sprint(got) != "[a b c d e]" || r.records != 5 || r.last != 10 || r.segments != 3 {
		t.Fatalf("recovered %v %q %v", r, got, err)
	}
	name := filepath.Join(dir, segName(2))
	b, _ := os.ReadFile(name)
	b[len(b)-1] ^= 1
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := recovered(t, dir); !errors.Is(err, errCorrupt) {
		t.Errorf("a damaged middle segment: %v, want errCorrupt", err)
	}
}
