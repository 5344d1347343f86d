//go:build linux

package frame

import (
	"bytes"
	"testing"

	percore "github.com/percore/percore/runtime"
)

// trickleLine is a line of n bytes and its '\n'.
func trickleLine(n int) []byte {
	return append(bytes.Repeat([]byte("x"), n), '\n')
}

// TestLinesTrickleIsLinear (issue 24, a follow-up of 23.5): a 48 KiB line
// that arrives a byte at a time is searched once, by the adapter of Lines
// and by a LineDecoder: the bytes the line scanner examined are about the
// line's length. Searched from its start at every read (ScanLines), it
// costs the square: over a gigabyte.
func TestLinesTrickleIsLinear(t *testing.T) {
	line := trickleLine(48 << 10)
	check := func(t *testing.T, sc Scanner, got [][]byte) {
		t.Helper()
		if len(got) != 1 || len(got[0]) != len(line)-1 {
			t.Fatalf("got %d lines, want the one of %d bytes", len(got), len(line)-1)
		}
		if scanned, limit := sc.(*LineScanner).Scanned(), int64(2*len(line)); scanned > limit {
			t.Fatalf("the scanner examined %d bytes for a %d-byte line: over %d, the search is not linear", scanned, len(line), limit)
		}
	}
	t.Run("Lines", func(t *testing.T) {
		var got [][]byte
		h := Lines(HandlerFunc(func(_ *percore.Conn, l []byte) { got = append(got, bytes.Clone(l)) }), LineConfig{MaxLine: 64 << 10})
		var c percore.Conn
		h.(percore.OpenHandler).OnOpen(&c)
		s := c.AdapterValue().(*session)
		for i := range line {
			h.OnData(&c, line[i:i+1])
		}
		check(t, s.t.scanner, got)
	})
	t.Run("LineDecoder", func(t *testing.T) {
		var got [][]byte
		d := LineDecoder{MaxLine: 64 << 10}
		for i := 0; i < len(line); i += 7 {
			if _, err := d.Feed(line[i:min(i+7, len(line))], func(l []byte) bool { got = append(got, bytes.Clone(l)); return true }); err != nil {
				t.Fatal(err)
			}
		}
		check(t, d.tail.scanner, got)
	})
	t.Run("Split with a Scanner", func(t *testing.T) {
		var got [][]byte
		var sc Scanner
		h := Split(nil, HandlerFunc(func(_ *percore.Conn, l []byte) { got = append(got, bytes.Clone(l)) }),
			SplitConfig{MaxBuffered: 64 << 10, Scanner: func() Scanner { sc = NewLineScanner(64 << 10); return sc }})
		var c percore.Conn
		h.(percore.OpenHandler).OnOpen(&c)
		for i := 0; i < len(line); i += 3 {
			h.OnData(&c, line[i:min(i+3, len(line))])
		}
		check(t, sc, got)
	})
}

// TestScannerProgressDropped: a partial line dropped (a Reset, the end of
// the stream) leaves no progress behind: the next line, of other bytes, is
// searched from its start.
func TestScannerProgressDropped(t *testing.T) {
	d := LineDecoder{MaxLine: 1024}
	var got []string
	emit := func(l []byte) bool { got = append(got, string(l)); return true }
	if _, err := d.Feed([]byte("partial without its end"), emit); err != nil {
		t.Fatal(err)
	}
	d.Reset()
	if _, err := d.Feed([]byte("a\nb"), emit); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Feed([]byte("c\n"), emit); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "a" || got[1] != "bc" {
		t.Fatalf("after a Reset: lines %q, want [a bc]", got)
	}
}
