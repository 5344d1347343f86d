//go:build linux

package runtime

import (
	"slices"
	"testing"
)

// TestShedHooks checks that shedSpares runs what was registered with
// OnShedSpares, in order, each once per shed and after the loop has shed its
// own spares, and that a hook that panics is counted while the others
// still run.
func TestShedHooks(t *testing.T) {
	l, _, _ := newTestLoop(t, Config{}, &lingerHandler{closed: new([]error)})
	var ran []string
	l.bufs.put(l.bufs.get(minBuf))
	l.OnShedSpares(func() {
		ran = append(ran, "first")
		if l.bufs.pooledBytes != 0 {
			t.Errorf("a shed hook ran with %d bytes of buffers still pooled; want the loop's own shed first", l.bufs.pooledBytes)
		}
	})
	l.OnShedSpares(func() { panic("a shed hook's fault") })
	l.OnShedSpares(func() { ran = append(ran, "last") })
	l.shedSpares()
	if want := []string{"first", "last"}; !slices.Equal(ran, want) {
		t.Fatalf("shed hooks ran %q; want %q", ran, want)
	}
	if n := l.cnt[sPanics]; n != 1 {
		t.Fatalf("%d panics counted; want the hook's 1", n)
	}
	l.shedSpares()
	if len(ran) != 4 {
		t.Fatalf("%d hook runs after two sheds; want 4", len(ran))
	}
}
