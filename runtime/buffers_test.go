package runtime

import (
	"testing"

	"github.com/percore/percore/poller"
)

// These tests run without the kernel's network stack: the pool is plain
// loop-owned state (only its large buffers are mappings).

func TestBufPoolClassesAndMappings(t *testing.T) {
	var p bufPool
	for _, tc := range []struct {
		name   string
		n      int
		cap    int
		mapped bool
	}{
		{"smallest class", 1, 4 << 10, false},
		{"class boundary", 4 << 10, 4 << 10, false},
		{"next class", 4<<10 + 1, 8 << 10, false},
		{"below mappings", 8 << 10, 8 << 10, false},
		{"first mapped class", 8<<10 + 1, 16 << 10, true},
		{"largest class", 1 << 20, 1 << 20, true},
		{"past the classes, page-rounded", 1<<20 + 1, 1<<20 + 4<<10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := p.mappedBytes
			b := p.get(tc.n)
			if len(b) != 0 || cap(b) != tc.cap {
				t.Fatalf("get(%d): len %d cap %d, want 0 and %d", tc.n, len(b), cap(b), tc.cap)
			}
			b = append(b, make([]byte, cap(b))...) // the whole buffer is usable
			if got := p.mappedBytes - before; tc.mapped && got != tc.cap || !tc.mapped && got != 0 {
				t.Errorf("mapped %d bytes, want mapped=%v", got, tc.mapped)
			}
			p.put(b)
		})
	}
	p.releaseAll()
	if p.mappedBytes != 0 || p.pooledBytes != 0 || len(p.mapped) != 0 {
		t.Errorf("after releaseAll: mapped %d bytes (%d mappings), pooled %d", p.mappedBytes, len(p.mapped), p.pooledBytes)
	}
}

func TestBufPoolBudgetAndReuse(t *testing.T) {
	var p bufPool
	const size = 1 << 20 // 1 MiB: the budget keeps four
	var bufs [][]byte
	for range 6 {
		bufs = append(bufs, p.get(size))
	}
	if p.mappedBytes != 6*size {
		t.Fatalf("mapped %d, want %d", p.mappedBytes, 6*size)
	}
	for _, b := range bufs {
		p.put(b)
	}
	if p.pooledBytes != maxPooledBytes || p.mappedBytes != maxPooledBytes {
		t.Errorf("after put: pooled %d, mapped %d, want both %d (the rest unmapped at once)", p.pooledBytes, p.mappedBytes, maxPooledBytes)
	}
	// A buffer past the classes is never pooled.
	p.put(p.get(3 << 20))
	if p.mappedBytes != maxPooledBytes {
		t.Errorf("a 3 MiB buffer stayed mapped: %d", p.mappedBytes)
	}
	// Reuse: a get takes a pooled buffer instead of mapping one.
	b := p.get(size)
	if p.mappedBytes != maxPooledBytes || p.pooledBytes != maxPooledBytes-size {
		t.Errorf("get mapped anew: mapped %d pooled %d", p.mappedBytes, p.pooledBytes)
	}
	p.put(b)
	p.releaseAll()
}

func TestBufPoolTrimGivesBackWhatAPeriodDidNotUse(t *testing.T) {
	var p bufPool
	class := bufClass(64 << 10)
	a, b, c := p.get(64<<10), p.get(64<<10), p.get(64<<10)
	p.put(a)
	p.put(b)
	p.put(c)
	// The buffers came back during this period: a trim keeps them.
	if !p.trim() || len(p.free[class]) != 3 {
		t.Fatalf("the first trim left %d buffers, want 3", len(p.free[class]))
	}
	// During this period two are taken and given back: one was never
	// needed.
	x, y := p.get(64<<10), p.get(64<<10)
	p.put(x)
	p.put(y)
	if !p.trim() || len(p.free[class]) != 2 {
		t.Fatalf("the second trim left %d buffers, want 2", len(p.free[class]))
	}
	// A quiet period: everything goes back.
	if p.trim() {
		t.Error("trim reports buffers left after a quiet period")
	}
	if p.pooledBytes != 0 || p.mappedBytes != 0 {
		t.Errorf("after a quiet period: pooled %d, mapped %d", p.pooledBytes, p.mappedBytes)
	}
}

func TestBufPoolLeavesHeapBuffersToTheCollector(t *testing.T) {
	var p bufPool
	heap := make([]byte, 0, 2<<20) // not from the pool: never unmapped
	p.put(heap)
	if p.mappedBytes != 0 || p.pooledBytes != 0 {
		t.Errorf("a foreign buffer changed the pool: mapped %d pooled %d", p.mappedBytes, p.pooledBytes)
	}
}

func TestReadiness(t *testing.T) {
	const (
		in, out, hup, errv, rdhup = poller.In, poller.Out, poller.Hup, poller.Err, poller.RDHup
	)
	for _, tc := range []struct {
		name        string
		events      uint32
		st          connState
		full        bool
		read, write bool
	}{
		{"readable", in, 0, false, true, false},
		{"writable", out, 0, true, false, true},
		{"peer half-closed", rdhup, 0, false, true, false},
		{"paused: no read", in, stPaused, false, false, false},
		{"after EOF: no read", in | out, stEOF, false, false, true},
		{"closing: read to drop", in, stClosing, false, true, false},
		{"hang-up while waiting to write", hup, stPaused, true, false, true},
		{"error while waiting to write", errv, 0, true, true, true},
		{"hang-up, nothing to write", hup, stPaused, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Conn{state: tc.st}
			if tc.full {
				c.ep.flags = efFull
			}
			read, write := readiness(tc.events, c)
			if read != tc.read || write != tc.write {
				t.Errorf("readiness(%#x, %#x) = read %v write %v, want %v %v", tc.events, tc.st, read, write, tc.read, tc.write)
			}
		})
	}
}
